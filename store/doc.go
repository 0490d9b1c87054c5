// Package store is the sole owner of the node's RocksDB database: its column families, key layout, value codecs,
// seq and tenant ordinals, and the writer actor that group-commits ingested hooks.
//
// The invariant it owns: the store never reports a commit before the batch is synced. CommitHooks returns only
// after one synced WriteBatch holding every row of the group has been written, and the writer answers a caller
// only from that return value, so a committed Result is backed by an fsync and a failed one by nothing at all
// (the batch is atomic).
//
// Around it:
//  1. Seqs are dense within a group, strictly increasing across groups and restarts, and never reused: a failed
//     commit burns its seqs, and m:next_seq is written in the same batch as the rows it covers.
//  2. A torn WAL tail (an unacknowledged write) is dropped on open; damage before it refuses to open. An
//     unreadable store is an error, never an empty store.
//  3. A scan that fails is an error, never a short answer.
//  4. No slice that points into C memory outlives the call that produced it.
//  5. The writer actor (writer.go) answers a record only from its group's CommitHooks return, never abandons a
//     record whose group started, and never commits one whose caller gave up first.
package store
