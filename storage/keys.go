package storage

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/store"
)

// Object keys (relative to the blob store; storage.key_prefix is the store's business):
//
//	archive/v1/dt=<yyyy-mm-dd of the oldest hook, UTC>/<node>/seg-<first_seq>-<last_seq>.seg
//	archive/v1/dt=<yyyy-mm-dd>/<node>/seg-<first_seq>-<last_seq>.idx
//	archive/v1/dt=<yyyy-mm-dd>/<node>/_manifest.json
//
// The keys depend only on the node, the oldest hook's day and the seq range, so a compaction retried after a
// failure or a crash rewrites the same objects.
const archiveRoot = "archive/v1"

// ValidNode reports whether node can be one part of an object key.
func ValidNode(node string) bool {
	return blob.ValidKey(node) && !containsSlash(node)
}

func containsSlash(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return true
		}
	}
	return false
}

// Day is the UTC date of t (unix ms) as the archive names it.
func Day(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02") }

func dayDir(node, day string) string { return archiveRoot + "/dt=" + day + "/" + node }

// SegmentKeys are the keys of the segment of node holding seqs first..last whose oldest hook is on day.
func SegmentKeys(node, day string, first, last uint64) (seg, idx string) {
	base := fmt.Sprintf("%s/seg-%d-%d", dayDir(node, day), first, last)
	return base + ".seg", base + ".idx"
}

// ManifestKey is the key of the manifest of node's segments of day.
func ManifestKey(node, day string) string { return dayDir(node, day) + "/_manifest.json" }

// Manifest lists the segments of one node-day; it is rewritten from the catalogue whenever one is added or
// deleted, so a reader of the bucket alone (a restore, an operator) finds them without listing.
type Manifest struct {
	Version  int               `json:"version"`
	Node     string            `json:"node"`
	Day      string            `json:"day"`
	Segments []ManifestSegment `json:"segments"`
}

// ManifestSegment is one segment of a manifest.
type ManifestSegment struct {
	Key           string `json:"key"`
	Index         string `json:"index"`
	FirstSeq      uint64 `json:"first_seq"`
	LastSeq       uint64 `json:"last_seq"`
	Count         uint32 `json:"count"`
	Bytes         int64  `json:"bytes"`
	MinReceivedAt int64  `json:"min_received_at_ms"`
	MaxReceivedAt int64  `json:"max_received_at_ms"`
	SHA256        string `json:"sha256"`
}

func manifestSegment(e *store.SegmentEntry) ManifestSegment {
	return ManifestSegment{Key: e.SegmentKey, Index: e.IndexKey, FirstSeq: e.FirstSeq, LastSeq: e.LastSeq,
		Count: e.Count, Bytes: e.Bytes, MinReceivedAt: e.MinReceivedAt, MaxReceivedAt: e.MaxReceivedAt,
		SHA256: hex.EncodeToString(e.SHA256[:])}
}

func encodeManifest(node, day string, segs []ManifestSegment) []byte {
	sort.Slice(segs, func(a, b int) bool { return segs[a].FirstSeq < segs[b].FirstSeq })
	b, _ := json.MarshalIndent(Manifest{Version: 1, Node: node, Day: day, Segments: segs}, "", "  ")
	return append(b, '\n')
}
