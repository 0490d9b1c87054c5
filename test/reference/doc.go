// Package reference is the yardstick the loopback benchmark measures Ankusa
// against: the least a durable webhook receiver can do on this machine with the
// same storage engine.
//
// The invariant it owns: a request is answered 201 only after its hook row and its
// delivery row are in a RocksDB write batch that was written with sync=true (WAL on,
// fsync before return). Everything else Ankusa does (verification, dedupe,
// admission, actors, telemetry) is left out, so the ratio of the two figures is the
// price of those features, not of durability.
//
// Shape: a fasthttp handler copies the body and hands it to one writer goroutine
// over an unbuffered channel; the writer takes every request waiting (up to 1,024),
// puts two rows per request into one batch, in column families "hooks"
// (key seq:64 → body) and "deliveries" (key seq:64,sink:16 → 5-byte row), writes it
// synced and answers each waiting request. The RocksDB options are those the store
// is specified with (paranoid checks, WAL recovery tolerating a torn tail), other
// settings left at RocksDB's defaults.
package reference
