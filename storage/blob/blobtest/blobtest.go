// Package blobtest is the conformance suite every blob.Store runs.
//
// Invariant: a store that passes Run honours the blob.Store contract as the archive, backups and the claim
// check rely on it — an object reads back byte-exact whatever its size (empty, multi-MiB) and whatever reader
// wrote it; ranged reads return exactly the range or ErrInvalidRange; an overwrite replaces the whole object;
// List reports every object under a prefix, in key order, honouring '/' boundaries, and stops on the callback's
// error; Delete is idempotent; DeletePrefix removes every object under a prefix and nothing beside it; a missing object is ErrNotFound; every call refuses an invalid key with
// ErrInvalidKey; concurrent Puts are safe and each object ends whole.
package blobtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/storage/blob"
)

// callTimeout bounds every call of the suite; a store that needs longer on this machine is broken.
const callTimeout = 30 * time.Second

// Run runs the suite. newStore returns a new, empty store each time it is called.
func Run(t *testing.T, newStore func(t *testing.T) blob.Store) {
	t.Run("PutGetByteExact", func(t *testing.T) { putGet(t, newStore(t)) })
	t.Run("PutFromPlainReader", func(t *testing.T) { plainReader(t, newStore(t)) })
	t.Run("ShortReaderFails", func(t *testing.T) { shortReader(t, newStore(t)) })
	t.Run("GetRange", func(t *testing.T) { getRange(t, newStore(t)) })
	t.Run("OverwriteReplacesWhole", func(t *testing.T) { overwrite(t, newStore(t)) })
	t.Run("ListKeyOrderAndPrefixBoundaries", func(t *testing.T) { list(t, newStore(t)) })
	t.Run("ListStopsOnCallbackError", func(t *testing.T) { listStop(t, newStore(t)) })
	t.Run("DeleteIsIdempotent", func(t *testing.T) { deleteIdempotent(t, newStore(t)) })
	t.Run("DeletePrefixSparesSiblings", func(t *testing.T) { deletePrefix(t, newStore(t)) })
	t.Run("MissingIsNotFound", func(t *testing.T) { missing(t, newStore(t)) })
	t.Run("InvalidKeysRefused", func(t *testing.T) { invalidKeys(t, newStore(t)) })
	t.Run("ConcurrentPuts", func(t *testing.T) { concurrentPuts(t, newStore(t)) })
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return c
}

// Random returns n random bytes.
func Random(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// MustPut writes data under key and fails the test on error.
func MustPut(t testing.TB, s blob.Store, key string, data []byte) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := s.Put(c, key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put(%s, %d bytes): %v", key, len(data), err)
	}
}

// MustGet reads the object under key whole and fails the test on error.
func MustGet(t testing.TB, s blob.Store, key string) []byte {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	rc, err := s.Get(c, key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%s): read: %v", key, err)
	}
	return b
}

// Keys lists the keys under prefix and fails the test on error.
func Keys(t testing.TB, s blob.Store, prefix string) []string {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var keys []string
	if err := s.List(c, prefix, func(o blob.Object) error { keys = append(keys, o.Key); return nil }); err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return keys
}

func equal(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %d bytes, want %d bytes (equal lengths: %v; contents differ)", what, len(got), len(want), len(got) == len(want))
	}
}

func putGet(t *testing.T, s blob.Store) {
	for _, n := range []int{0, 1, 4096, 5<<20 + 3} {
		key := fmt.Sprintf("objects/size-%d", n)
		data := Random(t, n)
		MustPut(t, s, key, data)
		equal(t, "Get "+key, MustGet(t, s, key), data)
	}
	// Sizes are what List reports.
	var sizes []int64
	if err := s.List(ctx(t), "objects/", func(o blob.Object) error { sizes = append(sizes, o.Size); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, 1, 4096, 5<<20 + 3}; !slices.Equal(sizes, want) {
		t.Fatalf("List sizes = %v, want %v", sizes, want)
	}
}

// plainReader writes through a reader that is only an io.Reader (a pipe, a hash tee), not a bytes.Reader.
func plainReader(t *testing.T, s blob.Store) {
	data := Random(t, 1<<20+7)
	if err := s.Put(ctx(t), "plain/x", struct{ io.Reader }{bytes.NewReader(data)}, int64(len(data))); err != nil {
		t.Fatalf("Put from a plain reader: %v", err)
	}
	equal(t, "Get plain/x", MustGet(t, s, "plain/x"), data)
	// Only size bytes are taken from a longer reader.
	if err := s.Put(ctx(t), "plain/y", struct{ io.Reader }{bytes.NewReader(data)}, 100); err != nil {
		t.Fatalf("Put 100 of %d bytes: %v", len(data), err)
	}
	equal(t, "Get plain/y", MustGet(t, s, "plain/y"), data[:100])
}

func shortReader(t *testing.T, s blob.Store) {
	data := Random(t, 100)
	for name, r := range map[string]io.Reader{
		"seekable": bytes.NewReader(data),
		"plain":    struct{ io.Reader }{bytes.NewReader(data)},
	} {
		key := "short/" + name
		if err := s.Put(ctx(t), key, r, 101); err == nil {
			t.Fatalf("Put of 101 bytes from a %s reader holding 100 returned nil", name)
		}
		if _, err := s.Get(ctx(t), key); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("after a failed Put, Get(%s) = %v, want ErrNotFound", key, err)
		}
	}
	if got := Keys(t, s, ""); len(got) != 0 {
		t.Fatalf("failed Puts left objects: %v", got)
	}
}

func getRange(t *testing.T, s blob.Store) {
	data := Random(t, 10_000)
	MustPut(t, s, "r/obj", data)
	for _, c := range []struct{ off, n int64 }{{0, 10_000}, {0, 1}, {9_999, 1}, {1234, 5678}, {10_000, 0}, {0, 0}, {500, 0}} {
		got, err := s.GetRange(ctx(t), "r/obj", c.off, c.n)
		if err != nil {
			t.Fatalf("GetRange(%d, %d): %v", c.off, c.n, err)
		}
		equal(t, fmt.Sprintf("GetRange(%d, %d)", c.off, c.n), got, data[c.off:c.off+c.n])
	}
	for _, c := range []struct{ off, n int64 }{{0, 10_001}, {9_999, 2}, {10_000, 1}, {10_001, 0}, {20_000, 5}, {-1, 5}, {0, -1}} {
		got, err := s.GetRange(ctx(t), "r/obj", c.off, c.n)
		if !errors.Is(err, blob.ErrInvalidRange) {
			t.Fatalf("GetRange(%d, %d) = %d bytes, %v; want ErrInvalidRange", c.off, c.n, len(got), err)
		}
	}
	if _, err := s.GetRange(ctx(t), "r/missing", 0, 1); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("GetRange of a missing object = %v, want ErrNotFound", err)
	}
}

func overwrite(t *testing.T, s blob.Store) {
	long, short := Random(t, 64<<10), Random(t, 10)
	MustPut(t, s, "o/k", long)
	MustPut(t, s, "o/k", short)
	equal(t, "Get after overwrite", MustGet(t, s, "o/k"), short)
	MustPut(t, s, "o/k", nil)
	equal(t, "Get after overwrite with empty", MustGet(t, s, "o/k"), nil)
	if got := Keys(t, s, ""); !slices.Equal(got, []string{"o/k"}) {
		t.Fatalf("List after overwrites = %v, want [o/k]", got)
	}
}

func list(t *testing.T, s blob.Store) {
	// '-' (0x2d) < '/' (0x2f) < '0' < 'A' < '_' < 'a': a file-system walk in directory order gets this wrong.
	// No key is also a directory of another ("a/b" and "a/b/c"): a file-system store cannot hold both.
	keys := []string{"b", "a/bc", "a/b/c", "a/b/d/e", "a-b", "a/b-c", "ab", "a/b0", "a/B", "a/_", "a=1/x", "z/y/x"}
	for i, k := range keys {
		MustPut(t, s, k, Random(t, i))
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	f := func(prefix string, want ...string) {
		t.Helper()
		got := Keys(t, s, prefix)
		if !slices.Equal(got, want) {
			t.Fatalf("List(%q) = %q, want %q", prefix, got, want)
		}
	}
	f("", sorted...)
	f("a/b/", "a/b/c", "a/b/d/e")
	f("a/b", "a/b-c", "a/b/c", "a/b/d/e", "a/b0", "a/bc")
	f("a/b/d/", "a/b/d/e")
	f("a/b/c", "a/b/c")
	f("a", "a-b", "a/B", "a/_", "a/b-c", "a/b/c", "a/b/d/e", "a/b0", "a/bc", "a=1/x", "ab")
	f("a/", "a/B", "a/_", "a/b-c", "a/b/c", "a/b/d/e", "a/b0", "a/bc")
	f("z/", "z/y/x")
	f("nothing/")
	f("nothing")
	f("a/b/c/")
	// Sizes come back with the keys.
	if err := s.List(ctx(t), "", func(o blob.Object) error {
		i := slices.Index(keys, o.Key)
		if int64(i) != o.Size {
			return fmt.Errorf("list reported %s with size %d, want %d", o.Key, o.Size, i)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func listStop(t *testing.T, s blob.Store) {
	for _, k := range []string{"l/1", "l/2", "l/3"} {
		MustPut(t, s, k, []byte(k))
	}
	stop := errors.New("enough")
	var seen []string
	err := s.List(ctx(t), "l/", func(o blob.Object) error { seen = append(seen, o.Key); return stop })
	if err != stop {
		t.Fatalf("List returned %v, want the callback's error as is", err)
	}
	if !slices.Equal(seen, []string{"l/1"}) {
		t.Fatalf("List went on after the callback's error: saw %v", seen)
	}
}

func deleteIdempotent(t *testing.T, s blob.Store) {
	MustPut(t, s, "d/x", []byte("x"))
	MustPut(t, s, "d/y", []byte("y"))
	for i := 0; i < 2; i++ {
		if err := s.Delete(ctx(t), "d/x"); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	if err := s.Delete(ctx(t), "never/was"); err != nil {
		t.Fatalf("Delete of a key never written: %v", err)
	}
	if err := s.Delete(ctx(t), "d"); err != nil {
		t.Fatalf("Delete of a key that is only a prefix: %v", err)
	}
	if _, err := s.Get(ctx(t), "d/x"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
	}
	if got := Keys(t, s, ""); !slices.Equal(got, []string{"d/y"}) {
		t.Fatalf("List after Delete = %v, want [d/y]", got)
	}
	equal(t, "Get d/y", MustGet(t, s, "d/y"), []byte("y"))
}

func deletePrefix(t *testing.T, s blob.Store) {
	gone := []string{"claims/tenant=a/dt=2026-01-01/p1", "claims/tenant=a/dt=2026-01-01/p2", "claims/tenant=a/dt=2026-01-02/p3"}
	kept := []string{"claims/tenant=ab/dt=2026-01-01/p4", "claims/tenant=b/dt=2026-01-01/p5", "claims/tenant=a-1", "other/tenant=a/x"}
	for _, k := range append(append([]string{}, gone...), kept...) {
		MustPut(t, s, k, []byte(k))
	}
	n, err := s.DeletePrefix(ctx(t), "claims/tenant=a/")
	if err != nil || n != len(gone) {
		t.Fatalf("DeletePrefix = %d, %v; want %d, nil", n, err, len(gone))
	}
	if got := Keys(t, s, "claims/tenant=a/"); len(got) != 0 {
		t.Fatalf("List under the deleted prefix = %v, want none", got)
	}
	slices.Sort(kept)
	if got := Keys(t, s, ""); !slices.Equal(got, kept) {
		t.Fatalf("List after DeletePrefix = %v, want %v", got, kept)
	}
	// Again: nothing left to delete is not an error.
	if n, err := s.DeletePrefix(ctx(t), "claims/tenant=a/"); err != nil || n != 0 {
		t.Fatalf("a repeated DeletePrefix = %d, %v; want 0, nil", n, err)
	}
	// Never a whole store, a prefix without its '/' boundary, or an invalid key.
	for _, p := range []string{"", "/", "claims/tenant=a", "claims/../", "claims//"} {
		if _, err := s.DeletePrefix(ctx(t), p); !errors.Is(err, blob.ErrInvalidKey) {
			t.Fatalf("DeletePrefix(%q) = %v, want ErrInvalidKey", p, err)
		}
	}
	if got := Keys(t, s, ""); !slices.Equal(got, kept) {
		t.Fatalf("List after refused DeletePrefix calls = %v, want %v", got, kept)
	}
}

func missing(t *testing.T, s blob.Store) {
	MustPut(t, s, "m/a/b", []byte("b"))
	for _, k := range []string{"m/none", "m/a", "other"} { // "m/a" exists only as a prefix
		if _, err := s.Get(ctx(t), k); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("Get(%s) = %v, want ErrNotFound", k, err)
		}
		if _, err := s.GetRange(ctx(t), k, 0, 0); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("GetRange(%s) = %v, want ErrNotFound", k, err)
		}
	}
}

func invalidKeys(t *testing.T, s blob.Store) {
	for _, k := range []string{"", "/abs", "a/", "a//b", "../escape", "a/../../b", "./a", "a/.", "a b", "a\\b", "a\x00b", "é", "a~tmp-1"} {
		if err := s.Put(ctx(t), k, bytes.NewReader([]byte("x")), 1); !errors.Is(err, blob.ErrInvalidKey) {
			t.Fatalf("Put(%q) = %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Get(ctx(t), k); !errors.Is(err, blob.ErrInvalidKey) {
			t.Fatalf("Get(%q) = %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.GetRange(ctx(t), k, 0, 1); !errors.Is(err, blob.ErrInvalidKey) {
			t.Fatalf("GetRange(%q) = %v, want ErrInvalidKey", k, err)
		}
		if err := s.Delete(ctx(t), k); !errors.Is(err, blob.ErrInvalidKey) {
			t.Fatalf("Delete(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
	for _, p := range []string{"/", "../", "a//", "a/../", "a b/"} {
		if err := s.List(ctx(t), p, func(blob.Object) error { return nil }); !errors.Is(err, blob.ErrInvalidKey) {
			t.Fatalf("List(%q) = %v, want ErrInvalidKey", p, err)
		}
	}
	if got := Keys(t, s, ""); len(got) != 0 {
		t.Fatalf("refused keys left objects: %v", got)
	}
}

func concurrentPuts(t *testing.T, s blob.Store) {
	const writers = 8
	versions := make([][]byte, writers)
	for i := range versions {
		versions[i] = Random(t, 32<<10+i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for i := 0; i < writers; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			// Distinct keys in one new directory: the directories are created concurrently.
			key := fmt.Sprintf("c/new/dir/k%d", i)
			if err := s.Put(context.Background(), key, bytes.NewReader(versions[i]), int64(len(versions[i]))); err != nil {
				errs <- fmt.Errorf("Put(%s): %w", key, err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := s.Put(context.Background(), "c/same", bytes.NewReader(versions[i]), int64(len(versions[i]))); err != nil {
				errs <- fmt.Errorf("Put(c/same) #%d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	for i := 0; i < writers; i++ {
		equal(t, fmt.Sprintf("Get c/new/dir/k%d", i), MustGet(t, s, fmt.Sprintf("c/new/dir/k%d", i)), versions[i])
	}
	same := MustGet(t, s, "c/same")
	if !slices.ContainsFunc(versions, func(v []byte) bool { return bytes.Equal(v, same) }) {
		t.Fatalf("c/same after concurrent Puts is none of the versions written (%d bytes)", len(same))
	}
	if got := Keys(t, s, "c/"); len(got) != writers+1 {
		t.Fatalf("List after concurrent Puts = %d keys (%v), want %d", len(got), got, writers+1)
	}
}
