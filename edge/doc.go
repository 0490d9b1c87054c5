// Package edge is the ingest side of an instance: the fasthttp listener, route
// resolution, everything that can refuse a request before its body is read, the
// bounded body read, explicit admission, and the partition batchers that hand
// records to the store's writer.
//
// The invariant it owns: a request is answered 201 only after the store reported its
// record committed and synced, or, under wal.type none, after every sink of its source
// confirmed it within wal.publish_timeout_ms (direct.go). Every other path ends in the status and reason the
// design names (404, 413, 400, 503 with Retry-After), and a record whose deadline
// passed before its group started is answered 503 and never committed.
package edge
