// Command ankusa-loadgen drives load at one webhook URL and records what was
// acknowledged, for benchmarks and for the kill and chaos tests.
//
// The invariant it owns: every 201 received is a line "id sha256hex" in the --out
// file before the request's worker sends its next request. Each line goes to the
// kernel in one append write, so killing the server under test (or the loadgen
// itself after the write) never loses an acknowledged id, and a verifier can hold
// the server to every line.
//
//	ankusa-loadgen --url http://127.0.0.1:4000/webhooks/sample --workers 64 \
//	    --duration 30s --out acked.txt
//
// Open loop (--rate): request i is due at start + i/rate and its ack latency is
// measured from that due time, so a stall shows as latency instead of a lower offered
// load; late_p99 in the report is how late the sends themselves left (a worker busy or
// not scheduled when its request fell due), a lag every ack latency includes, so a busy
// box running both the load and the node shows there. With --recorder the loadgen also
// serves a local HTTP sink (answers 200, records each X-Ankusa-Id) for the node's http
// sink, waits up to --drain after the load for every acknowledged id to arrive, and
// prints delivery latency (due time of the POST to arrival at the sink) and the ids
// missing; --metrics prints the node's backlog at the end (ankusa_queue_pending +
// _scheduled + _inflight):
//
//	ankusa-loadgen --url http://127.0.0.1:4000/webhooks/sample --rate 5000 \
//	    --workers 256 --warmup 5s --duration 60s --body-bytes 10240 \
//	    --recorder 127.0.0.1:9099 --metrics http://127.0.0.1:9090/metrics
//
// `ankusa-loadgen recorder --listen 127.0.0.1:9099` runs the sink recorder alone.
//
// Exit status: 0 after a run, 2 when the run could not start (bad flags, unusable
// URL, --out not writable), 1 when an acknowledged id could not be written to --out
// (the file would then understate what the server owes), 3 when --recorder did not
// receive every acknowledged id within --drain.
package main
