package instance

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/storage/backup"
	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/supervision"
)

// restoreTimeout bounds a restore at boot: a backup location that answers too slowly fails the boot with
// store_restore_failed instead of hanging it.
const restoreTimeout = 30 * time.Minute

// backupTargets opens the backup locations: backup.store (else the storage blob store), then backup.secondary.
func backupTargets(ctx context.Context, cfg *config.Config) ([]backup.Target, error) {
	primary, err := blob.Open(ctx, cfg.BackupBlobStore())
	if err != nil {
		return nil, fmt.Errorf("backup.store: %w", err)
	}
	ts := []backup.Target{{Name: "primary", Store: primary}}
	if cfg.Backup.Secondary != nil {
		secondary, err := blob.Open(ctx, *cfg.Backup.Secondary)
		if err != nil {
			return nil, fmt.Errorf("backup.secondary: %w", err)
		}
		ts = append(ts, backup.Target{Name: "secondary", Store: secondary})
	}
	return ts, nil
}

// prepareBackup opens the backup locations and, when the store dir holds no database, restores the latest
// backup into it (design: "A node that starts on an empty data_dir restores the latest one before it opens the
// store — or refuses to start"). It runs before the tree starts, so a long download is not a child's start
// timing out, and no child can open the store before the restore ends.
func (i *Instance) prepareBackup() error {
	cfg := i.cfg
	if !cfg.Backup.Enabled {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), restoreTimeout)
	defer cancel()
	ts, err := backupTargets(ctx, cfg)
	if err != nil {
		return err
	}
	i.backupTargets = ts
	i.tel.BackupEnabled()
	if cfg.Backup.RequireFresh {
		// Three intervals: one backup may fail or run long without taking the node out of rotation.
		limit := 3 * time.Duration(cfg.Backup.IntervalMS) * time.Millisecond
		i.health.RequireFreshBackup(func(now time.Time) bool { return i.tel.BackupAge(now) <= limit })
	}
	if cfg.BackupBlobStore().Type == config.BlobLocal {
		i.log.Warn().Str("location", ts[0].Store.String()).
			Msg("backup.store is a directory on this host: it does not survive losing this host")
	}
	m, err := backup.Restore(ctx, backup.RestoreOptions{Targets: ts, SigningKey: []byte(cfg.Backup.SigningKey),
		StoreDir: cfg.StoreDir(), Log: i.log})
	if err != nil {
		return err
	}
	if m != nil {
		i.tel.BackupKnown(time.UnixMilli(m.CreatedAtMS))
	}
	return nil
}

// backupChild is the backup runner: after the store in the tree, in its own failure domain (a failing object
// store never touches ingest), so the tree stops it after ingest and dispatch and before the store, and its
// final backup holds every hook acked before the stop.
func (i *Instance) backupChild() supervision.ChildSpec {
	cfg := i.cfg
	return supervision.ChildSpec{Name: "backup", Domain: "backup", Isolated: true,
		Props: i.withKill(backup.NewActorProps(backup.ActorOptions{
			Runner: backup.Options{Targets: i.backupTargets, SigningKey: []byte(cfg.Backup.SigningKey),
				Keep: cfg.Backup.Keep, Writer: cfg.NodeID(), Log: i.log,
				WorkDir: filepath.Join(cfg.Node.DataDir, cfg.Instance, "backup-work")},
			Interval:       time.Duration(cfg.Backup.IntervalMS) * time.Millisecond,
			VerifyInterval: time.Duration(cfg.Backup.VerifyIntervalMS) * time.Millisecond,
			DB:             i.db.Load,
			Tel:            i.tel,
		}))}
}
