package instance_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/storage"
	"github.com/ankusa-go/ankusa/storage/backup"
	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// withBackup turns backups on to a local directory shared by the instances of a test, with an interval that
// never comes: only the final backup of a clean stop is taken.
func withBackup(root string) func(*config.Config) {
	return func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge"}
		cfg.Sources = map[string]config.Source{"sample": fixture.LogSource("default", 1)}
		cfg.Backup.Enabled = true
		cfg.Backup.IntervalMS = 3_600_000
		cfg.Backup.SigningKey = "instance-test-signing-key"
		cfg.Backup.Store = &config.BlobStore{Type: config.BlobLocal, Root: root}
	}
}

// TestCleanStopBacksUpAndAnEmptyDataDirRestores proves the tree's share of backups (design: "a clean stop
// takes one last checkpoint"; "A node that starts on an empty data_dir restores the latest one before it opens
// the store"): hooks acked by an instance whose backup interval never came are in the store of a second
// instance started on an empty data dir with the same backup location.
func TestCleanStopBacksUpAndAnEmptyDataDirRestores(t *testing.T) {
	root := t.TempDir()
	a := start(t, "bk", withBackup(root))
	var ids []string
	for i := range 20 {
		resp, err := http.Post("http://"+a.IngestAddr()+"/webhooks/sample", "application/json", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		var buf [256]byte
		n, _ := resp.Body.Read(buf[:])
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("post %d: %d %s", i, resp.StatusCode, buf[:n])
		}
		_, rest, _ := strings.Cut(string(buf[:n]), `"id":"`)
		id, _, _ := strings.Cut(rest, `"`)
		ids = append(ids, id)
	}
	storeID := a.Store().StoreID()
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}

	b := start(t, "bk", withBackup(root))
	if got := b.Store().StoreID(); got != storeID {
		t.Fatalf("restored store id %s, want %s", got, storeID)
	}
	have, err := b.Store().HookIDs()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for raw := range have {
		seen[fmt.Sprintf("%x", raw)] = true
	}
	for _, id := range ids {
		if !seen[strings.ReplaceAll(id, "-", "")] {
			t.Fatalf("hook %s acked before the clean stop is not in the restored store", id)
		}
	}
}

// TestBootRefusesAnUnreadableBackupLocation proves the refusal at boot (design: "or refuses to start when the
// backup location can't be read"): with the S3 endpoint down and an empty data dir, Start fails with
// store_restore_failed naming the store dir, and no store was created.
func TestBootRefusesAnUnreadableBackupLocation(t *testing.T) {
	cfg := config.Default()
	cfg.Instance = "refuse"
	cfg.Node.DataDir = t.TempDir()
	cfg.HTTP.IP, cfg.HTTP.Port, cfg.Admin.Port = "127.0.0.1", 0, 0
	withBackup("")(cfg)
	cfg.Backup.Store = &config.BlobStore{Type: config.BlobS3, S3: config.S3{Bucket: "b", Region: "us-east-1",
		Endpoint: "http://127.0.0.1:" + strconv.Itoa(closedPort(t)), AccessKeyID: "k", SecretAccessKey: "s"}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	inst, err := instance.New(cfg, instance.Options{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)})
	if err != nil {
		t.Fatal(err)
	}
	err = inst.Start()
	if err == nil {
		_ = inst.Stop()
		t.Fatal("the instance started with its backup location unreadable")
	}
	if !errors.Is(err, backup.ErrRestoreFailed) || !strings.Contains(err.Error(), cfg.StoreDir()) {
		t.Fatalf("Start = %v, want store_restore_failed naming %s", err, cfg.StoreDir())
	}
	if held, _ := store.HoldsDatabase(cfg.StoreDir()); held {
		t.Fatal("a store was created despite the refusal")
	}
	t.Logf("refusal: %v", err)
}

// start is fixture.InstanceWith on a fresh data dir.
func start(t *testing.T, name string, mutate func(*config.Config)) *instance.Instance {
	t.Helper()
	return fixture.Instance(t, name, mutate, nil)
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return port
}

// TestRequireFreshTurnsReadyOffWhileBackupsFail proves backup.require_fresh (docs/configuration.md: "/ready
// answers 503 while the last successful backup is older than 3 intervals"): backups that cannot be written
// take the node out of rotation, and the next backup that succeeds brings it back.
func TestRequireFreshTurnsReadyOffWhileBackupsFail(t *testing.T) {
	root := t.TempDir()
	inst := start(t, "fresh", func(cfg *config.Config) {
		withBackup(root)(cfg)
		cfg.Backup.IntervalMS = 100
		cfg.Backup.RequireFresh = true
	})
	ready := func() (int, string) {
		resp, err := http.Get("http://" + inst.AdminAddr() + "/ready")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	poll.True(t, 10*time.Second, "a backup taken", func() bool {
		return testutil.ToFloat64(inst.Telemetry().Metrics.Backup.Runs.WithLabelValues("ok")) > 0
	})
	poll.True(t, 10*time.Second, "ready with a fresh backup", func() bool { c, _ := ready(); return c == http.StatusOK })

	// LATEST becomes a non-empty directory: no run can read it or write it, so every run fails.
	latest := filepath.Join(root, "backup", "LATEST")
	if err := os.Remove(latest); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(latest, "in-the-way"), 0o750); err != nil {
		t.Fatal(err)
	}
	poll.True(t, 10*time.Second, "503 backup_stale", func() bool {
		c, body := ready()
		return c == http.StatusServiceUnavailable && strings.Contains(body, "backup_stale")
	})
	poll.True(t, 10*time.Second, "ankusa_backup_failures_total counting", func() bool {
		return testutil.ToFloat64(inst.Telemetry().Metrics.Backup.Failures) > 0
	})

	if err := os.RemoveAll(latest); err != nil {
		t.Fatal(err)
	}
	// The runner backs off up to a few seconds after failures before it tries again.
	poll.True(t, 30*time.Second, "ready again after a backup succeeded", func() bool { c, _ := ready(); return c == http.StatusOK })
}

// TestRestoreSkipsSeqsArchivedAfterTheBackup proves the restore reconcile (inventory E.5: "Restore reconcile:
// m:next_seq moved past the highest archived seq"): a segment the lost host archived after its last backup
// keeps its seqs; the restored store commits above them.
func TestRestoreSkipsSeqsArchivedAfterTheBackup(t *testing.T) {
	backups, archive := t.TempDir(), t.TempDir()
	cfg := func(c *config.Config) {
		withBackup(backups)(c)
		c.Node.Roles = []string{"edge", "storage"}
		c.Node.ID = "node-a"
		c.Storage.Root = archive
	}
	a := start(t, "rc", cfg)
	for i := range 5 {
		resp, err := http.Post("http://"+a.IngestAddr()+"/webhooks/sample", "application/json", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("post %d: %d", i, resp.StatusCode)
		}
	}
	next := a.Store().NextSeq()
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	// What the lost host archived after its last backup: a segment above the backup's seqs.
	seg, _ := storage.SegmentKeys("node-a", storage.Day(time.Now().UnixMilli()), next, next+99)
	bs, err := blob.NewLocalFS(archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := bs.Put(context.Background(), seg, strings.NewReader("segment"), 7); err != nil {
		t.Fatal(err)
	}

	b := start(t, "rc", cfg)
	if got := b.Store().NextSeq(); got != next+100 {
		t.Fatalf("restored next seq %d, want %d (past the archived segment %s)", got, next+100, seg)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(b.Config().StoreDir()), backup.MarkerName)); !os.IsNotExist(err) {
		t.Fatalf("restore marker left after a reconciled restore: %v", err)
	}
}

// TestBackupActorCrashesPauseBackupsOnly proves the failure domain (DESIGN.md section 3: backup is isolated, "a
// crash costs: backups pause"): the backup runner killed again and again while it works comes back and takes
// whole backups, and ingest answers 201 throughout.
func TestBackupActorCrashesPauseBackupsOnly(t *testing.T) {
	root := t.TempDir()
	inst := start(t, "kb", func(c *config.Config) {
		withBackup(root)(c)
		c.Debug.Chaos = true
		c.Backup.IntervalMS = 20
		c.Backup.VerifyIntervalMS = 30
	})
	ok := func() float64 { return testutil.ToFloat64(inst.Telemetry().Metrics.Backup.Runs.WithLabelValues("ok")) }
	poll.True(t, 10*time.Second, "a first backup", func() bool { return ok() > 0 })
	for i := range 5 {
		inst.Kill().Arm("kb/backup")
		poll.True(t, 10*time.Second, "the kill fired", func() bool { return !inst.Kill().Armed("kb/backup") })
		resp, err := http.Post("http://"+inst.IngestAddr()+"/webhooks/sample", "application/json", strings.NewReader(fmt.Sprintf(`{"k":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("post after backup kill %d: %d", i, resp.StatusCode)
		}
	}
	after := ok()
	poll.True(t, 20*time.Second, "backups after the kills", func() bool { return ok() >= after+2 })
	bs, err := blob.NewLocalFS(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Verify(context.Background(), bs, []byte("instance-test-signing-key")); err != nil {
		t.Fatalf("latest backup after the kills: %v", err)
	}
	if n := testutil.ToFloat64(inst.Telemetry().Metrics.Backup.VerifyFailed.WithLabelValues("primary")); n != 0 {
		t.Fatalf("verify_failed{primary} = %v after crashes mid-run", n)
	}
}

// TestRestoreCataloguesSegmentsArchivedAfterTheBackup proves the restore's re-catalogue (inventory E.5:
// "uncatalogued segments catalogued from their index"; seed: hooks acked after the last backup are lost with
// the box, "their archive copies, if the compactor wrote any, are catalogued again"): node-a archives hooks,
// its backup is taken, it archives more and its host is lost without another backup; the node restored on an
// empty data dir fetches every one of them by id, byte for byte.
func TestRestoreCataloguesSegmentsArchivedAfterTheBackup(t *testing.T) {
	backups, archive, dataA := t.TempDir(), t.TempDir(), t.TempDir()
	cfg := func(backupOn bool, dataDir string) func(*config.Config) {
		return func(c *config.Config) {
			withBackup(backups)(c)
			c.Backup.Enabled = backupOn
			c.Node.Roles = []string{"edge", "storage"}
			c.Node.ID = "node-a"
			c.Node.DataDir = dataDir
			c.Storage.Root = archive
			c.Storage.RollMS, c.Storage.IntervalMS = 1, 20
		}
	}
	bodies := map[[16]byte]string{}
	postArchived := func(inst *instance.Instance, from, to int) {
		t.Helper()
		for n := from; n < to; n++ {
			body := fmt.Sprintf(`{"n":%d}`, n)
			resp, err := http.Post("http://"+inst.IngestAddr()+"/webhooks/sample", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			_, rest, _ := strings.Cut(string(raw), `"id":"`)
			id, _, _ := strings.Cut(rest, `"`)
			rid, ok := edge.ParseID(id)
			if resp.StatusCode != http.StatusCreated || !ok {
				t.Fatalf("post %d: %d %s", n, resp.StatusCode, raw)
			}
			bodies[rid] = body
		}
		poll.True(t, 10*time.Second, "every hook archived", func() bool { return inst.Store().Counts().ArchivePending == 0 })
	}
	a := start(t, "rcat", cfg(true, dataA))
	postArchived(a, 0, 5)
	if err := a.Stop(); err != nil { // the last backup: it holds the first five and their segment
		t.Fatal(err)
	}
	a = start(t, "rcat", cfg(false, dataA)) // the same host goes on archiving, and is lost before a backup
	postArchived(a, 5, 12)
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}

	b := start(t, "rcat", cfg(true, t.TempDir()))
	for id, want := range bodies {
		h, err := storage.Fetch(context.Background(), b.Store(), b.Blob(), id)
		if err != nil {
			t.Fatalf("hook %x on the restored node: %v", id, err)
		}
		if string(h.Body) != want {
			t.Fatalf("hook %x: body %q, want %q", id, h.Body, want)
		}
	}
	t.Logf("%d hooks fetchable on the restored node, %d of them archived after its backup", len(bodies), 7)
}
