package backup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/test/fixture/s3fake"
)

// TestOnRealStoresSecondaryRestoresWhenS3IsDown runs the backup rules on the stores a node uses: an S3 service
// (in-process, real HTTP) as the primary and a LocalFS directory as the secondary (design: "a checkpoint of the
// store goes to an object store (and to a second one, backup.secondary, if configured)"). A byte flipped in a
// file of the directory fails its verify; with the S3 endpoint down the restore takes the secondary, and once
// the secondary is damaged too it refuses.
func TestOnRealStoresSecondaryRestoresWhenS3IsDown(t *testing.T) {
	ctx := context.Background()
	s3 := s3fake.Start(t)
	primary, err := blob.Open(ctx, s3.BlobStore("node-a/"))
	if err != nil {
		t.Fatal(err)
	}
	localRoot := t.TempDir()
	secondary, err := blob.Open(ctx, config.BlobStore{Type: config.BlobLocal, Root: localRoot})
	if err != nil {
		t.Fatal(err)
	}
	targets := []Target{{Name: "primary", Store: primary}, {Name: "secondary", Store: secondary}}

	db := openStore(t, filepath.Join(t.TempDir(), "store"))
	ids := commit(t, db, 60)
	r := newRunner(t, targets...)
	for range 2 {
		res, err := r.Run(ctx, db)
		if err != nil || len(res.Failed) != 0 {
			t.Fatalf("run: %v %+v", err, res)
		}
	}
	for _, tg := range targets {
		if _, err := Verify(ctx, tg.Store, testKey); err != nil {
			t.Fatalf("verify %s: %v", tg.Name, err)
		}
	}
	if n := s3.Objects(t, "node-a/backup/"); n == 0 {
		t.Fatal("nothing under node-a/backup/ in the bucket")
	}

	s3.Close()
	dir := filepath.Join(t.TempDir(), "store")
	m, err := Restore(ctx, restoreOpts(dir, targets...))
	if err != nil || m == nil {
		t.Fatalf("Restore with S3 down = %v, %v; want the secondary's backup", m, err)
	}
	got := hookIDs(t, dir)
	for _, id := range ids {
		if !got[id] {
			t.Fatalf("hook %x missing after the secondary restore", id)
		}
	}

	// Flip one byte of a shared file in the directory.
	ssts, err := filepath.Glob(filepath.Join(localRoot, "backup", "sst", "*.sst"))
	if err != nil || len(ssts) == 0 {
		t.Fatalf("no shared file under %s: %v", localRoot, err)
	}
	b, err := os.ReadFile(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0x10
	if err := os.WriteFile(ssts[0], b, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ctx, secondary, testKey); !errors.Is(err, ErrFileMismatch) {
		t.Fatalf("verify of the damaged directory = %v, want ErrFileMismatch", err)
	}
	_, err = Restore(ctx, restoreOpts(filepath.Join(t.TempDir(), "store"), targets...))
	if !errors.Is(err, ErrRestoreFailed) || !errors.Is(err, ErrFileMismatch) {
		t.Fatalf("Restore with S3 down and the secondary damaged = %v, want store_restore_failed", err)
	}
	t.Logf("refusal: %v", err)
}
