package reference

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/linxGnu/grocksdb"

	"github.com/ankusa-go/ankusa/store"
)

// DeliverOptions say what Deliver drains and where to.
type DeliverOptions struct {
	// Dir is a closed Ankusa store (the RocksDB directory of store.Open).
	Dir string
	// URL receives one POST per due row.
	URL string
	// Conns is the number of workers, each POSTing over the pool's keep-alive connections (default 32,
	// dispatch.concurrency's default).
	Conns int
	// Batch is how many delivered rows one delete batch carries at most (default 256).
	Batch int
}

// DeliverReport is what one Deliver run did.
type DeliverReport struct {
	Delivered int
	Failed    int           // POSTs that got no 2xx (retried until they do)
	Elapsed   time.Duration // from before the store was opened until the last delete
}

// HooksPerSec is the delivered rate of the run.
func (r DeliverReport) HooksPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Delivered) / r.Elapsed.Seconds()
}

// job is one due row on its way to the sink; delivered rows come back to the deleter with it.
type job struct {
	dueKey []byte
	seq    uint64
	sink   uint16
	id     string
	ctype  string
	source string
	body   []byte
}

// Deliver is the delivery yardstick: the program a competent engineer writes in an afternoon to drain the
// due rows of an Ankusa store to one HTTP endpoint. One goroutine walks the due keys of the index CF in key
// order and reads each row's hook; Conns workers POST them (Content-Type, X-Ankusa-Id, X-Ankusa-Source) with
// a net/http client whose pool keeps Conns connections alive, retrying a failure after 100 ms; one goroutine
// deletes the delivered rows (due key, delivery row, hook) in non-synced batches of up to Batch. It keeps no
// counters, no fairness, no ordering and no retry schedule: the ratio of Ankusa's drain rate to this one is
// the price of those. Deliver returns when every due row found at the start was delivered and deleted.
func Deliver(ctx context.Context, o DeliverOptions) (DeliverReport, error) {
	if o.Conns <= 0 {
		o.Conns = 32
	}
	if o.Batch <= 0 {
		o.Batch = 256
	}
	// The clock includes opening the store (replaying its WAL), as the node's does.
	start := time.Now()
	opts := grocksdb.NewDefaultOptions()
	defer opts.Destroy()
	names, err := grocksdb.ListColumnFamilies(opts, o.Dir)
	if err != nil {
		return DeliverReport{}, fmt.Errorf("reference: cannot list the column families of %s: %w", o.Dir, err)
	}
	cfOpts := make([]*grocksdb.Options, len(names))
	for i := range cfOpts {
		cfOpts[i] = opts
	}
	db, handles, err := grocksdb.OpenDbColumnFamilies(opts, o.Dir, names, cfOpts)
	if err != nil {
		return DeliverReport{}, fmt.Errorf("reference: cannot open %s: %w", o.Dir, err)
	}
	defer func() {
		for _, h := range handles {
			h.Destroy()
		}
		db.Close()
	}()
	cf := map[string]*grocksdb.ColumnFamilyHandle{}
	for i, n := range names {
		cf[n] = handles[i]
	}
	for _, n := range []string{"hooks", "deliveries", "index"} {
		if cf[n] == nil {
			return DeliverReport{}, fmt.Errorf("reference: %s has no column family %q", o.Dir, n)
		}
	}

	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        o.Conns,
		MaxIdleConnsPerHost: o.Conns,
		MaxConnsPerHost:     o.Conns,
		IdleConnTimeout:     90 * time.Second,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	jobs := make(chan *job, 4*o.Conns)
	delivered := make(chan *job, 4*o.Conns)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var rep DeliverReport
	var readErr, delErr error
	var failed sync.Map // worker → failures, summed at the end
	var wg, workers sync.WaitGroup

	wg.Add(1)
	go func() { // reader
		defer wg.Done()
		defer close(jobs)
		readErr = readDue(ctx, db, cf["index"], cf["hooks"], jobs)
	}()
	for w := range o.Conns {
		workers.Add(1)
		go func() {
			defer workers.Done()
			n := 0
			for j := range jobs {
				for {
					err := postJob(ctx, client, o.URL, j)
					if err == nil {
						break
					}
					n++
					select {
					case <-ctx.Done():
						failed.Store(w, n)
						return
					case <-time.After(100 * time.Millisecond):
					}
				}
				delivered <- j
			}
			failed.Store(w, n)
		}()
	}
	go func() { workers.Wait(); close(delivered) }()
	wg.Add(1)
	go func() { // deleter
		defer wg.Done()
		rep.Delivered, delErr = deleteDelivered(db, cf["index"], cf["deliveries"], cf["hooks"], o.Batch, delivered)
		if delErr != nil {
			cancel()
			for range delivered { // let the workers finish
			}
		}
	}()
	wg.Wait()
	rep.Elapsed = time.Since(start)
	failed.Range(func(_, v any) bool { rep.Failed += v.(int); return true })
	return rep, errors.Join(readErr, delErr, ctx.Err())
}

// readDue walks the due keys of every tenant in key order and hands each row's hook to the workers.
func readDue(ctx context.Context, db *grocksdb.DB, index, hooks *grocksdb.ColumnFamilyHandle, jobs chan<- *job) error {
	ro := grocksdb.NewDefaultReadOptions()
	defer ro.Destroy()
	ro.SetIterateUpperBound([]byte{store.IndexDue + 1})
	it := db.NewIteratorCF(ro, index)
	defer it.Close()
	for it.Seek([]byte{store.IndexDue}); it.Valid(); it.Next() {
		k := bytes.Clone(it.Key().Data())
		dk, err := store.ParseDueKey(k)
		if err != nil {
			return fmt.Errorf("reference: %w", err)
		}
		v, err := db.GetCF(ro, hooks, store.AppendHookKey(nil, dk.Seq))
		if err != nil {
			return fmt.Errorf("reference: cannot read hook %d: %w", dk.Seq, err)
		}
		h, err := store.DecodeHook(v.Data()) // copies what it keeps
		v.Free()
		if err != nil {
			return fmt.Errorf("reference: hook %d: %w", dk.Seq, err)
		}
		j := &job{dueKey: k, seq: dk.Seq, sink: dk.Sink, id: uuid.UUID(h.ID).String(), ctype: h.ContentType,
			source: h.Source, body: h.Body}
		select {
		case jobs <- j:
		case <-ctx.Done():
			return nil
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reference: cannot scan the due keys: %w", err)
	}
	return nil
}

func postJob(ctx context.Context, client *http.Client, url string, j *job) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(j.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", j.ctype)
	req.Header.Set("X-Ankusa-Id", j.id)
	req.Header.Set("X-Ankusa-Source", j.source)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("reference: %s answered %d", url, resp.StatusCode)
	}
	return nil
}

// deleteDelivered deletes each delivered row's due key, delivery row and hook, in batches of up to batch rows
// or whatever arrived within 10 ms, and returns how many rows it deleted.
func deleteDelivered(db *grocksdb.DB, index, deliveries, hooks *grocksdb.ColumnFamilyHandle, batch int, in <-chan *job) (int, error) {
	wo := grocksdb.NewDefaultWriteOptions()
	defer wo.Destroy()
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	n, pending := 0, 0
	flush := func() error {
		if pending == 0 {
			return nil
		}
		if err := db.Write(wo, wb); err != nil {
			return fmt.Errorf("reference: cannot delete delivered rows: %w", err)
		}
		n += pending
		pending = 0
		wb.Clear()
		return nil
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var key []byte
	for {
		select {
		case j, ok := <-in:
			if !ok {
				return n, flush()
			}
			wb.DeleteCF(index, j.dueKey)
			key = store.DeliveryKey{Seq: j.seq, Sink: j.sink}.Append(key[:0])
			wb.DeleteCF(deliveries, key)
			wb.DeleteCF(hooks, store.AppendHookKey(key[:0], j.seq))
			if pending++; pending >= batch {
				if err := flush(); err != nil {
					return n, err
				}
			}
		case <-tick.C:
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
}
