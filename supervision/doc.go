// Package supervision is Ankusa's rest-for-one supervisor on protoactor-go, which only offers one-for-one and
// all-for-one.
//
// Invariants it owns (DESIGN.md §3: "The root is rest-for-one: a crash of child i stops i+1..n (in reverse),
// restarts i, then starts i+1..n again in order. Optional domains are isolated: their crash never touches
// ingest."):
//
//  1. Children start one at a time, in order: child i+1 is spawned only after child i reported that it
//     started (its Receive of *actor.Started returned without panicking).
//  2. A crash of core child i stops every live child after it in reverse order, each one waited for, then
//     child i itself, then spawns i..n again in order (rule 1).
//  3. A crash of an isolated child restarts that child alone; its siblings are never touched. Past its own
//     restart budget it is stopped, reported "subtree_down" and spawned again after a capped, jittered,
//     doubling back-off.
//  4. More than MaxRestarts core crashes within Window is never looped on: the supervisor stops all of its
//     children in reverse order and escalates (to its parent supervisor, or through Tree.Fatal at the root).
//  5. The supervisor never blocks inside Receive: waiting for a child to start or to stop is state plus
//     messages.
//
// Restarting is stop + spawn under the same name (not protoactor's RestartChildren): the crashed actor gets
// the ordinary *actor.Stopping/*actor.Stopped, so a child has one clean-up path, and every spawn gets a fresh
// generation number that its "started" report carries, so a report that lost the race against a failure or a
// termination notice (those overtake ordinary messages) is recognised as stale. The PID id is unchanged
// ("<parent id>/<Name>"), so a PID held elsewhere reaches the new incarnation.
//
// A nested supervisor (NewProps as a child's Props) reports started once its whole subtree has, is stopped by
// its parent with a message so that it too stops its children last first, and escalates to its parent, which
// treats it as one crashed child. Limits: a child stuck inside a handler can never be stopped (Go cannot kill a
// goroutine), so a stop waiting for it waits for ever and Tree.Stop returns ErrStopTimeout; a supervisor
// stopped by a plain protoactor Stop (not Tree.Stop) lets protoactor stop its children all at once.
package supervision
