package test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ceRecorder is a lifecycle sink destination: it answers 500 while down, else 200, and keeps every event it
// was sent with the answer it gave.
type ceRecorder struct {
	mu   sync.Mutex
	got  []ceAttempt
	down atomic.Bool
}

type ceAttempt struct {
	ID, Type, Subject, Source, SpecVersion string
	Revision                               float64
	Data                                   map[string]any
	OK                                     bool
}

func (r *ceRecorder) ServeHTTP(w http.ResponseWriter, q *http.Request) {
	b, _ := io.ReadAll(q.Body)
	var ev map[string]any
	_ = json.Unmarshal(b, &ev)
	a := ceAttempt{OK: !r.down.Load()}
	a.ID, _ = ev["id"].(string)
	a.Type, _ = ev["type"].(string)
	a.Subject, _ = ev["subject"].(string)
	a.Source, _ = ev["source"].(string)
	a.SpecVersion, _ = ev["specversion"].(string)
	a.Revision, _ = ev["revision"].(float64)
	a.Data, _ = ev["data"].(map[string]any)
	r.mu.Lock()
	r.got = append(r.got, a)
	r.mu.Unlock()
	if !a.OK {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (r *ceRecorder) attempts() []ceAttempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ceAttempt(nil), r.got...)
}

func (r *ceRecorder) confirmed() []ceAttempt {
	var out []ceAttempt
	for _, a := range r.attempts() {
		if a.OK {
			out = append(out, a)
		}
	}
	return out
}

// Issue 12 acceptance: a source change answered 2xx is published after a kill -9 that came before its sink
// confirmed, with the same event id, and the events of one node arrive in revision order as CloudEvents.
func TestLifecycleEventSurvivesKill9(t *testing.T) {
	rec := &ceRecorder{}
	rec.down.Store(true)
	srv := httptest.NewServer(rec)
	defer srv.Close()
	extra := "lifecycle:\n  sinks:\n    - type: http\n      url: " + srv.URL + "/events\n"
	dir := t.TempDir()
	n := startAdminNodeWith(t, "lifecyclekill", dir, extra)
	if status, body := n.adminCall(t, "PUT", "/v1/tenants/default/sources/gh",
		`{"sinks":[{"type":"http","url":"https://example.com/hook?token=s3cret"}]}`); status != http.StatusCreated {
		t.Fatalf("PUT source: %d %v", status, body)
	}
	if status, body := n.adminCall(t, "PUT", "/v1/tenants/default/sources/gh", `{"sinks":[{"type":"log"}]}`); status != http.StatusOK {
		t.Fatalf("PUT source again: %d %v", status, body)
	}
	waitUntil(t, 10*time.Second, "a refused attempt", func() bool { return len(rec.attempts()) > 0 })
	first := rec.attempts()[0]
	n.kill()

	rec.down.Store(false)
	n = startAdminNodeWith(t, "lifecyclekill", dir, extra)
	waitUntil(t, 15*time.Second, "two confirmed events", func() bool { return len(rec.confirmed()) >= 2 })
	got := rec.confirmed()
	if got[0].ID != first.ID {
		t.Fatalf("id before the kill %q, after %q", first.ID, got[0].ID)
	}
	want := []string{"io.ankusa.source.created", "io.ankusa.source.updated"}
	for i, a := range got[:2] {
		if a.SpecVersion != "1.0" || a.Type != want[i] || a.Subject != "source:default/gh" ||
			a.Source != "ankusa/lifecyclekill" || a.Revision != float64(i+1) || a.Data["name"] != "gh" {
			t.Fatalf("event %d: %+v", i, a)
		}
		t.Logf("confirmed after kill -9 and restart: id=%s type=%s subject=%s revision=%v", a.ID, a.Type, a.Subject, a.Revision)
	}
	for _, a := range rec.attempts() {
		raw, _ := json.Marshal(a.Data)
		if strings.Contains(string(raw), "s3cret") {
			t.Fatalf("event data holds the secret: %s", raw)
		}
	}
	t.Logf("refused attempts before the kill: %d, first id %s", len(rec.attempts())-len(got), first.ID)
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
