package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/store"
)

// memStore is an in-memory blob.Store. A fault is injected by setting fail: every call then returns it.
type memStore struct {
	name string
	mu   sync.Mutex
	objs map[string][]byte
	fail error
}

func newMem(name string) *memStore { return &memStore{name: name, objs: map[string][]byte{}} }

func (m *memStore) err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fail
}

func (m *memStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := m.err(); err != nil {
		return err
	}
	if !blob.ValidKey(key) {
		return blob.ErrInvalidKey
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if int64(len(b)) != size {
		return fmt.Errorf("put %s: %d bytes, size %d", key, len(b), size)
	}
	m.mu.Lock()
	m.objs[key] = b
	m.mu.Unlock()
	return nil
}

func (m *memStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := m.err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, blob.ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(slices.Clone(b))), nil
}

func (m *memStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	rc, err := m.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	b, _ := io.ReadAll(rc)
	if off+n > int64(len(b)) {
		return nil, errors.New("range past the end")
	}
	return b[off : off+n], nil
}

func (m *memStore) List(ctx context.Context, prefix string, fn func(blob.Object) error) error {
	if err := m.err(); err != nil {
		return err
	}
	m.mu.Lock()
	var objs []blob.Object
	for k, v := range m.objs {
		if strings.HasPrefix(k, prefix) {
			objs = append(objs, blob.Object{Key: k, Size: int64(len(v))})
		}
	}
	m.mu.Unlock()
	slices.SortFunc(objs, func(a, b blob.Object) int { return strings.Compare(a.Key, b.Key) })
	for _, o := range objs {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

func (m *memStore) Delete(ctx context.Context, key string) error {
	if err := m.err(); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.objs, key)
	m.mu.Unlock()
	return nil
}

func (m *memStore) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	if err := m.err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k := range m.objs {
		if strings.HasPrefix(k, prefix) {
			delete(m.objs, k)
			n++
		}
	}
	return n, nil
}

func (m *memStore) String() string { return "mem:" + m.name }

func (m *memStore) setFail(err error) {
	m.mu.Lock()
	m.fail = err
	m.mu.Unlock()
}

// keys lists the store's keys under prefix.
func (m *memStore) keys(prefix string) []string {
	var ks []string
	_ = m.List(context.Background(), prefix, func(o blob.Object) error { ks = append(ks, o.Key); return nil })
	return ks
}

// snapshot copies every object.
func (m *memStore) snapshot() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := make(map[string]string, len(m.objs))
	for k, v := range m.objs {
		s[k] = string(v)
	}
	return s
}

var testKey = []byte("0123456789abcdef-signing")

// openStore opens a store in dir, closed when the test ends.
func openStore(t testing.TB, dir string) *store.DB {
	t.Helper()
	db, err := store.Open(store.Options{Dir: dir, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// commit stores n hooks with one delivery row each, one commit each, and returns their ids.
func commit(t testing.TB, db *store.DB, n int) [][16]byte {
	t.Helper()
	var ids [][16]byte
	for range n {
		id, rec := hookRecord(nil)
		if _, err := db.CommitHooks([]*store.Record{rec}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// commitSized stores n hooks of size-byte bodies in one commit.
func commitSized(t testing.TB, db *store.DB, n, size int) {
	t.Helper()
	recs := make([]*store.Record, n)
	for i := range recs {
		body := make([]byte, size)
		_, _ = rand.Read(body)
		_, recs[i] = hookRecord(body)
	}
	if _, err := db.CommitHooks(recs); err != nil {
		t.Fatal(err)
	}
}

// hookRecord is a record of a new hook with body (a small JSON one when nil) and one http sink.
func hookRecord(body []byte) ([16]byte, *store.Record) {
	var id [16]byte
	_, _ = rand.Read(id[:])
	if body == nil {
		body = []byte(fmt.Sprintf(`{"n":%x}`, id))
	}
	h := store.Hook{ID: id, Tenant: "t", Source: "src", ContentType: "application/json", Body: body}
	return id, &store.Record{ID: id, Tenant: "t", Source: "src", Size: uint32(len(h.Body)), Value: store.AppendHook(nil, &h),
		Sinks: []store.SinkBinding{{Index: 0, Type: "http"}}}
}

// hookIDs reads every hook id in the store at dir (opened and closed here).
func hookIDs(t testing.TB, dir string) map[[16]byte]bool {
	t.Helper()
	db, err := store.Open(store.Options{Dir: dir, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ids := map[[16]byte]bool{}
	if err := db.ForEachHook(func(_ uint64, h *store.Hook) error { ids[h.ID] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	return ids
}

func newRunner(t testing.TB, targets ...Target) *Runner {
	return NewRunner(Options{Targets: targets, SigningKey: testKey, Keep: 3, Writer: "node-a",
		WorkDir: filepath.Join(t.TempDir(), "work"), Log: zerolog.Nop()})
}

func restoreOpts(dir string, targets ...Target) RestoreOptions {
	return RestoreOptions{Targets: targets, SigningKey: testKey, StoreDir: dir, Log: zerolog.Nop()}
}
