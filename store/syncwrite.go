package store

/*
#cgo LDFLAGS: -lrocksdb -lpthread
#include <stdlib.h>
#include "syncwrite.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"github.com/linxGnu/grocksdb"
)

// syncWriter makes the group commit's synced RocksDB write on a C thread of its own, the caller parked on an
// eventfd in Go's network poller meanwhile.
//
// Why: a cgo call keeps its goroutine's P (one of GOMAXPROCS) for as long as it runs, unless the runtime's
// monitor thread takes the P back; the synced write runs for the length of an fdatasync (hundreds of µs), about
// a thousand times a second under load, so the monitor kept polling every 20 µs and handed the P to another
// thread, and the writer's thread then parked for want of a P when its call returned: context switches and
// wake-ups that cost more CPU than the write on a virtual machine (docs/architecture.md has the figures).
//
// The thread may run at a higher priority than the process (store.commit_thread_nice): every ack waits for its
// writes, it sleeps through most of each one (the fdatasync), and woken it otherwise waits for a core behind
// whatever the process and the box run. At 5,000 hooks/s of 10 KiB on a 2-core box 1.5 cores busy, nice -10
// took the thread's wake-up from 127-156 µs to 86-98 µs on average and a group commit from 906-915 µs to
// 643-795 (docs/architecture.md has the run).
//
// One write at a time: the caller serialises (commitMu). The writer lives as long as the RocksDB handle.
type syncWriter struct {
	c    *C.ankusa_sync_writer
	done *os.File // the eventfd: readable once the write submitted last is done
	buf  [8]byte
	// broken is the error of a wait that failed; every later write returns it.
	broken error
	// tookNS is how long the last write ran in RocksDB on the thread, in ns (took): a field rather than a local,
	// which the call into C would move to the heap on every commit.
	tookNS C.int64_t
}

// newSyncWriter starts the writer's thread at nice value nice (0: the process's). The thread starts either way:
// niceErr is why it could not take nice (EACCES without CAP_SYS_NICE or an RLIMIT_NICE allowing the value),
// for the caller to report.
func newSyncWriter(nice int) (w *syncWriter, niceErr, err error) {
	var msg *C.char
	var errno C.int
	c := C.ankusa_sync_writer_new(C.int(nice), &errno, &msg)
	if c == nil {
		defer C.free(unsafe.Pointer(msg))
		return nil, nil, fmt.Errorf("cannot start the sync writer: %s", C.GoString(msg))
	}
	if errno != 0 {
		niceErr = fmt.Errorf("cannot set the commit thread's nice value to %d: %w", nice, syscall.Errno(errno))
	}
	// A non-blocking descriptor: os.NewFile puts it in the poller, so a Read parks the goroutine, not a thread.
	return &syncWriter{c: c, done: os.NewFile(uintptr(C.ankusa_sync_writer_fd(c)), "sync-writer")}, niceErr, nil
}

// tid is the thread's Linux thread id.
func (w *syncWriter) tid() int { return int(C.ankusa_sync_writer_tid(w.c)) }

// write writes wb with wo (a synced write) on the writer's thread and returns its error.
func (w *syncWriter) write(rdb *grocksdb.DB, wo *grocksdb.WriteOptions, wb *grocksdb.WriteBatch) error {
	if w.broken != nil {
		return w.broken
	}
	C.ankusa_sync_writer_submit(w.c, dbHandle(rdb), writeOptionsHandle(wo), writeBatchHandle(wb))
	if _, err := w.done.Read(w.buf[:]); err != nil {
		// Not seen: the descriptor is closed only after the thread ended, under the store's close lock, which
		// every write holds shared. Were it to happen, whether the write is done is unknown, so every later
		// write fails too, and the reopen that follows a failed write waits for the thread.
		w.broken = fmt.Errorf("the sync writer's eventfd failed: %w", err)
		return w.broken
	}
	runtime.KeepAlive(rdb)
	runtime.KeepAlive(wo)
	runtime.KeepAlive(wb)
	msg := C.ankusa_sync_writer_result(w.c, &w.tookNS)
	if msg != nil {
		defer C.free(unsafe.Pointer(msg))
		return errors.New(C.GoString(msg))
	}
	return nil
}

// took is how long the last write ran in RocksDB on the thread (the WAL append, its sync, the memtable insert),
// without the hand-offs to and from the thread.
func (w *syncWriter) took() time.Duration { return time.Duration(w.tookNS) }

// close stops the thread and closes the eventfd; no write may be in flight.
func (w *syncWriter) close() {
	C.ankusa_sync_writer_free(w.c)
	_ = w.done.Close()
}

// The C handles of grocksdb v1.7.15's DB, WriteOptions and WriteBatch, each the first field of its struct, which
// has no accessor (as optionsHandle in pacedelete.go). TestSyncWriterWritesThroughTheHandles writes and reads
// back through them, so a layout change fails there.
func dbHandle(d *grocksdb.DB) *C.rocksdb_t { return *(**C.rocksdb_t)(unsafe.Pointer(d)) }

func writeOptionsHandle(o *grocksdb.WriteOptions) *C.rocksdb_writeoptions_t {
	return *(**C.rocksdb_writeoptions_t)(unsafe.Pointer(o))
}

func writeBatchHandle(b *grocksdb.WriteBatch) *C.rocksdb_writebatch_t {
	return *(**C.rocksdb_writebatch_t)(unsafe.Pointer(b))
}
