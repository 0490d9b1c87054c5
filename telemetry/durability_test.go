package telemetry

import (
	"strings"
	"testing"
)

// TestDurabilityLineNamesTheBackupWindow proves the startup line's claim (inventory I.4: "One durability line
// naming the matrix row and the backup interval"): with backups on it names the interval as what a lost host
// loses; with them off it says the host's loss is not covered.
func TestDurabilityLineNamesTheBackupWindow(t *testing.T) {
	on := DurabilityLine("disk", true, 500)
	if !strings.Contains(on, "backup.interval_ms=500") || !strings.Contains(on, "a lost host loses at most the hooks acked since the last backup") {
		t.Fatalf("backup on: %q", on)
	}
	off := DurabilityLine("disk", false, 60000)
	if !strings.Contains(off, "not the loss of this host") || strings.Contains(off, "interval_ms") {
		t.Fatalf("backup off: %q", off)
	}
}

// TestDurabilityLineStatesTheDualRow proves the startup line of wal.type dual states the row of the durability
// table (inventory E.9: "fsynced here and confirmed in intake log | host + every ISR of the partition lost
// together (RF 3, min ISR 2)").
func TestDurabilityLineStatesTheDualRow(t *testing.T) {
	l := DurabilityLine("dual", false, 0)
	for _, want := range []string{"fsynced on this host and confirmed in the intake log", "every in-sync replica", "min.insync.replicas 2"} {
		if !strings.Contains(l, want) {
			t.Fatalf("dual line %q lacks %q", l, want)
		}
	}
}
