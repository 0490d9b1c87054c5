// Package console is the operators' web console, served by the admin listener under /console/.
//
// It is server-rendered html/template pages with one small embedded script (assets/console.js) that polls the
// overview's figures; there is no framework and no build step: every template and asset is embedded in the
// binary (the embed package), so `go build` alone makes a binary that serves the whole console, and the
// Content-Security-Policy allows scripts and styles from the console itself only (no inline script or style,
// no other origin).
//
// Invariants:
//  1. Every read and change the console makes is a call of the admin API as the signed-in principal
//     (admin.API.Serve: the same routes, scope and tenant checks), or admin's one in-process read that applies
//     the same checks (admin.API.QuarantineEntry): the console can do nothing the API refuses that principal.
//  2. A session lives in this process only: the cookie holds a random session id (never the token), the server
//     keeps its SHA-256 with the principal, an idle and an absolute expiry. A restarted console forgets its
//     sessions: operators sign in again.
//  3. Every change is a POST carrying the session's CSRF token; one without it, or with another, is refused
//     (403) before the API is called.
package console
