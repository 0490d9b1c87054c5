package load

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// IDHeader is the header a delivery names its hook by; the recorder keys arrivals on it.
const IDHeader = "X-Ankusa-Id"

// recorderShards spreads the arrival maps over locks, so concurrent deliveries rarely wait on each other.
const recorderShards = 64

// Recorder is a local HTTP sink for load runs: a fasthttp server that answers every request 200 and records
// when each hook id (the X-Ankusa-Id header) first arrived. The driver tells it, through Acked, which ids were
// acknowledged and when each request was due; Deliveries joins the two: delivery latency from the due time of
// the POST to the arrival at the sink, and the acknowledged ids that never arrived.
//
// The invariant it owns: an id is counted delivered only once it arrived in a request that the recorder
// answered 200, and every arrival of an id after the first is counted as a duplicate, never lost.
type Recorder struct {
	ln   net.Listener
	srv  *fasthttp.Server
	url  string
	done chan error

	arrivals   atomic.Int64 // requests received, duplicates included
	first      atomic.Int64 // when the first request arrived, in Unix ns (0: none yet)
	noID       atomic.Int64 // requests without the id header
	duplicates atomic.Int64
	shards     [recorderShards]recorderShard
}

type recorderShard struct {
	mu      sync.Mutex
	arrived map[string]time.Time // id → first arrival
	due     map[string]time.Time // id → due time of the acknowledged request
}

// StartRecorder listens on addr ("127.0.0.1:0" for a free port) and serves until Close.
func StartRecorder(addr string) (*Recorder, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("recorder: cannot listen on %s: %w", addr, err)
	}
	r := &Recorder{ln: ln, url: "http://" + ln.Addr().String() + "/hooks", done: make(chan error, 1)}
	for i := range r.shards {
		r.shards[i].arrived = map[string]time.Time{}
		r.shards[i].due = map[string]time.Time{}
	}
	r.srv = &fasthttp.Server{
		Handler:               r.handle,
		Name:                  "ankusa-recorder",
		NoDefaultDate:         true,
		NoDefaultContentType:  true,
		MaxRequestBodySize:    64 << 20,
		MaxIdleWorkerDuration: 100 * time.Millisecond, // Shutdown waits for the idle-worker cleaner's next round
	}
	go func() { r.done <- r.srv.Serve(ln) }()
	return r, nil
}

// URL is the address to configure as the http sink's url.
func (r *Recorder) URL() string { return r.url }

// Addr is the listener's host:port.
func (r *Recorder) Addr() string { return r.ln.Addr().String() }

// Close stops the server and waits for it.
func (r *Recorder) Close() error {
	err := r.srv.Shutdown()
	if serr := <-r.done; serr != nil && err == nil {
		err = serr
	}
	return err
}

func (r *Recorder) shard(id string) *recorderShard {
	var h uint32 = 2166136261 // FNV-1a
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return &r.shards[h%recorderShards]
}

func (r *Recorder) handle(ctx *fasthttp.RequestCtx) {
	now := time.Now()
	if r.arrivals.Add(1) == 1 {
		r.first.Store(now.UnixNano())
	}
	id := ctx.Request.Header.Peek(IDHeader)
	if len(id) == 0 {
		r.noID.Add(1)
		ctx.SetStatusCode(fasthttp.StatusOK)
		return
	}
	s := r.shard(string(id)) // no allocation: the conversion is only hashed
	s.mu.Lock()
	if _, seen := s.arrived[string(id)]; seen {
		r.duplicates.Add(1)
	} else {
		s.arrived[string(id)] = now
	}
	s.mu.Unlock()
	ctx.SetStatusCode(fasthttp.StatusOK)
}

// Acked records that id was acknowledged for a request due at due; pass it as Options.OnAcked.
func (r *Recorder) Acked(id string, due time.Time) {
	s := r.shard(id)
	s.mu.Lock()
	s.due[id] = due
	s.mu.Unlock()
}

// First is when the first request arrived (zero before any did).
func (r *Recorder) First() time.Time {
	if ns := r.first.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Received is how many distinct ids arrived so far.
func (r *Recorder) Received() int64 {
	return r.arrivals.Load() - r.duplicates.Load() - r.noID.Load()
}

// DeliveryReport is what the recorder saw of the acknowledged ids.
type DeliveryReport struct {
	Acked      int64 // ids acknowledged (Acked calls)
	Delivered  int64 // acknowledged ids that arrived
	Missing    int64 // acknowledged ids that did not arrive
	Duplicates int64 // arrivals of an id after its first
	Unknown    int64 // distinct ids that arrived without being acknowledged (e.g. from a warm-up not tracked)
	// P50 … Max are delivery latencies: from the due time of the acknowledged POST to the first arrival.
	P50, P99, P999, Max time.Duration
	// Missed lists up to ten missing ids, for the message of a failed check.
	Missed []string
}

func (d DeliveryReport) String() string {
	return fmt.Sprintf("acked=%d delivered=%d missing=%d duplicates=%d unknown=%d delivery_p50=%s delivery_p99=%s delivery_p999=%s delivery_max=%s",
		d.Acked, d.Delivered, d.Missing, d.Duplicates, d.Unknown, ms(d.P50), ms(d.P99), ms(d.P999), ms(d.Max))
}

// Deliveries waits until every acknowledged id arrived or wait passed (or ctx ended), then joins arrivals
// with due times.
func (r *Recorder) Deliveries(ctx context.Context, wait time.Duration) DeliveryReport {
	deadline := time.Now().Add(wait)
	for {
		rep := r.join()
		if rep.Missing == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return rep
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (r *Recorder) join() DeliveryReport {
	var rep DeliveryReport
	var h histogram
	arrived := int64(0)
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		arrived += int64(len(s.arrived))
		for id, due := range s.due {
			rep.Acked++
			at, ok := s.arrived[id]
			if !ok {
				rep.Missing++
				if len(rep.Missed) < 10 {
					rep.Missed = append(rep.Missed, id)
				}
				continue
			}
			rep.Delivered++
			h.record(at.Sub(due))
		}
		s.mu.Unlock()
	}
	rep.Unknown = arrived - rep.Delivered
	rep.Duplicates = r.duplicates.Load()
	rep.P50, rep.P99, rep.P999 = h.quantile(0.50), h.quantile(0.99), h.quantile(0.999)
	rep.Max = time.Duration(h.max)
	return rep
}

// backlogSeries are the gauges whose sum is the node's delivery backlog: rows waiting for a first attempt,
// waiting for a retry, and claimed.
var backlogSeries = []string{"ankusa_queue_pending", "ankusa_queue_scheduled", "ankusa_queue_inflight"}

// ErrNoBacklogSeries is returned by ScrapeBacklog when /metrics has none of the queue gauges (a node without
// the dispatch role, or not an Ankusa node).
var ErrNoBacklogSeries = errors.New("load: /metrics has no ankusa_queue_pending, _scheduled or _inflight")

// ScrapeBacklog reads the delivery backlog from a node's Prometheus endpoint (e.g.
// http://127.0.0.1:9090/metrics): the sum of ankusa_queue_pending, ankusa_queue_scheduled and
// ankusa_queue_inflight. The node refreshes these gauges once a second.
func ScrapeBacklog(ctx context.Context, metricsURL string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return 0, fmt.Errorf("load: cannot build the /metrics request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("load: cannot scrape %s: %w", metricsURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("load: %s answered %d", metricsURL, resp.StatusCode)
	}
	var sum float64
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, name := range backlogSeries {
			rest, ok := strings.CutPrefix(line, name)
			if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
				continue
			}
			fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
			if len(fields) == 0 {
				continue
			}
			v, err := strconv.ParseFloat(fields[0], 64)
			if err != nil {
				return 0, fmt.Errorf("load: %s: cannot read %q: %w", metricsURL, line, err)
			}
			sum += v
			found = true
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("load: cannot read %s: %w", metricsURL, err)
	}
	if !found {
		return 0, ErrNoBacklogSeries
	}
	return int64(sum), nil
}
