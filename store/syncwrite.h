// A thread of its own for the store's synced group commit (syncwrite.go says why).
#ifndef ANKUSA_SYNCWRITE_H
#define ANKUSA_SYNCWRITE_H

#include <rocksdb/c.h>
#include <stdint.h>

typedef struct ankusa_sync_writer ankusa_sync_writer;

// ankusa_sync_writer_new starts the thread and, when nice is not 0, has the thread set its own nice value to it
// before it returns: *nice_errno is then 0, or the errno of the refusal (EACCES for a value below the process's
// without CAP_SYS_NICE or an RLIMIT_NICE allowing it), and the thread keeps the process's priority. On failure
// it returns NULL and a malloc'd message in *errptr.
ankusa_sync_writer* ankusa_sync_writer_new(int nice, int* nice_errno, char** errptr);

// ankusa_sync_writer_tid is the thread's id (a Linux tid: /proc/self/task/<tid>).
int ankusa_sync_writer_tid(ankusa_sync_writer* w);

// ankusa_sync_writer_fd is the eventfd (non-blocking) the thread adds 1 to after each write. The caller owns it
// and closes it after ankusa_sync_writer_free.
int ankusa_sync_writer_fd(ankusa_sync_writer* w);

// ankusa_sync_writer_submit hands the thread one write and returns at once. One write at a time: the caller
// waits for the eventfd and takes the result before it submits the next.
void ankusa_sync_writer_submit(ankusa_sync_writer* w, rocksdb_t* db, rocksdb_writeoptions_t* wo,
                               rocksdb_writebatch_t* wb);

// ankusa_sync_writer_result takes the finished write's error (a malloc'd message for the caller to free), or
// NULL when it succeeded, and sets *took_ns to how long the write ran in RocksDB on the thread.
char* ankusa_sync_writer_result(ankusa_sync_writer* w, int64_t* took_ns);

// ankusa_sync_writer_free stops the thread, waits for it and frees w; no write may be in flight.
void ankusa_sync_writer_free(ankusa_sync_writer* w);

#endif
