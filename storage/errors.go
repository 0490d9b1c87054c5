package storage

import "errors"

var (
	// ErrNotFound answers a fetch of a hook that no visible catalogued segment holds (never archived, not yet
	// compacted, deleted by retention, or older than storage.catalogue_retention_days).
	ErrNotFound = errors.New("storage: hook not archived")
	// ErrCorrupt is matched by the error of a segment, index or frame whose bytes fail their checks (magic,
	// version, lengths, CRC, digest).
	ErrCorrupt = errors.New("storage: corrupt archive object")
)

// ErrGone answers a fetch of an archived hook whose tenant was erased: its bytes stay in their multi-tenant
// segment until the bucket's lifecycle expires it, but nothing serves them (410 where served).
var ErrGone = errors.New("storage: the hook's tenant was erased")
