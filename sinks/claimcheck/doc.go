// Package claimcheck checks hook bodies too large for a queue message into packs in the claim blob store and
// serves them back, read-only, to consumers holding a claim ref (inventory D.5, A.7).
//
// A claim id is a canonical uppercase ULID: 48 bits of pack time (ms), 64 random bits, and the 16-bit position
// of the body in its pack. The pack id is the claim id with the position zeroed, and the pack's key,
// claims/tenant=<t>/dt=<yyyy-mm-dd of the pack time, UTC>/<pack_id>, follows from the tenant and the claim id
// alone: redeeming needs no catalogue. Keys are never prefixed, so consumers of every node redeem from one
// store.
//
// Invariants:
//  1. CheckIn returns a claim only after the pack holding it is durable in the store (blob.Store.Put).
//  2. A pack is a standard ZIP (every entry stored, uncompressed) whose first entry is the index: a reader finds
//     any claim with three ranged reads (index header, index row, body) and never trusts a body's bytes as
//     index rows.
//  3. Tenants and claim ids are validated before they become a key, a path or a header: hostile input is
//     400, never a file name.
//  4. The gateway serves the bytes stored, with the SHA-256 recorded at check-in; the redeemer checks it
//     (message.Redeem).
package claimcheck
