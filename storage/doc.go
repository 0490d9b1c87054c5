// Package storage is the storage role: the compactor that packs archive obligations into immutable segments in
// a blob store and catalogues them, fetch by hook id, archive retention and the walk over archived hooks that
// replay reads.
//
// The invariant it owns: an archive obligation is cleared only after the batch that catalogues a segment
// already durable in the blob store (segment, then index, then the node-day manifest), and by a later batch in
// the same WAL, so no crash keeps the clearing without the catalogue row: every hook whose obligation is gone
// can be fetched back byte for byte until retention deletes its segment.
//
// Around it:
//  1. One segment and one index object per compaction, never one object per hook; a segment's records are at
//     most storage.roll_bytes unless a single hook is bigger.
//  2. A segment is written under keys derived from its first and last seq, so a compaction that failed after
//     its PUTs (or crashed before its catalogue batch) writes the same objects again under the same keys.
//  3. Compaction never deletes a hook a delivery row still holds (store.CatalogueSegment checks every row).
//  4. Decoders of segments, frames and indexes never panic on hostile bytes, and check every length against
//     what is left before they slice or allocate.
package storage
