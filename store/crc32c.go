package store

/*
#cgo LDFLAGS: -ldl
#include "crc32c.h"
*/
import "C"

import "unsafe"

// crc32cState names what RocksDB's CRC32C (every WAL record, every table block) runs on in this process:
// "hardware" (crc32c.c's SSE4.2 loop in place of the library's), "library" (interposed, on a CPU without
// SSE4.2) or "library, not interposed" (the executable does not export the symbol).
func crc32cState() string {
	switch C.ankusa_crc32c_state() {
	case C.ANKUSA_CRC32C_HARDWARE:
		return "hardware"
	case C.ANKUSA_CRC32C_LIBRARY:
		return "library"
	default:
		return "library, not interposed"
	}
}

// crc32cExtend is what RocksDB's callers of rocksdb::crc32c::Extend reach: crc extended over b.
func crc32cExtend(crc uint32, b []byte) uint32 {
	return uint32(C.ankusa_crc32c_extend(C.uint32_t(crc), (*C.char)(unsafe.Pointer(unsafe.SliceData(b))), C.size_t(len(b))))
}

// crc32cLibrary is the library's own rocksdb::crc32c::Extend.
func crc32cLibrary(crc uint32, b []byte) uint32 {
	return uint32(C.ankusa_crc32c_library(C.uint32_t(crc), (*C.char)(unsafe.Pointer(unsafe.SliceData(b))), C.size_t(len(b))))
}
