//go:build chaos || soak

package test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/test/poll"
)

// The chaos and soak drills (`make chaos`, `make soak`) hold the node to its one promise under faults
// and over time: every hook answered 201 reaches the sink. These are their shared parts.

// idSet is a set of hook ids safe for concurrent use.
type idSet struct {
	mu  sync.Mutex
	ids map[[16]byte]struct{}
}

func newIDSet() *idSet { return &idSet{ids: map[[16]byte]struct{}{}} }

// add records a hook id as text (a 201's id or an x-ankusa-id header); false when it is
// not an id.
func (s *idSet) add(id string) bool {
	raw, ok := edge.ParseID(id)
	if !ok {
		return false
	}
	s.mu.Lock()
	s.ids[raw] = struct{}{}
	s.mu.Unlock()
	return true
}

func (s *idSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

// onAccepted is a load.Options.OnAccepted that records the acked id.
func (s *idSet) onAccepted(id string, _ []byte) { s.add(id) }

// sinkRecorder is the HTTP sink of a drill: it records the id of every delivery and counts
// the deliveries.
type sinkRecorder struct {
	srv        *httptest.Server
	ids        *idSet
	deliveries atomic.Int64
	badIDs     atomic.Int64
}

func newSinkRecorder(t testing.TB) *sinkRecorder {
	r := &sinkRecorder{ids: newIDSet()}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !r.ids.add(req.Header.Get("x-ankusa-id")) {
			r.badIDs.Add(1)
		}
		r.deliveries.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// sources is the sources section that delivers source sample to the sinkRecorder.
func (r *sinkRecorder) sources() string {
	return fmt.Sprintf("sources:\n  sample:\n    sinks:\n      - type: http\n        url: %s\n", r.srv.URL)
}

// missing counts the acked ids the sinkRecorder has not received.
func (r *sinkRecorder) missing(acked *idSet) int {
	acked.mu.Lock()
	defer acked.mu.Unlock()
	r.ids.mu.Lock()
	defer r.ids.mu.Unlock()
	n := 0
	for id := range acked.ids {
		if _, ok := r.ids.ids[id]; !ok {
			n++
		}
	}
	return n
}

// awaitDelivered waits up to within for every acked id to reach the sinkRecorder and returns
// how many are still missing then.
func (r *sinkRecorder) awaitDelivered(t testing.TB, acked *idSet, within time.Duration) int {
	t.Helper()
	_ = poll.Wait(within, func() error {
		// Fewer distinct deliveries than acks: some are missing, no need to look which.
		if r.ids.len() < acked.len() || r.missing(acked) > 0 {
			return errNotYet
		}
		return nil
	})
	return r.missing(acked)
}

// envDuration reads a duration from the environment (time.ParseDuration syntax, "90s",
// "10m"), else def.
func envDuration(t testing.TB, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 90s or 10m", name, v)
	}
	return d
}

// envInt reads a positive integer from the environment, else def.
func envInt(t testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// errorRatio is the share of attempts not answered 201: refusals and transport errors.
func errorRatio(sent, accepted int64) float64 {
	if sent == 0 {
		return 0
	}
	return float64(sent-accepted) / float64(sent)
}
