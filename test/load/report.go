package load

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Report is what a run saw. Sent counts every attempt, including those that never
// reached the target (refused connection); every attempt lands in exactly one of
// Accepted, Shed, RateLimited and Errors.
type Report struct {
	Sent        int64
	Accepted    int64 // 201 with an id, duplicates included
	Duplicates  int64 // 201 with "duplicate":true (a subset of Accepted)
	Shed        int64 // 503
	RateLimited int64 // 429
	Errors      int64 // transport errors, timeouts, 201 without an id, any other status
	// StatusCounts counts responses by HTTP status; transport errors have none.
	StatusCounts map[int]int64
	Elapsed      time.Duration
	// P50 … Max are the ack latencies of accepted requests: from the send (closed
	// loop) or from the due time (open loop) to the end of the response.
	P50, P90, P99, P999, Max time.Duration
	// LateP99 (open loop) is the p99 of how late the sends left after their due times: the generator's own lag
	// (a worker not free, or not scheduled, when its request fell due), which is part of each ack latency above.
	// A node that answers fast on a box too busy to send on time shows here, not in its own metrics.
	LateP99        time.Duration
	AcceptedPerSec float64
}

// String is the one-line summary printed by tools and benchmarks.
func (r Report) String() string {
	s := fmt.Sprintf("sent=%d accepted=%d dup=%d shed=%d rate_limited=%d errors=%d accepted/s=%.1f p50=%s p99=%s p999=%s max=%s",
		r.Sent, r.Accepted, r.Duplicates, r.Shed, r.RateLimited, r.Errors, r.AcceptedPerSec,
		ms(r.P50), ms(r.P99), ms(r.P999), ms(r.Max))
	if r.LateP99 > 0 {
		s += " late_p99=" + ms(r.LateP99)
	}
	return s
}

// Refusals lists the responses other than 201 by status, e.g. "503:12 429:3", or "none".
func (r Report) Refusals() string {
	codes := make([]int, 0, len(r.StatusCounts))
	for c := range r.StatusCounts {
		if c != 201 {
			codes = append(codes, c)
		}
	}
	if len(codes) == 0 {
		return "none"
	}
	slices.Sort(codes)
	var b strings.Builder
	for i, c := range codes {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%d", c, r.StatusCounts[c])
	}
	return b.String()
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// reportJSON fixes the field names of the JSON form; latencies are in milliseconds.
type reportJSON struct {
	Sent           int64         `json:"sent"`
	Accepted       int64         `json:"accepted"`
	Duplicates     int64         `json:"duplicates"`
	Shed           int64         `json:"shed"`
	RateLimited    int64         `json:"rate_limited"`
	Errors         int64         `json:"errors"`
	StatusCounts   map[int]int64 `json:"status_counts"`
	ElapsedSeconds float64       `json:"elapsed_s"`
	AcceptedPerSec float64       `json:"accepted_per_s"`
	P50            float64       `json:"p50_ms"`
	P90            float64       `json:"p90_ms"`
	P99            float64       `json:"p99_ms"`
	P999           float64       `json:"p999_ms"`
	Max            float64       `json:"max_ms"`
	LateP99        float64       `json:"late_p99_ms"`
}

// MarshalJSON writes the report with snake_case keys and latencies in milliseconds.
func (r Report) MarshalJSON() ([]byte, error) {
	return json.Marshal(reportJSON{
		Sent: r.Sent, Accepted: r.Accepted, Duplicates: r.Duplicates, Shed: r.Shed,
		RateLimited: r.RateLimited, Errors: r.Errors, StatusCounts: r.StatusCounts,
		ElapsedSeconds: r.Elapsed.Seconds(), AcceptedPerSec: r.AcceptedPerSec,
		P50: msf(r.P50), P90: msf(r.P90), P99: msf(r.P99), P999: msf(r.P999), Max: msf(r.Max), LateP99: msf(r.LateP99),
	})
}

// UnmarshalJSON reads the form MarshalJSON writes (ankusa-loadgen --json), so a driver in another process
// reports to a benchmark.
func (r *Report) UnmarshalJSON(b []byte) error {
	var j reportJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	d := func(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
	*r = Report{Sent: j.Sent, Accepted: j.Accepted, Duplicates: j.Duplicates, Shed: j.Shed, RateLimited: j.RateLimited,
		Errors: j.Errors, StatusCounts: j.StatusCounts, Elapsed: time.Duration(j.ElapsedSeconds * float64(time.Second)),
		AcceptedPerSec: j.AcceptedPerSec, P50: d(j.P50), P90: d(j.P90), P99: d(j.P99), P999: d(j.P999), Max: d(j.Max),
		LateP99: d(j.LateP99)}
	if r.StatusCounts == nil {
		r.StatusCounts = map[int]int64{}
	}
	return nil
}

// MetricReporter is the part of *testing.B that ReportTo needs; taking it keeps the
// testing package out of this library's imports.
type MetricReporter interface {
	ReportMetric(n float64, unit string)
}

// ReportTo reports hooks/s, p50_ms and p99_ms of r on b, each unit prefixed with
// prefix (e.g. "ref_") so two targets measured in one benchmark stay apart.
func ReportTo(b MetricReporter, r Report, prefix string) {
	b.ReportMetric(r.AcceptedPerSec, prefix+"hooks/s")
	b.ReportMetric(msf(r.P50), prefix+"p50_ms")
	b.ReportMetric(msf(r.P99), prefix+"p99_ms")
}
