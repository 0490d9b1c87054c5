package load

import (
	"encoding/json"
	"testing"
	"time"
)

// ankusa-loadgen --json is how a driver in another process reports to a benchmark: the report must read back
// as it was written, latencies within a microsecond (they travel as float milliseconds).
func TestReportJSONRoundTrip(t *testing.T) {
	in := Report{Sent: 12, Accepted: 10, Duplicates: 1, Shed: 1, RateLimited: 1, Errors: 0,
		StatusCounts: map[int]int64{201: 10, 503: 1, 429: 1}, Elapsed: 2500 * time.Millisecond,
		P50: 1234567 * time.Nanosecond, P90: 3 * time.Millisecond, P99: 9876543 * time.Nanosecond,
		P999: 20 * time.Millisecond, Max: 31415926 * time.Nanosecond, LateP99: 2718281 * time.Nanosecond, AcceptedPerSec: 4}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Report
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	near := func(a, b time.Duration) bool { return (a - b).Abs() < time.Microsecond }
	if out.Sent != in.Sent || out.Accepted != in.Accepted || out.Duplicates != in.Duplicates || out.Shed != in.Shed ||
		out.RateLimited != in.RateLimited || out.AcceptedPerSec != in.AcceptedPerSec || len(out.StatusCounts) != 3 ||
		out.StatusCounts[503] != 1 || !near(out.Elapsed, in.Elapsed) || !near(out.P50, in.P50) || !near(out.P90, in.P90) ||
		!near(out.P99, in.P99) || !near(out.P999, in.P999) || !near(out.Max, in.Max) || !near(out.LateP99, in.LateP99) {
		t.Fatalf("read back %+v from %s, wrote %+v", out, b, in)
	}
	if err := json.Unmarshal([]byte(`{"sent":"x"}`), &out); err == nil {
		t.Fatal("a malformed report was read without an error")
	}
}
