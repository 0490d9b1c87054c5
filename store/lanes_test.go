package store

import (
	"maps"
	"testing"
)

// Inventory F.6: ordered lanes, "lane state lives in the store": blocks round trip and survive a reopen.
func TestLaneBlocksRoundTripAndSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	a := LaneKey{Ord: 1, Sink: 0, Source: "github"}
	b := LaneKey{Ord: 1, Sink: 1, Source: "github"}
	c := LaneKey{Ord: 2, Sink: 0, Source: ""}
	for k, v := range map[LaneKey]LaneBlock{a: {Seq: 10, Until: 1000}, b: {Seq: 11, Until: 2000}, c: {Seq: 12, Until: 3000}} {
		if err := db.SetLaneBlock(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.SetLaneBlock(a, LaneBlock{Seq: 10, Until: 1500}); err != nil { // a later retry of the same head
		t.Fatal(err)
	}
	if err := db.ClearLaneBlock(b); err != nil {
		t.Fatal(err)
	}
	want := map[LaneKey]LaneBlock{a: {Seq: 10, Until: 1500}, c: {Seq: 12, Until: 3000}}
	got, err := db.LaneBlocks()
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("LaneBlocks = %v, %v; want %v", got, err, want)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, nil)
	if got, err := db.LaneBlocks(); err != nil || !maps.Equal(got, want) {
		t.Fatalf("LaneBlocks after reopen = %v, %v; want %v", got, err, want)
	}
}
