// The CRC32C RocksDB computes over every WAL record and table block, with the CPU's crc32 instruction.
//
// Debian's librocksdb is a portable build: its rocksdb::crc32c::Extend is a table-driven loop (about 1.3 GB/s
// on the machines this was measured on), and every hook's body passes through it once on the commit thread,
// inside the synced write every ack waits for. The library calls Extend through its PLT, so a definition of the
// same symbol in the executable takes its place for every caller in the process (ELF interposition): this one
// uses SSE4.2's crc32 (about 9 GB/s), and hands the call to the library's own function on a CPU without it.
// The function is the same (CRC-32C, Castagnoli, the caller's running value in and out without a mask), so
// files written by either read back with the other; store/crc32c_test.go checks it against the library's and Go's.

#include "crc32c.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint32_t (*extend_fn)(uint32_t crc, const char* buf, size_t n);

#if defined(__x86_64__)

#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t extend_sse42(uint32_t crc, const char* buf, size_t n) {
	uint64_t l = crc ^ 0xffffffffu;
	// Byte steps up to an 8-byte boundary, then 8 bytes a step, then the tail.
	while (n > 0 && ((uintptr_t)buf & 7) != 0) {
		l = _mm_crc32_u8((uint32_t)l, (uint8_t)*buf++);
		n--;
	}
	while (n >= 8) {
		uint64_t v;
		memcpy(&v, buf, 8);
		l = _mm_crc32_u64(l, v);
		buf += 8;
		n -= 8;
	}
	while (n > 0) {
		l = _mm_crc32_u8((uint32_t)l, (uint8_t)*buf++);
		n--;
	}
	return (uint32_t)l ^ 0xffffffffu;
}

// extend_bitwise is the last resort, for a CPU without SSE4.2 where the library's own function cannot be found
// (it always can while the library is linked; the fallback keeps the symbol total).
static uint32_t extend_bitwise(uint32_t crc, const char* buf, size_t n) {
	uint32_t l = crc ^ 0xffffffffu;
	while (n-- > 0) {
		l ^= (uint8_t)*buf++;
		for (int k = 0; k < 8; k++) {
			l = (l >> 1) ^ (0x82f63b78u & (0u - (l & 1u)));
		}
	}
	return l ^ 0xffffffffu;
}

static extend_fn library_extend(void) {
	static extend_fn lib;
	extend_fn f = __atomic_load_n(&lib, __ATOMIC_ACQUIRE);
	if (f == NULL) {
		f = (extend_fn)dlsym(RTLD_NEXT, ANKUSA_CRC32C_SYMBOL);
		if (f == NULL) {
			f = extend_bitwise;
		}
		__atomic_store_n(&lib, f, __ATOMIC_RELEASE);
	}
	return f;
}

// chosen is resolved on the first call rather than in a constructor: the library's own static initialisers run
// before the executable's, and one of them may checksum something.
static extend_fn chosen(void) {
	static extend_fn fn;
	extend_fn f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
	if (f == NULL) {
		__builtin_cpu_init();
		f = __builtin_cpu_supports("sse4.2") ? extend_sse42 : library_extend();
		__atomic_store_n(&fn, f, __ATOMIC_RELEASE);
	}
	return f;
}

uint32_t ankusa_crc32c_extend(uint32_t crc, const char* buf, size_t n) { return chosen()(crc, buf, n); }

uint32_t ankusa_crc32c_library(uint32_t crc, const char* buf, size_t n) { return library_extend()(crc, buf, n); }

int ankusa_crc32c_state(void) {
	// What RocksDB's callers reach: the first definition of the symbol in the process's global scope.
	void* resolved = dlsym(RTLD_DEFAULT, ANKUSA_CRC32C_SYMBOL);
	if (resolved != (void*)ankusa_crc32c_extend) {
		return ANKUSA_CRC32C_NOT_INTERPOSED;
	}
	return chosen() == extend_sse42 ? ANKUSA_CRC32C_HARDWARE : ANKUSA_CRC32C_LIBRARY;
}

#else // Elsewhere the symbol is left to the library (ankusa_crc32c_extend, declared under its name, is its own).

uint32_t ankusa_crc32c_library(uint32_t crc, const char* buf, size_t n) { return ankusa_crc32c_extend(crc, buf, n); }

int ankusa_crc32c_state(void) { return ANKUSA_CRC32C_NOT_INTERPOSED; }

#endif
