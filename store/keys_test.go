package store

import (
	"bytes"
	"errors"
	"math"
	"sort"
	"testing"
)

// Inventory E.2: index keys are big-endian so they sort by time, then seq; ADR 0001 puts the tenant ordinal
// first so one tenant's due rows are one contiguous range.
func TestKeyCodecRoundTripsAndSorts(t *testing.T) {
	for _, seq := range []uint64{0, 1, 255, 256, math.MaxUint64} {
		got, err := ParseHookKey(AppendHookKey(nil, seq))
		if err != nil || got != seq {
			t.Fatalf("hook key %d: got %d, %v", seq, got, err)
		}
		a, err := ParseArchiveKey(AppendArchiveKey(nil, seq))
		if err != nil || a != seq {
			t.Fatalf("archive key %d: got %d, %v", seq, a, err)
		}
		d := DeliveryKey{Seq: seq, Sink: uint16(seq)}
		gd, err := ParseDeliveryKey(d.Append(nil))
		if err != nil || gd != d {
			t.Fatalf("delivery key %+v: got %+v, %v", d, gd, err)
		}
	}
	keys := []DueKey{
		{Ord: 2, At: 1, Seq: 1, Sink: 0},
		{Ord: 1, At: 1000, Seq: 5, Sink: 1},
		{Ord: 1, At: 1000, Seq: 5, Sink: 0},
		{Ord: 1, At: 999, Seq: 9, Sink: 0},
		{Ord: 1, At: 1000, Seq: 4, Sink: 7},
	}
	enc := make([][]byte, len(keys))
	for i, k := range keys {
		enc[i] = k.Append(nil)
		if len(enc[i]) != DueKeyLen || !bytes.HasPrefix(enc[i], AppendDuePrefix(nil, k.Ord)) {
			t.Fatalf("due key %+v encodes as %x", k, enc[i])
		}
		got, err := ParseDueKey(enc[i])
		if err != nil || got != k {
			t.Fatalf("due key %+v: got %+v, %v", k, got, err)
		}
	}
	sort.Slice(enc, func(i, j int) bool { return bytes.Compare(enc[i], enc[j]) < 0 })
	want := []DueKey{keys[3], keys[4], keys[2], keys[1], keys[0]}
	for i, b := range enc {
		got, _ := ParseDueKey(b)
		if got != want[i] {
			t.Fatalf("sorted position %d: got %+v, want %+v", i, got, want[i])
		}
	}
	v, err := ParseIndexValue(AppendIndexValue(nil, 1234))
	if err != nil || v != 1234 {
		t.Fatalf("index value: %d, %v", v, err)
	}
	fk := InflightKey{Ord: 7, Seq: 1 << 40, Sink: 3}
	if got, err := ParseInflightKey(fk.Append(nil)); err != nil || got != fk || len(fk.Append(nil)) != InflightKeyLen {
		t.Fatalf("inflight key %+v: got %+v, %v", fk, got, err)
	}
	xk := DeadKey{Ord: 7, At: 1_700_000_000_000, Seq: 9, Sink: 1}
	if got, err := ParseDeadKey(xk.Append(nil)); err != nil || got != xk ||
		!bytes.HasPrefix(xk.Append(nil), AppendDeadPrefix(nil, 7)) {
		t.Fatalf("dead key %+v: got %+v, %v", xk, got, err)
	}
	// Dead keys of one tenant sort by time of death.
	if bytes.Compare(DeadKey{Ord: 1, At: 5, Seq: 9}.Append(nil), DeadKey{Ord: 1, At: 6, Seq: 1}.Append(nil)) >= 0 {
		t.Fatal("dead keys do not sort by time of death")
	}
	size, due, err := ParseInflightValue(AppendInflightValue(nil, 77, 1_700_000_000_001))
	if err != nil || size != 77 || due != 1_700_000_000_001 {
		t.Fatalf("inflight value: %d, %d, %v", size, due, err)
	}
	lk := LaneKey{Ord: 3, Sink: 2, Source: "github"}
	if got, err := parseLaneKey(appendLaneKey(nil, lk)); err != nil || got != lk {
		t.Fatalf("lane key %+v: got %+v, %v", lk, got, err)
	}
}

func TestKeyParsersRefuseWrongShapes(t *testing.T) {
	f := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, ErrBadKey) {
			t.Fatalf("%s: want ErrBadKey, got %v", name, err)
		}
	}
	_, err := ParseHookKey([]byte{1, 2, 3})
	f("short hook key", err)
	_, err = ParseDeliveryKey(make([]byte, 9))
	f("short delivery key", err)
	bad := DueKey{Ord: 1}.Append(nil)
	bad[0] = IndexArchive
	_, err = ParseDueKey(bad)
	f("due key with archive prefix", err)
	_, err = ParseArchiveKey(AppendHookKey(nil, 1))
	f("hook key as archive key", err)
	_, err = ParseInflightKey(DueKey{Ord: 1}.Append(nil))
	f("due key as inflight key", err)
	_, err = ParseDeadKey(DueKey{Ord: 1}.Append(nil))
	f("due key as dead key", err)
	_, err = parseLaneKey([]byte("l:12"))
	f("short lane key", err)
	if _, _, err := ParseInflightValue(AppendIndexValue(nil, 1)); !errors.Is(err, ErrCorruptValue) {
		t.Fatalf("short inflight value: %v", err)
	}
}

func FuzzKeyCodec(f *testing.F) {
	f.Add(DueKey{Ord: 1, At: 2, Seq: 3, Sink: 4}.Append(nil))
	f.Add(AppendArchiveKey(nil, 9))
	f.Add(DeliveryKey{Seq: 7, Sink: 1}.Append(nil))
	f.Add(InflightKey{Ord: 1, Seq: 2, Sink: 3}.Append(nil))
	f.Add(DeadKey{Ord: 1, At: 2, Seq: 3, Sink: 4}.Append(nil))
	f.Add(appendLaneKey(nil, LaneKey{Ord: 1, Sink: 2, Source: "s"}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		// Every parser either refuses the bytes or returns a key that encodes back to exactly them.
		if k, err := ParseDueKey(b); err == nil && !bytes.Equal(k.Append(nil), b) {
			t.Fatalf("due key %x re-encodes as %x", b, k.Append(nil))
		}
		if s, err := ParseArchiveKey(b); err == nil && !bytes.Equal(AppendArchiveKey(nil, s), b) {
			t.Fatalf("archive key %x re-encodes differently", b)
		}
		if k, err := ParseDeliveryKey(b); err == nil && !bytes.Equal(k.Append(nil), b) {
			t.Fatalf("delivery key %x re-encodes differently", b)
		}
		if s, err := ParseHookKey(b); err == nil && !bytes.Equal(AppendHookKey(nil, s), b) {
			t.Fatalf("hook key %x re-encodes differently", b)
		}
		if k, err := ParseInflightKey(b); err == nil && !bytes.Equal(k.Append(nil), b) {
			t.Fatalf("inflight key %x re-encodes differently", b)
		}
		if k, err := ParseDeadKey(b); err == nil && !bytes.Equal(k.Append(nil), b) {
			t.Fatalf("dead key %x re-encodes differently", b)
		}
		if k, err := parseLaneKey(b); err == nil && !bytes.Equal(appendLaneKey(nil, k), b) {
			t.Fatalf("lane key %x re-encodes differently", b)
		}
	})
}
