// Package backup copies the store to object stores so that losing this host loses at most the hooks acked
// since the last backup, and restores the latest copy onto an empty data dir before the store opens.
//
// The invariants it owns:
//  1. A backup is visible only once whole: every file, then its manifest, then backup/LATEST naming it, are
//     written in that order, so a reader that follows LATEST finds every file the manifest lists.
//  2. Every manifest is signed (HMAC-SHA256 with backup.signing_key over its canonical bytes) and lists the size
//     and sha256 of every file; a restore or verify trusts nothing the signature and digests do not cover.
//  3. A restore never starts the store empty when a backup may exist: an unreadable location or a failed check
//     is a refusal (ErrRestoreFailed), and only "no backup anywhere" yields an empty store. The restored copy is
//     assembled beside the store dir, CURRENT last, and renamed into place; a RESTORE-IN-PROGRESS marker makes a
//     crash at any point restart the restore from scratch.
//  4. A runner never writes under a prefix whose LATEST belongs to another store (ErrForeignBackup), or names a
//     backup of this store that the runner did not write after it wrote one (ErrPrefixShared: a copy of the
//     store runs elsewhere): it refuses, and what is there stays as it was.
//  5. Purging keeps the backup.keep newest manifests and every shared file one of them lists; nothing LATEST
//     names is ever deleted.
//
// Layout under the store's key prefix: backup/sst/<name> (table and blob files, immutable, uploaded once and
// shared by the backups that list them), backup/<id>/<name> (MANIFEST, CURRENT, OPTIONS, WAL: private to one
// backup), backup/<id>/manifest.json, backup/LATEST. Ids are ULIDs, so they sort by creation time.
package backup
