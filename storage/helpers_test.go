package storage

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/store"
)

// newLocal is a LocalFS store in a temporary directory.
func newLocal(t testing.TB) blob.Store {
	t.Helper()
	l, err := blob.NewLocalFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// failingPuts fails the first n Puts of the store it wraps (a fault injected by wrapping one method).
type failingPuts struct {
	blob.Store
	n atomic.Int64
}

var errInjected = errors.New("injected put failure")

func (f *failingPuts) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if f.n.Add(-1) >= 0 {
		return errInjected
	}
	return f.Store.Put(ctx, key, r, size)
}

// keys lists the objects of bs whose key ends with suffix.
func keys(t *testing.T, bs blob.Store, suffix string) []string {
	t.Helper()
	var ks []string
	err := bs.List(context.Background(), "", func(o blob.Object) error {
		if strings.HasSuffix(o.Key, suffix) {
			ks = append(ks, o.Key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func openStore(t testing.TB, dir string) *store.DB {
	t.Helper()
	db, err := store.Open(store.Options{Dir: dir, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

var idSeq atomic.Uint64

// hookAt builds an archived record of body received at (unix ms), with sinks.
func hookAt(at int64, body []byte, sinks ...store.SinkBinding) *store.Record {
	var id [16]byte
	n := idSeq.Add(1)
	for i := range 8 {
		id[15-i] = byte(n >> (8 * i))
	}
	id[0] = 0x01
	h := store.Hook{ID: id, ReceivedAt: at, Tenant: "t1", Source: "src", ContentType: "application/json",
		Headers: []store.Header{{Name: "x-signature", Value: "sha256=00"}}, Body: body}
	return &store.Record{ID: id, Tenant: h.Tenant, Source: h.Source, ReceivedAt: at, Size: uint32(len(body)),
		Value: store.AppendHook(nil, &h), Sinks: sinks, Archive: true}
}

func commit(t testing.TB, db *store.DB, recs ...*store.Record) {
	t.Helper()
	if _, err := db.CommitHooks(recs); err != nil {
		t.Fatal(err)
	}
}

func body(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*31 + j*7)
	}
	return b
}

func newTestCompactor(t testing.TB, db func() *store.DB, bs blob.Store, mut func(*CompactorOptions)) *Compactor {
	t.Helper()
	o := CompactorOptions{DB: db, Blob: bs, Node: "node-a", RollBytes: 1 << 20, Log: zerolog.Nop()}
	if mut != nil {
		mut(&o)
	}
	c, err := NewCompactor(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// compactAll compacts until no obligation is left, failing the test on any error.
func compactAll(t testing.TB, c *Compactor) (segments int) {
	t.Helper()
	for range 10000 {
		res, err := c.Compact(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Segment != nil {
			segments++
		}
		if !res.More {
			return segments
		}
	}
	t.Fatal("compaction never ended")
	return 0
}

func now() int64 { return time.Now().UnixMilli() }
