// Package load drives HTTP load at one webhook URL and reports what came back.
//
// The invariant it owns: every 201 the target answers is counted once and handed to
// Options.OnAccepted once, from the goroutine that received it, before Run returns. A
// chaos test can therefore compare the set of acknowledged ids against what the
// target still holds after it is killed; the driver never retries a POST (a retry
// could make one hook look like two, or hide a lost one), it counts the failure and
// goes on with the next request on a fresh connection.
//
// Two loops are offered. Closed loop (Rate == 0): Workers goroutines each send the
// next request as soon as the previous one is answered. Open loop (Rate > 0): request
// i is due at start + i/Rate and its latency is measured from that due time, not
// from when a worker got round to sending it, so a stalled target shows up as
// latency instead of silently lowering the offered load (coordinated omission).
//
// Each worker owns one keep-alive connection, its request and response buffers, its
// body and its latency histogram, so the hot path shares nothing but one atomic
// request counter and allocates nothing after the first request.
package load
