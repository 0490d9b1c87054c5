package reference

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/linxGnu/grocksdb"
)

type ack struct {
	Status string `json:"status"`
	ID     string `json:"id"`
}

// post sends n bodies from workers goroutines and returns id → body for every 201.
func post(t *testing.T, url string, workers, n int, tag string) map[string]string {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	acked := map[string]string{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				body := fmt.Sprintf(`{"tag":%q,"n":%d}`, tag, i)
				resp, err := client.Post(url, "application/json", bytes.NewBufferString(body))
				if err != nil {
					t.Errorf("post %d: %v", i, err)
					return
				}
				raw, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusCreated {
					t.Errorf("post %d: status %d %s %v", i, resp.StatusCode, raw, err)
					continue
				}
				var a ack
				if err := json.Unmarshal(raw, &a); err != nil || a.Status != "accepted" {
					t.Errorf("post %d: ack %s: %v", i, raw, err)
					continue
				}
				mu.Lock()
				if _, dup := acked[a.ID]; dup {
					t.Errorf("id %s given twice", a.ID)
				}
				acked[a.ID] = body
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return acked
}

// rows reads every row of both column families of a closed reference store.
func rows(t *testing.T, dir string) (hooks map[uint64]string, deliveries map[uint64][]byte) {
	t.Helper()
	opts := grocksdb.NewDefaultOptions()
	defer opts.Destroy()
	db, cfs, err := grocksdb.OpenDbColumnFamilies(opts, dir, columnFamilies,
		[]*grocksdb.Options{opts, opts, opts})
	if err != nil {
		t.Fatalf("cannot reopen store: %v", err)
	}
	defer func() {
		for _, cf := range cfs {
			cf.Destroy()
		}
		db.Close()
	}()
	ro := grocksdb.NewDefaultReadOptions()
	defer ro.Destroy()
	scan := func(cf *grocksdb.ColumnFamilyHandle, fn func(k, v []byte)) {
		it := db.NewIteratorCF(ro, cf)
		defer it.Close()
		for it.SeekToFirst(); it.Valid(); it.Next() {
			k, v := it.Key(), it.Value()
			fn(bytes.Clone(k.Data()), bytes.Clone(v.Data()))
			k.Free()
			v.Free()
		}
		if err := it.Err(); err != nil {
			t.Fatalf("scan: %v", err)
		}
	}
	hooks, deliveries = map[uint64]string{}, map[uint64][]byte{}
	scan(cfs[cfHooks], func(k, v []byte) {
		if len(k) != 8 {
			t.Fatalf("hook key %x is not seq:64", k)
		}
		hooks[binary.BigEndian.Uint64(k)] = string(v)
	})
	scan(cfs[cfDeliveries], func(k, v []byte) {
		if len(k) != 10 || binary.BigEndian.Uint16(k[8:]) != 0 {
			t.Fatalf("delivery key %x is not seq:64,0:16", k)
		}
		deliveries[binary.BigEndian.Uint64(k)] = v
	})
	return hooks, deliveries
}

// "replies 201 {"status":"accepted","id":"<uuid v7>"} to each waiting request" only
// after the synced batch holding its hook row and delivery row: N concurrent POSTs
// all get 201 with distinct UUIDv7 ids, and after Close every body is a hook row with
// a delivery row of the same seq.
func TestEveryAckedHookIsStoredWithItsDeliveryRow(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	const n = 512
	acked := post(t, s.URL(), 64, n, "a")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(acked) != n {
		t.Fatalf("%d of %d posts acked", len(acked), n)
	}
	for id := range acked {
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 {
			t.Fatalf("id %q is not a UUIDv7 (%v)", id, err)
		}
	}
	hooks, deliveries := rows(t, dir)
	if len(hooks) != n || len(deliveries) != n {
		t.Fatalf("store holds %d hooks and %d deliveries, want %d each", len(hooks), len(deliveries), n)
	}
	stored := map[string]bool{}
	for seq, body := range hooks {
		stored[body] = true
		row, ok := deliveries[seq]
		if !ok || len(row) != 5 || binary.BigEndian.Uint32(row[1:]) != uint32(len(body)) {
			t.Fatalf("hook %d has delivery row %x", seq, row)
		}
	}
	for id, body := range acked {
		if !stored[body] {
			t.Fatalf("acked hook %s (%s) not stored", id, body)
		}
	}
}

// A reopened directory continues the seq: no hook row of an earlier run is
// overwritten.
func TestReopenNeverReusesASeq(t *testing.T) {
	dir := t.TempDir()
	for _, tag := range []string{"first", "second"} {
		s, err := Start(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := post(t, s.URL(), 2, 5, tag); len(got) != 5 {
			t.Fatalf("%s run: %d of 5 acked", tag, len(got))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	hooks, _ := rows(t, dir)
	if len(hooks) != 10 {
		t.Fatalf("%d hooks after two runs of 5, want 10", len(hooks))
	}
}

// Only POST /webhooks/... is a hook; anything else is refused with a JSON error and
// nothing is stored.
func TestOtherRequestsAreRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !bytes.Contains(raw, []byte(`"error"`)) {
		t.Fatalf("GET answered %d %s", resp.StatusCode, raw)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if hooks, _ := rows(t, dir); len(hooks) != 0 {
		t.Fatalf("%d hooks stored by a GET", len(hooks))
	}
}

// Close is idempotent and a closed server refuses connections.
func TestCloseTwiceAndRefuseAfterClose(t *testing.T) {
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	if resp, err := client.Post(s.URL(), "application/json", bytes.NewBufferString("{}")); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("closed server answered %d", resp.StatusCode)
	}
}

func TestEncodeUUIDMatchesString(t *testing.T) {
	for range 100 {
		id := uuid.Must(uuid.NewV7())
		var b [36]byte
		encodeUUID(b[:], id)
		if string(b[:]) != id.String() {
			t.Fatalf("encodeUUID = %s, want %s", b, id)
		}
	}
}

// "then replies 201 … to each waiting request": no request is answered while its
// batch is being written, and a batch that fails to write is answered 503, never 201.
func TestNoAckBeforeTheSyncedWriteReturns(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	stop := make(chan struct{}) // frees a stalled writer if the test fails, so Close returns
	var fail atomic.Bool
	s, err := start(t.TempDir(), func(next commitFunc) commitFunc {
		return func(wb *grocksdb.WriteBatch) error {
			select {
			case entered <- struct{}{}:
			case <-stop:
			}
			select {
			case <-release:
			case <-stop:
			}
			if fail.Load() {
				return errors.New("injected write failure")
			}
			return next(wb)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	defer close(stop)
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	postOnce := func() <-chan int {
		status := make(chan int, 1)
		go func() {
			resp, err := client.Post(s.URL(), "application/json", bytes.NewBufferString(`{"n":1}`))
			if err != nil {
				t.Errorf("post: %v", err)
				status <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			status <- resp.StatusCode
		}()
		return status
	}

	status := postOnce()
	<-entered
	// Give an implementation that answers early the time to do so; this can only
	// let a broken one pass, never fail a correct one.
	select {
	case code := <-status:
		t.Fatalf("answered %d while its batch was still being written", code)
	case <-time.After(100 * time.Millisecond):
	}
	release <- struct{}{}
	if code := <-status; code != http.StatusCreated {
		t.Fatalf("answered %d after the write, want 201", code)
	}

	fail.Store(true)
	status = postOnce()
	<-entered
	release <- struct{}{}
	if code := <-status; code != http.StatusServiceUnavailable {
		t.Fatalf("answered %d after a failed write, want 503", code)
	}
}
