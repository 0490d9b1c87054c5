package main

/*
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

// ankusa_arena_max is the arena limit this binary set, or 0 when the environment chose.
static int ankusa_arena_max;

// glibc gives every thread that meets a locked arena a new one, up to eight per core;
// RocksDB's flush and compaction threads and the Go threads calling into it each end up
// with their own, and memory freed in one arena is not reused by another, so RSS keeps
// creeping up outside the Go heap and RocksDB's accounting long after the block cache
// and the memtables are full. Two arenas hold it flat. A constructor runs before the Go
// runtime or RocksDB start a thread, so no arena beyond the limit exists yet;
// MALLOC_ARENA_MAX (or glibc.malloc.arena_max in GLIBC_TUNABLES) set by the operator wins.
__attribute__((constructor)) static void ankusa_limit_arenas(void) {
	const char *tunables = getenv("GLIBC_TUNABLES");
	if (getenv("MALLOC_ARENA_MAX") != NULL || (tunables != NULL && strstr(tunables, "glibc.malloc.arena_max") != NULL)) {
		return;
	}
	if (mallopt(M_ARENA_MAX, 2) == 1) {
		ankusa_arena_max = 2;
	}
}

static int ankusa_get_arena_max(void) { return ankusa_arena_max; }
*/
import "C"

import "time"

// mallocTrimEvery is how often serve hands the allocator's free pages back to the OS.
const mallocTrimEvery = time.Minute

// mallocTrim returns the free memory of every malloc arena to the OS (malloc_trim(0)):
// glibc gives back only the free top of a heap, so memory RocksDB freed below a chunk
// still in use (a compaction's buffers, read blocks evicted from the cache) would stay
// resident for good.
func mallocTrim() { C.malloc_trim(0) }

// mallocArenaMax is the glibc arena limit the binary set at start (2), or 0 when
// MALLOC_ARENA_MAX or GLIBC_TUNABLES chose it.
func mallocArenaMax() int { return int(C.ankusa_get_arena_max()) }
