package store

import (
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/linxGnu/grocksdb"
	"github.com/rs/zerolog"
)

func openTest(t testing.TB, dir string, faults *Faults) *DB {
	t.Helper()
	return openWith(t, Options{Dir: dir, Faults: faults})
}

// openWith opens the store opts describe (logging nowhere) and closes it when the test ends.
func openWith(t testing.TB, opts Options) *DB {
	t.Helper()
	opts.Log = zerolog.Nop()
	db, err := Open(opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", opts.Dir, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newID is safe to call from a goroutine a test started: crypto/rand.Read never returns an
// error (it crashes the program instead), so there is nothing to fail the test with.
func newID() [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return id
}

// makeRecord builds a record whose value is a real encoded hook of bodySize bytes. It never fails the
// test, so goroutines a test starts may call it.
func makeRecord(t testing.TB, tenant string, bodySize int, sinks ...SinkBinding) *Record {
	t.Helper()
	h := Hook{
		ID:          newID(),
		ReceivedAt:  time.Now().UnixMilli(),
		Tenant:      tenant,
		Source:      "src",
		ContentType: "application/json",
		Headers:     []Header{{Name: "x-test", Value: "1"}},
		Body:        make([]byte, bodySize),
	}
	for i := range h.Body {
		h.Body[i] = byte(i)
	}
	return &Record{
		ID:         h.ID,
		Tenant:     tenant,
		Source:     h.Source,
		ReceivedAt: h.ReceivedAt,
		Size:       uint32(bodySize),
		Value:      AppendHook(nil, &h),
		Sinks:      sinks,
	}
}

func makeRecords(t testing.TB, n int, tenant string) []*Record {
	recs := make([]*Record, n)
	for i := range recs {
		recs[i] = makeRecord(t, tenant, 64, SinkBinding{Index: 0, Type: "http"})
	}
	return recs
}

// gate is a BeforeCommit fault that holds the next commit (the synced write) until released, or fails it.
type gate struct {
	mu      sync.Mutex
	hold    bool
	fail    error
	entered chan struct{} // receives once per held commit, when it reaches the write
	release chan struct{}
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *gate) holdNext() {
	g.mu.Lock()
	g.hold = true
	g.mu.Unlock()
}

func (g *gate) failNext(err error) {
	g.mu.Lock()
	g.fail = err
	g.mu.Unlock()
}

func (g *gate) beforeCommit() error {
	g.mu.Lock()
	hold, fail := g.hold, g.fail
	g.hold, g.fail = false, nil
	g.mu.Unlock()
	if hold {
		g.entered <- struct{}{}
		<-g.release
	}
	return fail
}

func (g *gate) waitEntered(t testing.TB) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("held commit never reached the write")
	}
}

func (g *gate) open() { g.release <- struct{}{} }

func hookTenantSeqs(t testing.TB, db *DB) map[uint64]string {
	t.Helper()
	out := make(map[uint64]string)
	if err := db.ForEachHook(func(seq uint64, h *Hook) error {
		out[seq] = h.Tenant
		return nil
	}); err != nil {
		t.Fatalf("ForEachHook: %v", err)
	}
	return out
}

// flushAll flushes every column family of db's memtables to tables and waits for it.
func flushAll(t testing.TB, db *DB) {
	t.Helper()
	fo := grocksdb.NewDefaultFlushOptions()
	defer fo.Destroy()
	fo.SetWait(true)
	for _, cf := range db.cfs {
		if err := db.rdb.FlushCF(cf, fo); err != nil {
			t.Fatal(err)
		}
	}
}
