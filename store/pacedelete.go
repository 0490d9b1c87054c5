package store

/*
#cgo CXXFLAGS: -std=c++17 -O2
#cgo LDFLAGS: -lrocksdb
#include <stdlib.h>
#include "pacedelete.h"
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/linxGnu/grocksdb"
)

// deleteChunkBytes is how much of an obsolete file one step of a paced deletion frees: on a file system
// mounted with online discard, the journal commit that frees a file's blocks trims them on the device first,
// and every synced write waits for that commit. A WAL file of 35 MiB unlinked at once held the acks' fdatasync
// for 13-25 ms here, three in a row after a flush; 4 MiB steps held it under 6 ms each, but at 5,000 hooks/s
// of 10 KiB (a WAL file freed every 0.7 s) they still made the ack tail: p99 60-156 ms over three 15 s runs
// against 13-27 ms in 1 MiB steps, while 256 KiB steps (a journal commit every 1 ms) gave 35-264 ms.
const deleteChunkBytes = 1 << 20

// optionsHandle is the C handle of o. grocksdb v1.7.15 keeps it as the first field of Options and has no
// accessor; TestPacedDeletesReachRocksDB reads the rate back through it, so a layout change fails there.
func optionsHandle(o *grocksdb.Options) *C.rocksdb_options_t {
	return *(**C.rocksdb_options_t)(unsafe.Pointer(o))
}

// paceDeletes makes RocksDB delete obsolete WAL and table files at most bytesPerSec, in deleteChunkBytes
// steps, instead of unlinking each at once.
func paceDeletes(o *grocksdb.Options, bytesPerSec int64) error {
	if msg := C.ankusa_pace_deletes(optionsHandle(o), C.int64_t(bytesPerSec), C.uint64_t(deleteChunkBytes)); msg != nil {
		defer C.free(unsafe.Pointer(msg))
		return errors.New("cannot create the file manager: " + C.GoString(msg))
	}
	return nil
}

// pacedDeleteRate is the deletion rate o's file manager has (0: none).
func pacedDeleteRate(o *grocksdb.Options) int64 {
	return int64(C.ankusa_paced_delete_rate(optionsHandle(o)))
}

// TrashBytes is how many bytes of obsolete WAL and table files wait for their paced deletion
// (store.delete_mb_per_s); 0 when deletions are not paced, and after Close. A figure that keeps growing means
// the rate is below the rate the store writes at.
func (db *DB) TrashBytes() uint64 {
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed || db.deleteRate <= 0 || db.opts == nil {
		return 0
	}
	return uint64(C.ankusa_paced_delete_trash(optionsHandle(db.opts)))
}
