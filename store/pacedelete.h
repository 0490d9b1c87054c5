// The one RocksDB option the store needs that its C API (7.8) does not expose: a file manager that
// deletes obsolete files gradually. pacedelete.cc implements it against the C++ API.
#ifndef ANKUSA_PACEDELETE_H
#define ANKUSA_PACEDELETE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rocksdb_options_t rocksdb_options_t;

// ankusa_pace_deletes gives opts a file manager that deletes obsolete WAL and table files at most
// bytes_per_sec, truncating a larger file chunk bytes at a time before unlinking it. On failure it
// returns a malloc'd message for the caller to free; on success NULL.
char* ankusa_pace_deletes(rocksdb_options_t* opts, int64_t bytes_per_sec, uint64_t chunk);

// ankusa_paced_delete_rate reads the rate back (0 when opts has no file manager).
int64_t ankusa_paced_delete_rate(rocksdb_options_t* opts);

// ankusa_paced_delete_trash is how many bytes of obsolete files wait for their deletion (0 without a file
// manager). The database opened with opts shares its file manager.
uint64_t ankusa_paced_delete_trash(rocksdb_options_t* opts);

#ifdef __cplusplus
}
#endif

#endif
