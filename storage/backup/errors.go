package backup

import (
	"errors"
	"fmt"
)

var (
	// ErrForeignBackup matches every *ForeignError: LATEST names another store's backup.
	ErrForeignBackup = errors.New("backup: foreign_backup")
	// ErrPrefixShared is a LATEST of this store that this runner did not write: another node runs with the same
	// store (a restored copy while the original still runs) and backs up to the same place.
	ErrPrefixShared = errors.New("backup: prefix_shared")
	// ErrRestoreFailed matches every *RestoreError: the node must not start.
	ErrRestoreFailed = errors.New("store_restore_failed")
	// ErrNoBackup is a location that holds no LATEST.
	ErrNoBackup = errors.New("backup: no backup at this location")
	// ErrBadSignature is a manifest whose signature does not match backup.signing_key.
	ErrBadSignature = errors.New("backup: manifest signature does not match the signing key")
	// ErrBadManifest is a manifest that cannot be decoded or breaks the layout rules.
	ErrBadManifest = errors.New("backup: malformed manifest")
	// ErrFileMismatch is a backed-up file whose size or sha256 differs from its manifest entry.
	ErrFileMismatch = errors.New("backup: file does not match its manifest")
)

// ForeignError refuses a backup under a prefix whose LATEST belongs to another store.
type ForeignError struct {
	Target string // primary | secondary
	Theirs string // the store id LATEST's manifest names
	Ours   string
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("backup: foreign_backup: %s LATEST belongs to store %s, this store is %s; refusing to overwrite it",
		e.Target, e.Theirs, e.Ours)
}

// Is makes errors.Is(err, ErrForeignBackup) true.
func (e *ForeignError) Is(target error) bool { return target == ErrForeignBackup }

// RestoreError is a refusal to start: the store dir is empty, a backup may exist, and it could not be restored.
type RestoreError struct {
	Path string // the store dir
	Err  error  // why, per location tried
}

func (e *RestoreError) Error() string {
	return fmt.Sprintf("store_restore_failed: %s: %v", e.Path, e.Err)
}

func (e *RestoreError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrRestoreFailed) true.
func (e *RestoreError) Is(target error) bool { return target == ErrRestoreFailed }
