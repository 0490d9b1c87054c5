package disk

import (
	"os"
	"testing"
	"time"
)

func TestGroupCommit(t *testing.T) {
	dir := t.TempDir()
	const rate, size, span = 2000, 1024, 300 * time.Millisecond
	f, err := GroupCommit(dir, rate, size, span)
	if err != nil {
		t.Fatal(err)
	}
	// Every record that arrived in the span is acked once, after it arrived, by one of at most as many syncs.
	if want := int(span / (time.Second / rate)); len(f.Acks)+f.Behind != want {
		t.Fatalf("%d acks and %d behind, want %d records in all", len(f.Acks), f.Behind, want)
	}
	if f.Syncs == 0 || f.Syncs > len(f.Acks) {
		t.Fatalf("%d syncs for %d acks", f.Syncs, len(f.Acks))
	}
	if f.Acks[0] <= 0 || f.Acks.Quantile(0.5) > f.Acks.Quantile(0.99) || f.Acks.Quantile(0.99) > f.Acks.Max() {
		t.Fatalf("acks not positive and sorted: first %v, p50 %v, p99 %v, max %v", f.Acks[0], f.Acks.Quantile(0.5),
			f.Acks.Quantile(0.99), f.Acks.Max())
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left %d files in the directory", len(left))
	}
	if _, err := GroupCommit(dir, 0, size, span); err == nil {
		t.Fatal("a zero rate was accepted")
	}
}
