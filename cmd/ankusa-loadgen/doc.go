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
// Exit status: 0 after a run, 2 when the run could not start (bad flags, unusable
// URL, --out not writable), 1 when an acknowledged id could not be written to --out
// (the file would then understate what the server owes).
package main
