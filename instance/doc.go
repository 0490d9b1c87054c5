// Package instance builds one Ankusa instance from its config: the actor tree, the
// store, the edge and the admin listener, all hanging off the *Instance value so that
// several instances with their own data dirs and ports run in one process.
//
// The tree is rest-for-one in the order of DESIGN.md section 3: a crash of a core child
// restarts it and everything after it; an isolated domain (metrics, admin) restarts on
// its own budget and never touches ingest.
package instance
