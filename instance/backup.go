package instance

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/storage"
	"github.com/ankusa-go/ankusa/storage/backup"
	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/store"
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
	if m == nil {
		return nil
	}
	i.tel.BackupKnown(time.UnixMilli(m.CreatedAtMS))
	if err := i.reconcileRestored(ctx, m); err != nil {
		return &backup.RestoreError{Path: cfg.StoreDir(), Err: err}
	}
	// The store is in place and reconciled, and nothing has committed to it: from here a crash must not
	// restore again.
	return backup.Restored(cfg.StoreDir())
}

// reconcileRestored reconciles a restored store with the archive (inventory E.5: "Restore reconcile: m:next_seq
// moved past the highest archived seq; uncatalogued segments catalogued from their index"). The lost host may
// have archived hooks after the backup: their segments are catalogued again, so Fetch finds the hooks whose only
// copy is there now (and the restored obligations of hooks already in them are cleared), and m:next_seq moves
// past their seqs, since a restored store that reused them would write segments over theirs. The window starts
// a day before the backup or at the oldest hook still waiting for its segment, whichever is older, since a
// segment is filed under its oldest hook's day.
func (i *Instance) reconcileRestored(ctx context.Context, m *backup.Manifest) error {
	cfg := i.cfg
	if !cfg.HasRole(config.RoleStorage) || !storage.ValidNode(cfg.NodeID()) {
		return nil
	}
	bs, err := blob.Open(ctx, cfg.StorageBlobStore())
	if err != nil {
		return fmt.Errorf("archive reconcile: cannot open the storage blob store: %w", err)
	}
	db, err := store.Open(store.Options{Dir: cfg.StoreDir(), Log: i.log})
	if err != nil {
		return err
	}
	before := db.NextSeq()
	from := m.CreatedAtMS - 24*time.Hour.Milliseconds()
	obs, _, err := db.Obligations(0, 1<<40, 0, 1, nil)
	if err == nil && len(obs) > 0 {
		if _, at, herr := store.HookHead(obs[0].Value); herr == nil {
			from = min(from, at)
		}
	}
	var st storage.RecatalogueStats
	if err == nil {
		st, err = storage.Recatalogue(ctx, db, bs, cfg.NodeID(), from, time.Now().UnixMilli(), i.log)
	}
	if err == nil && st.Catalogued > 0 {
		// The catalogue rows are synced, the clearing of the obligations they cover is not (as after a
		// compaction): one synced write carries it to disk before the restore marker goes.
		err = db.Probe()
	}
	if err == nil {
		err = db.AdvanceNextSeq(st.HighestSeq + 1)
	}
	after := db.NextSeq()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("archive reconcile: %w", err)
	}
	if st.Catalogued > 0 || st.Unreadable > 0 {
		i.log.Warn().Int("segments", st.Catalogued).Int("hooks", st.Hooks).Int("unreadable", st.Unreadable).
			Str("archive", bs.String()).
			Msg("restored store: segments the lost host archived after the backup catalogued again; their hooks can be fetched, not delivered")
	}
	if after != before {
		i.log.Warn().Uint64("next_seq", before).Uint64("advanced_to", after).Str("archive", bs.String()).
			Msg("restored store: seqs the lost host archived after the backup are skipped, never reused")
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
