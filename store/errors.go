package store

import (
	"errors"
	"fmt"
)

var (
	// ErrOpenFailed matches every *OpenError: the store could not be opened (or was refused as damaged).
	ErrOpenFailed = errors.New("store: open failed")
	// ErrClosed is returned by every call made after Close.
	ErrClosed = errors.New("store: closed")
	// ErrNotFound is returned by point reads for an absent key.
	ErrNotFound = errors.New("store: not found")
	// ErrWriteFailed matches every *WriteError: a commit was refused and nothing of it was written.
	ErrWriteFailed = errors.New("store: write failed")
	// ErrCorruptValue is returned by the codecs for bytes they cannot decode.
	ErrCorruptValue = errors.New("store: corrupt value")
	// ErrBadKey is returned by the key parsers for a key of the wrong shape.
	ErrBadKey = errors.New("store: malformed key")
	// ErrWriterStopped answers a record whose batch was queued at the writer but never started because the
	// writer stopped or restarted; nothing of it was written.
	ErrWriterStopped = errors.New("store: writer stopped before the record's group started")
	// ErrNotClaimed answers an outcome (Complete, Reschedule, Bury) for a row that is not claimed: it was
	// settled already or put back as due by RecoverInflight. Nothing was written; the row is delivered again.
	ErrNotClaimed = errors.New("store: delivery row is not claimed")
	// ErrDedupeQuota refuses a record whose new dedupe key would pass dedupe.max_entries or
	// dedupe.max_entries_per_tenant (503 dedupe_quota); nothing of it was written.
	ErrDedupeQuota = errors.New("store: dedupe quota reached")
	// ErrQuarantineFull refuses a PutQuarantine whose entries would take the pen past quarantine.max_bytes
	// (503 quarantine_full); nothing of it was written and no held entry was evicted.
	ErrQuarantineFull = errors.New("store: quarantine pen full")
	// ErrIntakeUnavailable (wal.type dual) refuses a record the intake log did not confirm, or whose group met
	// an open intake breaker before either half was touched (503 intake_unavailable).
	ErrIntakeUnavailable = errors.New("store: intake log unavailable")
	// ErrIntakePending (wal.type dual) answers a retry whose original is held unconfirmed in the pending set
	// (503 intake_pending); nothing of it was written.
	ErrIntakePending = errors.New("store: original hook not yet confirmed in the intake log")
	// ErrRecovering (wal.type dual) refuses every record while boot recovery replays the intake log (503
	// recovering).
	ErrRecovering = errors.New("store: intake recovery in progress")
	// errOutcomeUnset answers a record its committer returned without an Outcome: a broken Committer, never a
	// 2xx for a record nobody said was written.
	errOutcomeUnset = errors.New("store: committer set no outcome for the record")
)

// OpenError is a refusal to open the store at Path. It matches ErrOpenFailed.
type OpenError struct {
	Path string
	Err  error
}

func (e *OpenError) Error() string {
	return fmt.Sprintf("store: cannot open %s: %v", e.Path, e.Err)
}

func (e *OpenError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrOpenFailed) true for every OpenError.
func (e *OpenError) Is(target error) bool { return target == ErrOpenFailed }

// WriteClass classifies a failed write so callers (telemetry, the reopen policy) can act on the kind of failure
// without looking at the message.
type WriteClass string

// The write failure classes.
const (
	ClassNoSpace    WriteClass = "no_space"
	ClassIOError    WriteClass = "io_error"
	ClassReadOnly   WriteClass = "read_only"
	ClassCorruption WriteClass = "corruption"
	ClassBusy       WriteClass = "busy"
	ClassOther      WriteClass = "other"
)

// WriteError is a failed commit. It matches ErrWriteFailed; nothing of the batch was written.
type WriteError struct {
	Class WriteClass
	Err   error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("store: cannot write batch (%s): %v", e.Class, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrWriteFailed) true for every WriteError.
func (e *WriteError) Is(target error) bool { return target == ErrWriteFailed }
