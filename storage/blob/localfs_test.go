package blob_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/storage/blob/blobtest"
)

func newLocal(t *testing.T) *blob.LocalFS {
	t.Helper()
	s, err := blob.NewLocalFS(filepath.Join(t.TempDir(), "root"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLocalFSConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store { return newLocal(t) })
}

// TestLocalFSPutIsAtomic: "a reader never sees a partial object" (blob.Store.Put). Readers open the key while
// it is overwritten with versions of different sizes and contents; every read must be one version exactly.
func TestLocalFSPutIsAtomic(t *testing.T) {
	s := newLocal(t)
	versions := [][]byte{bytes.Repeat([]byte{'a'}, 256<<10), bytes.Repeat([]byte{'b'}, 768<<10), bytes.Repeat([]byte{'c'}, 17)}
	blobtest.MustPut(t, s, "atomic/k", versions[0])

	const rounds = 100
	done := make(chan struct{})
	var reads, torn int
	readErr := make(chan error, 1)
	go func() {
		defer close(readErr)
		for {
			select {
			case <-done:
				return
			default:
			}
			rc, err := s.Get(context.Background(), "atomic/k")
			if err != nil {
				readErr <- err
				return
			}
			var buf bytes.Buffer
			_, err = buf.ReadFrom(rc)
			rc.Close()
			if err != nil {
				readErr <- err
				return
			}
			reads++
			if !slices.ContainsFunc(versions, func(v []byte) bool { return bytes.Equal(v, buf.Bytes()) }) {
				torn++
			}
		}
	}()
	for i := 0; i < rounds; i++ {
		blobtest.MustPut(t, s, "atomic/k", versions[i%len(versions)])
	}
	close(done)
	if err := <-readErr; err != nil {
		t.Fatalf("a read during overwrites failed: %v", err)
	}
	t.Logf("%d overwrites, %d whole reads, %d torn", rounds, reads, torn)
	if reads == 0 {
		t.Fatal("no read overlapped the overwrites")
	}
	if torn > 0 {
		t.Fatalf("%d of %d reads saw a partial or mixed object", torn, reads)
	}
}

// TestLocalFSKeysStayInsideRoot: "no key can name a file outside a LocalFS root" (package blob), including
// through a symbolic link planted below the root.
func TestLocalFSKeysStayInsideRoot(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	outside := filepath.Join(dir, "outside")
	if err := os.MkdirAll(outside, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := blob.NewLocalFS(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "abs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../outside", filepath.Join(root, "rel")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../outside/secret", filepath.Join(root, "file")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []string{"abs/secret", "rel/secret", "file"} {
		if rc, err := s.Get(ctx, k); err == nil {
			rc.Close()
			t.Errorf("Get(%s) through a symlink leaving the root succeeded", k)
		}
		if _, err := s.GetRange(ctx, k, 0, 1); err == nil {
			t.Errorf("GetRange(%s) through a symlink leaving the root succeeded", k)
		}
		_ = s.Delete(ctx, k) // removes at most the link itself
	}
	for _, k := range []string{"abs/secret", "rel/secret", "abs/new", "rel/new"} {
		if err := s.Put(ctx, k, strings.NewReader("x"), 1); err == nil {
			t.Errorf("Put(%s) through a symlink leaving the root succeeded", k)
		}
	}
	ents, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "secret" {
		t.Fatalf("the directory outside the root changed: %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Fatalf("the file outside the root changed: %q", b)
	}
	if got := blobtest.Keys(t, s, ""); len(got) != 0 {
		t.Fatalf("List followed a symlink out of the root: %v", got)
	}
}

// TestLocalFSFailedPutLeavesNothing: a Put that fails (short reader, cancelled context) removes its temporary
// file, and List never reports one that a crash left behind.
func TestLocalFSFailedPutLeavesNothing(t *testing.T) {
	s := newLocal(t)
	if err := s.Put(context.Background(), "f/x", strings.NewReader("abc"), 4); err == nil {
		t.Fatal("Put of 4 bytes from a 3-byte reader returned nil")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Put(ctx, "f/y", strings.NewReader("abc"), 3); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a cancelled context = %v, want context.Canceled", err)
	}
	ents, _ := os.ReadDir(filepath.Join(s.Root(), "f"))
	if len(ents) != 0 {
		t.Fatalf("failed Puts left files: %v", ents)
	}
	// A crash between create and rename leaves a temporary file: it is not an object.
	blobtest.MustPut(t, s, "f/z", []byte("z"))
	if err := os.WriteFile(filepath.Join(s.Root(), "f", "z~tmp-0123"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := blobtest.Keys(t, s, ""); !slices.Equal(got, []string{"f/z"}) {
		t.Fatalf("List = %v, want [f/z] (temporary files are not objects)", got)
	}
}

// TestLocalFSReopenSeesObjects: objects are files; a second store on the same root reads them.
func TestLocalFSReopenSeesObjects(t *testing.T) {
	s := newLocal(t)
	blobtest.MustPut(t, s, "p/q", []byte("persisted"))
	s2, err := blob.NewLocalFS(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	if got := blobtest.MustGet(t, s2, "p/q"); string(got) != "persisted" {
		t.Fatalf("reopened store read %q", got)
	}
}

func BenchmarkLocalFSPut(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20} {
		for _, par := range []int{1, 4} {
			b.Run(fmt.Sprintf("parallel=%d/size=%d", par, size), func(b *testing.B) {
				s, err := blob.NewLocalFS(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				data := blobtest.Random(b, size)
				b.ReportAllocs()
				b.SetBytes(int64(size))
				var mu sync.Mutex
				n := 0
				b.SetParallelism(par)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						mu.Lock()
						n++
						k := fmt.Sprintf("bench/k%d", n)
						mu.Unlock()
						if err := s.Put(context.Background(), k, bytes.NewReader(data), int64(size)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// TestLocalFSDeletePrunesEmptyDirectories: a Delete removes the directories it left empty, up to (never) the
// root, and a Put racing with Deletes in the same directory never finds its directory gone.
func TestLocalFSDeletePrunesEmptyDirectories(t *testing.T) {
	s := newLocal(t)
	ctx := context.Background()
	blobtest.MustPut(t, s, "a/b/c/d", []byte("d"))
	blobtest.MustPut(t, s, "a/x", []byte("x"))
	if err := s.Delete(ctx, "a/b/c/d"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "a", "b")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a/b after deleting its only object: %v, want removed", err)
	}
	if err := s.Delete(ctx, "a/x"); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(s.Root())
	if err != nil {
		t.Fatalf("the root itself was removed: %v", err)
	}
	if len(ents) != 0 {
		t.Fatalf("root holds %v after every object was deleted", ents)
	}
	// A directory created again after its removal is used as before.
	blobtest.MustPut(t, s, "a/b/c/d", []byte("again"))
	if got := blobtest.MustGet(t, s, "a/b/c/d"); string(got) != "again" {
		t.Fatalf("Get = %q", got)
	}

	const rounds = 200
	errs := make(chan error, 2)
	go func() {
		for i := range rounds {
			k := fmt.Sprintf("race/day-%d/put", i)
			if err := s.Put(ctx, k, strings.NewReader("p"), 1); err != nil {
				errs <- fmt.Errorf("Put(%s): %w", k, err)
				return
			}
		}
		errs <- nil
	}()
	go func() {
		for i := range rounds {
			k := fmt.Sprintf("race/day-%d/del", i)
			if err := s.Put(ctx, k, strings.NewReader("d"), 1); err != nil {
				errs <- fmt.Errorf("Put(%s): %w", k, err)
				return
			}
			if err := s.Delete(ctx, k); err != nil {
				errs <- fmt.Errorf("Delete(%s): %w", k, err)
				return
			}
		}
		errs <- nil
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := blobtest.Keys(t, s, "race/"); len(got) != rounds {
		t.Fatalf("%d objects under race/, want the %d put and never deleted", len(got), rounds)
	}
}

// A directory that is a plain file, or that vanished behind the store's back, fails the Put under it only while
// it is wrong: the store does not remember it as good.
func TestLocalFSRecoversFromABadDirectory(t *testing.T) {
	dir := t.TempDir()
	l, err := blob.NewLocalFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put := func(key string) error { return l.Put(ctx, key, strings.NewReader("x"), 1) }

	if err := os.WriteFile(filepath.Join(dir, "d"), []byte("in the way"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := put("d/x"); err == nil {
		t.Fatal("Put under a plain file succeeded")
	}
	if err := os.Remove(filepath.Join(dir, "d")); err != nil {
		t.Fatal(err)
	}
	if err := put("d/x"); err != nil {
		t.Fatalf("Put after the file went: %v", err)
	}

	if err := os.RemoveAll(filepath.Join(dir, "d")); err != nil {
		t.Fatal(err)
	}
	if err := put("d/y"); err == nil {
		t.Log("the first Put after the directory vanished recreated it at once")
	}
	if err := put("d/y"); err != nil {
		t.Fatalf("Put after the directory vanished keeps failing: %v", err)
	}
}
