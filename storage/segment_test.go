package storage

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/ankusa-go/ankusa/store"
)

func testHook(i int, body []byte) store.Hook {
	var id [16]byte
	id[0], id[15] = byte(i>>8), byte(i)
	return store.Hook{ID: id, ReceivedAt: 1_764_000_000_000 + int64(i), Tenant: "t", Source: "s",
		ContentType: "application/octet-stream", Headers: []store.Header{{Name: "x-sig", Value: "v1"}}, Body: body}
}

// Seed E.5: "Codec.Raw frame: <<len:32, crc32(payload):32, payload>>; index entry {key, offset, length} (length
// includes the 8-byte header) for range GETs". Every byte of every hook comes back, through the whole-object
// decoder and through a range read of the frame the index names.
func TestSegmentRoundTripByteExact(t *testing.T) {
	bodies := [][]byte{{}, []byte("{}"), bytes.Repeat([]byte{0, 0xff, '\r', '\n'}, 1000), []byte("\x00binary\x01")}
	var b Builder
	var vals [][]byte
	for i, body := range bodies {
		h := testHook(i, body)
		v := store.AppendHook(nil, &h)
		vals = append(vals, v)
		if err := b.Add(uint64(100+i), v); err != nil {
			t.Fatal(err)
		}
	}
	seg, idxb, sum := b.Finish(nil)
	if sum != sha256.Sum256(seg) {
		t.Fatal("Finish's digest is not the segment's")
	}
	idx, err := DecodeIndex(idxb)
	if err != nil {
		t.Fatal(err)
	}
	if idx.SegmentSize != int64(len(seg)) || idx.SegmentSHA256 != sum || len(idx.Entries) != len(bodies) {
		t.Fatalf("index = size %d, %d entries", idx.SegmentSize, len(idx.Entries))
	}
	for i, e := range idx.Entries {
		p, err := DecodeFrame(seg[e.Offset : e.Offset+int64(e.Length)])
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		h, err := store.DecodeHook(p)
		if err != nil || !bytes.Equal(h.Body, bodies[i]) || e.Seq != uint64(100+i) || h.ID != e.ID || h.ReceivedAt != e.ReceivedAt {
			t.Fatalf("entry %d: %+v, %v", i, e, err)
		}
	}
	n := 0
	err = DecodeSegment(seg, func(off int64, p []byte) error {
		if !bytes.Equal(p, vals[n]) || off != idx.Entries[n].Offset {
			t.Fatalf("record %d differs", n)
		}
		n++
		return nil
	})
	if err != nil || n != len(bodies) {
		t.Fatalf("DecodeSegment = %d records, %v", n, err)
	}

	// One flipped bit anywhere is caught.
	for _, at := range []int{0, headerLen + 2, headerLen + 9, len(seg) - 1} {
		bad := bytes.Clone(seg)
		bad[at] ^= 0x10
		if err := DecodeSegment(bad, func(int64, []byte) error { return nil }); !errors.Is(err, ErrCorrupt) {
			t.Errorf("segment with byte %d flipped: %v", at, err)
		}
	}
	bad := bytes.Clone(idxb)
	bad[len(bad)/2] ^= 1
	if _, err := DecodeIndex(bad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("index with a flipped byte: %v", err)
	}
}

func TestSegmentKeys(t *testing.T) {
	seg, idx := SegmentKeys("node-a", Day(0), 7, 9)
	if seg != "archive/v1/dt=1970-01-01/node-a/seg-7-9.seg" || idx != "archive/v1/dt=1970-01-01/node-a/seg-7-9.idx" {
		t.Fatalf("keys = %s, %s", seg, idx)
	}
	if m := ManifestKey("node-a", "2026-12-03"); m != "archive/v1/dt=2026-12-03/node-a/_manifest.json" {
		t.Fatal(m)
	}
	for _, n := range []string{"", "a/b", "..", "a b"} {
		if ValidNode(n) {
			t.Errorf("ValidNode(%q) = true", n)
		}
	}
}

func FuzzDecodeSegment(f *testing.F) {
	var b Builder
	h := testHook(1, []byte("hello"))
	_ = b.Add(1, store.AppendHook(nil, &h))
	seg, idx, _ := b.Finish(nil)
	f.Add(bytes.Clone(seg))
	f.Add(bytes.Clone(idx))
	f.Add([]byte("ANKS\x01\x01\x00\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		_ = DecodeSegment(in, func(_ int64, p []byte) error {
			_, _ = store.DecodeHook(p)
			return nil
		})
		if x, err := DecodeIndex(in); err == nil {
			for _, e := range x.Entries {
				if e.Offset < 0 || e.Offset+int64(e.Length) > x.SegmentSize {
					t.Fatalf("index accepted entry %+v outside a segment of %d", e, x.SegmentSize)
				}
			}
		}
		_, _ = DecodeFrame(in)
	})
}

// The digests are computed as the records go in: a reused builder's segment carries the same digests as a new
// builder's, the footer's over header and records, the returned one over the whole object.
func TestBuilderDigestsOnReuse(t *testing.T) {
	var reused Builder
	for round := range 3 {
		var fresh Builder
		reused.Reset()
		for i := range 5 + round {
			h := testHook(i, bytes.Repeat([]byte{byte(round)}, 100*i))
			v := store.AppendHook(nil, &h)
			if err := reused.Add(uint64(i), v); err != nil {
				t.Fatal(err)
			}
			if err := fresh.Add(uint64(i), v); err != nil {
				t.Fatal(err)
			}
		}
		seg, _, sum := reused.Finish(nil)
		want, _, wantSum := fresh.Finish(nil)
		if !bytes.Equal(seg, want) || sum != wantSum || sum != sha256.Sum256(seg) {
			t.Fatalf("round %d: the reused builder's segment or digest differs", round)
		}
		end := len(seg) - footerLen
		if body := sha256.Sum256(seg[:end]); !bytes.Equal(seg[end+8:], body[:]) {
			t.Fatalf("round %d: footer digest is not the records'", round)
		}
	}
}
