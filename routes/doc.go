// Package routes is the edge's route guard (inventory A.2 step 1, A.6): the path patterns and methods a node
// takes hooks on, the IP rules (global and per route) that may refuse a caller, and the client address they
// are decided on. Its invariant: a decision reads only the request line, the socket's address and (behind a
// trusted proxy) X-Forwarded-For; it never needs the body, so the edge refuses before reading one.
//
// The table is a copy-on-write snapshot (Table): a change builds a new Snapshot and publishes it with one
// atomic store, so a lookup never takes a lock and never sees half a change. Validation is the same for the
// file's routes.seed and the admin API: ParseSpec and ParseRules are the one grammar.
package routes
