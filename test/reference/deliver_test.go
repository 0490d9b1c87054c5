package reference

import (
	"context"
	"testing"

	"github.com/linxGnu/grocksdb"

	"github.com/ankusa-go/ankusa/test/load"
)

// The delivery reference drains a store's backlog: every due row reaches the sink once with its hook id, and
// its due key, delivery row and hook are gone afterwards.
func TestDeliverDrainsTheBacklog(t *testing.T) {
	const n = 3000
	dir := t.TempDir()
	if err := SeedBacklog(dir, "http", n); err != nil {
		t.Fatal(err)
	}
	rec, err := load.StartRecorder("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rec.Close(); err != nil {
			t.Error(err)
		}
	}()
	rep, err := Deliver(context.Background(), DeliverOptions{Dir: dir, URL: rec.URL(), Conns: 8, Batch: 100})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Delivered != n || rec.Received() != n || rep.Failed != 0 {
		t.Fatalf("report %+v, recorder received %d distinct ids; want %d", rep, rec.Received(), n)
	}
	if d := rec.Deliveries(context.Background(), 0); d.Duplicates != 0 {
		t.Fatalf("%d ids arrived twice", d.Duplicates)
	}
	// Nothing is left: a second run finds no due row.
	again, err := Deliver(context.Background(), DeliverOptions{Dir: dir, URL: rec.URL()})
	if err != nil || again.Delivered != 0 {
		t.Fatalf("second run %+v, %v; want nothing delivered", again, err)
	}
	opts := grocksdb.NewDefaultOptions()
	defer opts.Destroy()
	names, err := grocksdb.ListColumnFamilies(opts, dir)
	if err != nil {
		t.Fatal(err)
	}
	db, cfs, err := grocksdb.OpenDbForReadOnlyColumnFamilies(opts, dir, names, sameOptions(opts, len(names)), false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, cf := range cfs {
			cf.Destroy()
		}
		db.Close()
	}()
	ro := grocksdb.NewDefaultReadOptions()
	defer ro.Destroy()
	for i, name := range names {
		if name != "hooks" && name != "deliveries" {
			continue
		}
		it := db.NewIteratorCF(ro, cfs[i])
		it.SeekToFirst()
		left := it.Valid()
		it.Close()
		if left {
			t.Errorf("column family %s still holds rows", name)
		}
	}
}

func sameOptions(o *grocksdb.Options, n int) []*grocksdb.Options {
	out := make([]*grocksdb.Options, n)
	for i := range out {
		out[i] = o
	}
	return out
}
