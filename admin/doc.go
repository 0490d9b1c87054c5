// Package admin is the operator surface of one instance: the admin listener (admin.ip:admin.port) with
// /health, /ready, /metrics and the /v1 operator API, run as the isolated `admin` child of the instance's tree.
//
// Invariants:
//  1. Every /v1 route passes authentication before its handler runs: no principal, no access (401); a
//     principal without the route's scope or the tenant it names is refused (403) before anything is read.
//  2. admin holds no state of its own: everything it answers is read through the Deps the instance hands it,
//     so a restarted admin needs nothing from its predecessor.
//  3. A caller-controlled value (an id, a tenant, a limit, a cursor) is validated where it enters; it is never
//     logged raw.
package admin
