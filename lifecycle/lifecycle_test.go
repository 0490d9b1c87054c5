package lifecycle

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/builtin"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// recorder is an HTTP sink destination that answers fail 500s first, then 200, and keeps every body.
type recorder struct {
	mu     sync.Mutex
	bodies []Event
	ctype  []string
	fail   atomic.Int32
	srv    *httptest.Server
}

func newRecorder(t *testing.T, fail int32) *recorder {
	r := &recorder{}
	r.fail.Store(fail)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		b, _ := io.ReadAll(q.Body)
		var ev Event
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Errorf("body is not an event: %v", err)
		}
		r.mu.Lock()
		r.bodies = append(r.bodies, ev)
		r.ctype = append(r.ctype, q.Header.Get("Content-Type"))
		r.mu.Unlock()
		if r.fail.Load() != 0 {
			r.fail.Add(-1)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.bodies...)
}

type nopMetrics struct{ published, failed atomic.Int32 }

func (m *nopMetrics) LifecyclePublished(string) { m.published.Add(1) }
func (m *nopMetrics) LifecycleFailed(string)    { m.failed.Add(1) }
func (m *nopMetrics) LifecycleLag(int)          {}

func openDB(t *testing.T, dir string) *store.DB {
	t.Helper()
	db, err := store.Open(store.Options{Dir: dir, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// start runs a publisher of db to the recorder until the returned stop is called.
func start(t *testing.T, db *store.DB, r *recorder, m *nopMetrics) (stop func()) {
	t.Helper()
	s, err := builtin.NewRegistry().New(config.SinkSpec{Type: "http", Options: map[string]any{"url": r.srv.URL}},
		sinks.Deps{Instance: "t", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	p := &Publisher{DB: func() *store.DB { return db }, Node: "n1", Targets: []Target{{Name: "0", Sink: s}},
		Metrics: m, Log: zerolog.Nop(), Poll: 20 * time.Millisecond, MinBackoff: 10 * time.Millisecond}
	g := &task.Group{}
	g.Go(p.Run)
	return func() { g.Stop(); _ = s.Close() }
}

func change(t *testing.T, db *store.DB, action, subject string, before, after string, flagged bool) store.AuditRow {
	t.Helper()
	e := store.AuditEntry{Actor: "ops", Action: action, Subject: subject, Tenant: "acme", Lifecycle: flagged,
		Entity: []byte(`{"tenant":"acme","name":"gh","spec":{"sinks":[{"type":"http","url":"[REDACTED]"}]}}`)}
	if before != "" {
		e.Before = []byte(before)
	}
	if after != "" {
		e.After = []byte(after)
	}
	row, err := db.CommitAudited(e)
	if err != nil {
		t.Fatal(err)
	}
	return row
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEventsArriveInRevisionOrderAsCloudEvents(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	r := newRecorder(t, 0)
	m := &nopMetrics{}
	stop := start(t, db, r, m)
	defer stop()

	rows := []store.AuditRow{
		change(t, db, "source.create", "source:acme/gh", "", "v1", true),
		change(t, db, "source.update", "source:acme/gh", "v1", "v2", true),
	}
	change(t, db, "log_level.set", "log_level", "info", "debug", false) // not flagged: never published
	rows = append(rows,
		change(t, db, "source.delete", "source:acme/gh", "v2", "", true),
		change(t, db, "tenant.delete", "tenant:acme", "tenant acme", "", true))
	waitFor(t, "4 events", func() bool { return len(r.events()) >= 4 })
	waitFor(t, "the cursor", func() bool { c, _ := db.LifecycleCursor(); return c == rows[3].Seq })

	got := r.events()
	if len(got) != 4 {
		t.Fatalf("%d events, want 4: %+v", len(got), got)
	}
	types := []string{"io.ankusa.source.created", "io.ankusa.source.updated", "io.ankusa.source.deleted", "io.ankusa.tenant.deleted"}
	for i, ev := range got {
		if ev.SpecVersion != "1.0" || ev.Type != types[i] || ev.Source != "ankusa/n1" || ev.ID != EventID("n1", rows[i].Seq) ||
			ev.Subject != rows[i].Subject || ev.Revision != rows[i].Revision || ev.Tenant != "acme" {
			t.Fatalf("event %d: %+v (row %+v)", i, ev, rows[i])
		}
		if _, err := time.Parse(time.RFC3339Nano, ev.Time); err != nil {
			t.Fatalf("event %d time %q: %v", i, ev.Time, err)
		}
		if !json.Valid(ev.Data) || string(ev.Data) == "" {
			t.Fatalf("event %d data %q", i, ev.Data)
		}
		if r.ctype[i] != ContentType {
			t.Fatalf("content type %q", r.ctype[i])
		}
		t.Logf("event %d: id=%s type=%s subject=%s revision=%d", i, ev.ID, ev.Type, ev.Subject, ev.Revision)
	}
	if got[0].Revision != 1 || got[1].Revision != 2 || got[2].Revision != 3 {
		t.Fatalf("revisions %d %d %d, want 1 2 3", got[0].Revision, got[1].Revision, got[2].Revision)
	}
}

func TestRedeliveryHasTheSameID(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	r := newRecorder(t, 1) // 500 first, then 200
	m := &nopMetrics{}
	stop := start(t, db, r, m)
	defer stop()
	row := change(t, db, "source.create", "source:acme/gh", "", "v1", true)
	waitFor(t, "the cursor", func() bool { c, _ := db.LifecycleCursor(); return c == row.Seq })
	got := r.events()
	if len(got) != 2 || got[0].ID != got[1].ID || got[0].ID != EventID("n1", row.Seq) {
		t.Fatalf("deliveries %+v", got)
	}
	if m.failed.Load() != 1 || m.published.Load() != 1 {
		t.Fatalf("failed %d published %d", m.failed.Load(), m.published.Load())
	}
	t.Logf("delivered twice with id %s (500, then 200)", got[0].ID)
}

// A node that stops (or dies) before the sink confirmed keeps its cursor: the event is delivered after the
// restart, with the same id.
func TestUnconfirmedEventIsDeliveredAfterRestart(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	down := newRecorder(t, 1<<30) // never confirms
	stop := start(t, db, down, &nopMetrics{})
	row := change(t, db, "source.create", "source:acme/gh", "", "v1", true)
	waitFor(t, "an attempt", func() bool { return len(down.events()) > 0 })
	stop()
	if c, _ := db.LifecycleCursor(); c != 0 {
		t.Fatalf("cursor %d advanced without a confirm", c)
	}
	db.Close()

	db = openDB(t, dir)
	defer db.Close()
	up := newRecorder(t, 0)
	stop = start(t, db, up, &nopMetrics{})
	defer stop()
	waitFor(t, "the cursor", func() bool { c, _ := db.LifecycleCursor(); return c == row.Seq })
	before, after := down.events()[0], up.events()
	if len(after) != 1 || after[0].ID != before.ID {
		t.Fatalf("before %+v after %+v", before, after)
	}
	t.Logf("after the restart: id %s delivered again (first attempt id %s)", after[0].ID, before.ID)
}

// Retention never passes the cursor: an expired row the publisher has not passed is kept, with its entity.
func TestRetentionKeepsUnpublishedRows(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	a := change(t, db, "source.create", "source:acme/gh", "", "v1", true)
	b := change(t, db, "source.update", "source:acme/gh", "v1", "v2", true)
	if err := db.SetLifecycleCursor(a.Seq); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour).UnixMilli()
	deleted, blocked, err := db.PruneAudit(future, true)
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 1 || blocked != 1 {
		t.Fatalf("deleted %d blocked %d, want 1 1", deleted, blocked)
	}
	if e, _ := db.AuditEntity(b.Seq); e == nil {
		t.Fatal("the unpublished row's entity was pruned")
	}
	rows, _ := db.ListAudit(store.AuditFilter{Flagged: true}, 10)
	if len(rows) != 1 || rows[0].Seq != b.Seq {
		t.Fatalf("rows %+v", rows)
	}
	t.Logf("pruned %d, held %d at or above the cursor", deleted, blocked)
}
