#ifndef ANKUSA_CRC32C_H
#define ANKUSA_CRC32C_H

#include <stddef.h>
#include <stdint.h>

// rocksdb::crc32c::Extend(unsigned int, char const*, unsigned long), mangled.
#define ANKUSA_CRC32C_SYMBOL "_ZN7rocksdb6crc32c6ExtendEjPKcm"

// What RocksDB's CRC32C calls run (ankusa_crc32c_state).
enum {
	ANKUSA_CRC32C_NOT_INTERPOSED = 0, // the library's own function: the executable does not export the symbol
	ANKUSA_CRC32C_HARDWARE = 1,       // SSE4.2's crc32 instruction
	ANKUSA_CRC32C_LIBRARY = 2,        // interposed, but the CPU lacks SSE4.2: handed on to the library's own
};

int ankusa_crc32c_state(void);

// ankusa_crc32c_extend is rocksdb::crc32c::Extend under its mangled name: the executable's definition, which the
// library's calls reach.
uint32_t ankusa_crc32c_extend(uint32_t crc, const char* buf, size_t n) __asm__(ANKUSA_CRC32C_SYMBOL);

// ankusa_crc32c_library is the library's own rocksdb::crc32c::Extend, for comparison.
uint32_t ankusa_crc32c_library(uint32_t crc, const char* buf, size_t n);

#endif
