package test

import (
	"encoding/json"
	"fmt"
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

// replayJob reads job id over the admin API.
func (n *node) replayJob(t *testing.T, id string) map[string]any {
	t.Helper()
	status, body := n.adminCall(t, "GET", "/v1/replays/"+id, "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/replays/%s: %d %v", id, status, body)
	}
	return body
}

// Inventory F.5 (kind lifecycle) and issue 12 acceptance "Lifecycle tests: … replay": a lifecycle replay job
// re-publishes the events of a window of changes to lifecycle.sinks, in revision order and with the ids of
// their first delivery; its progress is visible at GET /v1/replays/{id}; pause holds it, resume finishes it,
// cancel ends it; a bad window is 400. The node has no dispatch role: the lifecycle publisher runs the job.
func TestLifecycleReplay(t *testing.T) {
	rec := &ceRecorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	extra := "lifecycle:\n  sinks:\n    - type: http\n      url: " + srv.URL + "/events\n"
	n := startAdminNodeWith(t, "lifecyclereplay", t.TempDir(), extra)
	since := time.Now().UnixMilli()
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/v1/tenants/default/sources/gh", `{"sinks":[{"type":"log"}]}`},
		{"PUT", "/v1/tenants/default/sources/gh", `{"sinks":[{"type":"log"},{"type":"log"}]}`},
		{"PUT", "/v1/tenants/default/sources/stripe", `{"sinks":[{"type":"log"}]}`},
		{"DELETE", "/v1/tenants/default/sources/gh", ""},
	} {
		if status, body := n.adminCall(t, c.method, c.path, c.body); status >= 300 {
			t.Fatalf("%s %s: %d %v", c.method, c.path, status, body)
		}
	}
	waitUntil(t, 10*time.Second, "the four live events", func() bool { return len(rec.confirmed()) == 4 })
	live := rec.confirmed()
	until := time.Now().UnixMilli() + 1

	// Refusals: a window ending before it starts, or after now; a source filter.
	for _, bad := range []string{
		fmt.Sprintf(`{"kind":"lifecycle","since":%d,"until":%d}`, since, since),
		fmt.Sprintf(`{"kind":"lifecycle","since":%d,"until":%d}`, since, time.Now().Add(time.Hour).UnixMilli()),
		`{"kind":"lifecycle","since":-1}`,
		`{"kind":"lifecycle","source_id":"gh"}`,
	} {
		if status, body := n.adminCall(t, "POST", "/v1/replays", bad); status != http.StatusBadRequest || body["error"] != "invalid_filter" {
			t.Fatalf("POST /v1/replays %s: %d %v, want 400 invalid_filter", bad, status, body)
		}
	}

	// One event a second, so the job can be caught half way.
	status, job := n.adminCall(t, "POST", "/v1/replays", fmt.Sprintf(`{"kind":"lifecycle","since":%d,"until":%d,"rate":1}`, since, until))
	if status != http.StatusCreated || job["kind"] != "lifecycle" || job["state"] != "running" {
		t.Fatalf("POST /v1/replays: %d %v", status, job)
	}
	id, _ := job["id"].(string)
	waitUntil(t, 10*time.Second, "the first replayed event", func() bool { return len(rec.confirmed()) >= 5 })
	if status, body := n.adminCall(t, "POST", "/v1/replays/"+id+"/pause", ""); status != http.StatusOK || body["state"] != "paused" {
		t.Fatalf("pause: %d %v", status, body)
	}
	// The step under way when the pause came is recorded, then nothing more moves.
	var held map[string]any
	waitUntil(t, 10*time.Second, "the paused job's progress", func() bool {
		held = n.replayJob(t, id)
		return held["moved"].(float64) >= 1 && int(held["moved"].(float64)) == len(rec.confirmed())-4
	})
	time.Sleep(2500 * time.Millisecond)
	if j := n.replayJob(t, id); j["state"] != "paused" || j["moved"] != held["moved"] || len(rec.confirmed())-4 != int(held["moved"].(float64)) {
		t.Fatalf("a paused job moved on: %v then %v, %d events replayed", held, j, len(rec.confirmed())-4)
	}
	t.Logf("paused at %v of 4 events replayed", held["moved"])
	if status, body := n.adminCall(t, "POST", "/v1/replays/"+id+"/resume", ""); status != http.StatusOK || body["state"] != "running" {
		t.Fatalf("resume: %d %v", status, body)
	}
	waitUntil(t, 20*time.Second, "the job to finish", func() bool {
		j := n.replayJob(t, id)
		return j["state"] == "done"
	})
	if j := n.replayJob(t, id); j["moved"] != 4.0 {
		t.Fatalf("done job: %v, want moved 4", j)
	}
	got := rec.confirmed()
	if len(got) != 8 {
		t.Fatalf("%d events confirmed, want 4 live and 4 replayed", len(got))
	}
	for i, a := range got[4:] {
		if a.ID != live[i].ID || a.Type != live[i].Type || a.Subject != live[i].Subject || a.Revision != live[i].Revision {
			t.Fatalf("replayed event %d: %+v, first delivery %+v", i, a, live[i])
		}
		t.Logf("replayed %s %s %s revision %v (same id as the first delivery)", a.ID, a.Type, a.Subject, a.Revision)
	}

	// A cancelled job publishes nothing more and cannot be resumed.
	status, job = n.adminCall(t, "POST", "/v1/replays", fmt.Sprintf(`{"kind":"lifecycle","since":%d,"until":%d,"rate":1}`, since, until))
	if status != http.StatusCreated {
		t.Fatalf("second job: %d %v", status, job)
	}
	id2, _ := job["id"].(string)
	waitUntil(t, 10*time.Second, "the second job's first event", func() bool { return len(rec.confirmed()) >= 9 })
	if status, body := n.adminCall(t, "POST", "/v1/replays/"+id2+"/cancel", ""); status != http.StatusOK || body["state"] != "cancelled" {
		t.Fatalf("cancel: %d %v", status, body)
	}
	time.Sleep(2500 * time.Millisecond)
	after := len(rec.confirmed())
	time.Sleep(2500 * time.Millisecond)
	if len(rec.confirmed()) != after || after > 10 {
		t.Fatalf("a cancelled job went on publishing: %d then %d events", after, len(rec.confirmed()))
	}
	if status, body := n.adminCall(t, "POST", "/v1/replays/"+id2+"/resume", ""); status != http.StatusConflict || body["state"] != "cancelled" {
		t.Fatalf("resume a cancelled job: %d %v", status, body)
	}
	t.Logf("cancelled job: %v events published before the cancel took effect", n.replayJob(t, id2)["moved"])
	if err := n.stop(); err != nil {
		t.Fatal(err)
	}
}
