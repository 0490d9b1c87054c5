// Package dispatch delivers stored hooks to their sinks, at least once.
//
// The scheduler actor is a scheduler over due rows, not a poller: a commit wakes it,
// otherwise it sleeps until the earliest due row. It claims rows tenant by tenant by
// deficit round-robin, bounded by dispatch.max_inflight(_bytes) and each tenant's window,
// queues them per sink key {tenant, source, sink index}, and hands running slots
// round-robin across tenants and then across a tenant's keys, so a tenant with a slow
// sink fills its own window and nobody else's. Lane actors, one per sink key, spawned on
// demand and stopped when idle, run the attempts. A claim page runs in a task and comes
// back as a message, so the attempts answering meanwhile get their next rows at once.
//
// The invariants it owns: a row is settled (delivered, rescheduled or buried) only by
// a write to the store, so a row claimed before a crash is due again at the next start;
// a sink that fails, panics or hangs is a retry, never a crash; a retry is a row due
// later that holds no slot; a hook too large for its source's queue sinks is checked in
// to the claim check once, and every sink and retry of it carries the ref recorded in
// the store (claim.go).
//
// The replayer actor runs replay jobs (replay.go): dlq jobs move dead rows back to due; archive jobs commit
// again, as new hooks with fresh rows for their source's current sinks and the job's replay id, the archived
// hooks received in a window. It reads the archive only through the ArchiveReader the instance installs, so
// dispatch never imports the storage role; each step's rows and the job's cursor are one synced batch.
package dispatch
