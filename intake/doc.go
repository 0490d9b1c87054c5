// Package intake is the replicated intake log of wal.type dual: every commit group is fsynced on this host and
// published to a Kafka topic (acks=all, idempotent producer) in parallel, and its records are answered only
// when both halves hold.
//
// The invariants it owns:
//  1. No record is answered committed unless its group's synced local write returned and the log confirmed
//     every record of the group (Dual.CommitHooksConfirm, driven by the store's writer).
//  2. An open breaker (intake.breaker_failures consecutive failed publishes) refuses a group before either
//     half is touched: ErrIntakeUnavailable, never a disk-only ack.
//  3. A half-persisted hook (one half failed) is held in the pending set and completed by the reconciler,
//     never undone: the local-only ones keep their pending key (written in their own synced batch) and are
//     republished; the log-only ones are applied to the store from their log entry. A retry meeting such an
//     original is ErrIntakePending until it is complete.
//  4. The watermark (m:intake_offset) only moves past a seq once every hook of this node below it is in the
//     store: boot recovery replays the log from it with one rule (store.ApplyHooks: a seq that holds a hook
//     is skipped), so a duplicate or reordered record changes nothing, and nothing is served until the
//     replay and the republish of the local hooks above the watermark are done.
//
// The record format is documented in docs/intake.md.
package intake
