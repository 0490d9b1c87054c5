// Package store is the sole owner of the node's RocksDB database: its column families, key layout, value codecs,
// seq and tenant ordinals, the writer actor that group-commits ingested hooks, and the delivery-row state
// transitions dispatch drives (claim, complete, retry, bury, recover, replay), and the quarantine pen.
//
// The invariant it owns: the store never reports a commit before the batch is synced. CommitHooks returns only
// after one synced WriteBatch holding every row of the group has been written, and the writer answers a caller
// only from that return value, so a committed Result is backed by an fsync and a failed one by nothing at all
// (the batch is atomic).
//
// Around it:
//  1. Seqs are dense over the committed records of a group, strictly increasing across groups and restarts, and
//     never reused: a failed commit burns its seqs, and m:next_seq is written in the same batch as the rows it
//     covers.
//  2. A torn WAL tail (an unacknowledged write) is dropped on open; damage before it refuses to open. An
//     unreadable store is an error, never an empty store.
//  3. A scan that fails is an error, never a short answer.
//  4. No slice that points into C memory outlives the call that produced it.
//  5. The writer actor (writer.go) answers a record only from its group's CommitHooks return, never abandons a
//     record whose group started, and never commits one whose caller gave up first.
//  6. Every delivery row has exactly one index key: due ('d', pending or scheduled), inflight ('f', claimed) or
//     dead ('x'). Each transition moves it in one batch with the row, so a crash leaves the old key or the new.
//  7. The per-tenant counters (pending, scheduled, inflight, dead, pending bytes) always equal what the index
//     holds, on disk and in memory: every batch that moves a key also writes the new absolute counters of the
//     tenants it touches, and the in-memory image takes them only after the write succeeded. Counts and
//     ActiveTenants read that image, never the index, so the gauges and the scheduler's tenant list cost the
//     same at a thousand rows as at a million.
//  8. A hook is deleted with its last delivery row when no archive obligation holds it; dead rows keep it. Its
//     claim marker (claims.go), if any, is deleted in the same batch, and so are its delivered records: a
//     delivered record (delivery.go) exists only while its hook does, written by the batch that deletes its
//     row and deleted by whichever batch deletes the hook (an outcome, the compactor's clearing, an erase).
//  9. The dedupe index (dedupe.go) holds at most one key per (tenant, source, provider event key), written in
//     the synced batch of the hook that first used it; CommitHooks decides every record's dedupe in that batch,
//     so the first occurrence of a key wins and a hook is never stored without its key. Its counts (per tenant,
//     and their sum) obey invariant 7 and bound the index (dedupe.max_entries, max_entries_per_tenant). Only
//     SweepDedupe deletes keys, and only a key whose expiry is the one its expiry key named.
//  10. The quarantine pen (quarantine.go) holds two keys per entry (summary, whole entry), and its byte and
//     entry counts (m:quarantine_bytes, m:quarantine_count) always equal what it holds: every batch that adds
//     or deletes an entry writes both of its keys and the new absolute counts, synced, and the in-memory image
//     takes them only after the write succeeded. Nothing evicts an entry; a put that would pass the byte cap is
//     refused whole. A release commits the hook with its original id and deletes its entry in one batch built
//     by the same code as CommitHooks, so a crash leaves the hook held or committed, never both or neither.
//
// # Locks
//
// Lock order: commitMu, then cmu, then qmu, then closeMu (shared), then stateMu.
//
//   - commitMu serialises CommitHooks (and RedriveArchivedStep, which commits hooks an archive replay reads
//     back): seq and ordinal assignment follow write order.
//   - cmu is held by every write that changes a counter (CommitHooks, ClaimDue, Complete, Reschedule, Bury,
//     RecoverInflight, ReplayDeadStep, RedriveArchivedStep, SweepDedupe, and PutReplayJob so a steer and a step cannot interleave),
//     from reading the counters until the batch is written and applied. Counter values are absolute, so two
//     batches touching one tenant must reach RocksDB in the order their values were computed; holding cmu
//     across the write is what guarantees it. It also makes a dedupe key's read and its write (CommitHooks) or
//     delete (SweepDedupe) one step: the sweeper reads the due expiry keys without it, then re-reads each key
//     under it. PutClaimRef takes it too, though it changes no counter: every batch that deletes a hook holds
//     it, so a claim marker is never written behind a hook reclaimed meanwhile.
//   - qmu serialises the pen's writes (PutQuarantine, PurgeQuarantine, ReleaseQuarantine) from reading the pen
//     counters until their batch is written and applied, as cmu does for the queue counters. Only a release
//     takes cmu as well (it commits a hook): a pen tick's fsync never waits for an ingest commit's lock, and the
//     two synced writes may share one WAL sync inside RocksDB.
//   - the outcome queue's mutex (outcomes.go) guards the outcomes waiting for a group; it is a leaf, taken
//     alone or under cmu by the group's leader when it drains the queue.
//   - closeMu is held shared by every call that touches a RocksDB handle and exclusively by Close.
//   - stateMu guards the in-memory counters for readers (Counts, TenantCounts, ActiveTenants, TenantName,
//     QuarantineStats, the tenants' seek heads); writers change them holding cmu (qmu for the pen's) and stateMu
//     both. Readers never wait for a write.
//
// CommitHooks holds cmu through its synced write, so outcomes wait for an in-flight fsync. Releasing it during
// the fsync would gain nothing: RocksDB writes batch groups one after another, and a non-synced write issued
// while a synced one is in flight waits for that fsync inside RocksDB anyway (measured here: a one-key
// non-synced write takes 5.5 µs alone and 192 µs at the median while synced writes of 300 µs run back to back).
// It would also break invariant 7 unless every outcome of a tenant in the group waited for the commit anyway:
// an outcome written during the fsync carries counters that miss the commit's rows, and may land after it.
// So outcomes are group-committed (outcomes.go): the outcomes queued while one waits for cmu go into one
// batch, with each touched tenant's counters computed over the group and written once, and an fsync window
// costs them one write rather than one each. Every operation is still checked against the group so far (a row
// settled earlier in the group is not claimed; a row deleted earlier does not keep its hook).
// Outcome writes are not synced: an outcome lost in a crash leaves its row claimed, and RecoverInflight
// delivers it again.
package store
