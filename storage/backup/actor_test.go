package backup

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/actors"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/test/poll"
)

func actorOptions(t *testing.T, db *store.DB, tel *telemetry.Telemetry, interval, verify time.Duration, targets ...Target) ActorOptions {
	return ActorOptions{
		Runner: Options{Targets: targets, SigningKey: testKey, Keep: 3, Writer: "node-a",
			WorkDir: filepath.Join(t.TempDir(), "work"), Log: zerolog.Nop()},
		Interval: interval, VerifyInterval: verify, FinalTimeout: 10 * time.Second,
		DB: func() *store.DB { return db }, Tel: tel,
	}
}

// TestFinalBackupOnCleanStop proves the last checkpoint (design: "a clean stop takes one last checkpoint";
// inventory E.9: no hook lost with the host "after a clean stop"): with an interval that never comes, stopping
// the runner leaves a backup holding the hooks committed just before the stop.
func TestFinalBackupOnCleanStop(t *testing.T) {
	db := openStore(t, filepath.Join(t.TempDir(), "store"))
	primary := newMem("primary")
	tel := telemetry.New("t", zerolog.Nop())
	sys := actors.NewSystem("t", zerolog.Nop())
	defer sys.Shutdown()
	pid := sys.Root.Spawn(NewActorProps(actorOptions(t, db, tel, time.Hour, 0, Target{Name: "primary", Store: primary})))
	ids := commit(t, db, 25)
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(tel.Metrics.Backup.Runs.WithLabelValues(telemetry.BackupOK)); n != 1 {
		t.Fatalf("runs_total{ok} = %v after the stop, want the one final backup", n)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := Restore(context.Background(), restoreOpts(dir, Target{Name: "primary", Store: primary})); err != nil {
		t.Fatal(err)
	}
	got := hookIDs(t, dir)
	for _, id := range ids {
		if !got[id] {
			t.Fatalf("hook %x committed before the stop is not in the final backup", id)
		}
	}
	if age := tel.BackupAge(time.Now()); age > 5*time.Second {
		t.Fatalf("backup age %v right after the final backup", age)
	}
}

// TestRunnerBacksUpEveryIntervalAndCountsVerifyFailures proves the schedule and the read-back metric
// (inventory H.2: ankusa_backup_runs_total{result}, ankusa_backup_verify_failed_total{target}): runs come every
// interval, and a byte flipped in the secondary's copy is counted against the secondary only.
func TestRunnerBacksUpEveryIntervalAndCountsVerifyFailures(t *testing.T) {
	db := openStore(t, filepath.Join(t.TempDir(), "store"))
	commit(t, db, 10)
	primary, secondary := newMem("primary"), newMem("secondary")
	tel := telemetry.New("t", zerolog.Nop())
	sys := actors.NewSystem("t", zerolog.Nop())
	defer sys.Shutdown()
	pid := sys.Root.Spawn(NewActorProps(actorOptions(t, db, tel, 30*time.Millisecond, 40*time.Millisecond,
		Target{Name: "primary", Store: primary}, Target{Name: "secondary", Store: secondary})))
	ok := func() float64 { return testutil.ToFloat64(tel.Metrics.Backup.Runs.WithLabelValues(telemetry.BackupOK)) }
	poll.True(t, 10*time.Second, "three backups", func() bool { return ok() >= 3 })
	// Flip the first byte of every shared file at the secondary.
	secondary.mu.Lock()
	for k, v := range secondary.objs {
		if len(k) > len(sharedPrefix) && k[:len(sharedPrefix)] == sharedPrefix {
			v[0] ^= 0xff
		}
	}
	secondary.mu.Unlock()
	failed := func(target string) float64 {
		return testutil.ToFloat64(tel.Metrics.Backup.VerifyFailed.WithLabelValues(target))
	}
	// A new run uploads afresh only what no manifest lists; corrupted shared files stay listed, so the verify
	// of the secondary keeps failing.
	poll.True(t, 10*time.Second, "a secondary verify failure", func() bool { return failed("secondary") >= 1 })
	if n := failed("primary"); n != 0 {
		t.Fatalf("verify_failed{primary} = %v; the primary is intact", n)
	}
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
}
