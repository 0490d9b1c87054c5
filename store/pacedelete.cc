#include "pacedelete.h"

#include <cstring>
#include <limits>

#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <rocksdb/sst_file_manager.h>
#include <rocksdb/status.h>

// The C API's handle, as RocksDB's db/c.cc defines it: an Options held by value.
struct rocksdb_options_t {
	rocksdb::Options rep;
};

extern "C" char* ankusa_pace_deletes(rocksdb_options_t* opts, int64_t bytes_per_sec, uint64_t chunk) {
	rocksdb::Status st;
	// The trash may be any multiple of the tables: the WAL files are most of what is deleted and the tables of
	// a drained store are small, so the default ratio (0.25) would delete every WAL file at once. The rate
	// bounds the trash instead.
	rocksdb::SstFileManager* m = rocksdb::NewSstFileManager(rocksdb::Env::Default(), nullptr, "", bytes_per_sec, true,
	                                                        &st, std::numeric_limits<double>::max(), chunk);
	if (!st.ok()) {
		delete m;
		return strdup(st.ToString().c_str());
	}
	opts->rep.sst_file_manager.reset(m);
	return nullptr;
}

extern "C" int64_t ankusa_paced_delete_rate(rocksdb_options_t* opts) {
	if (!opts->rep.sst_file_manager) {
		return 0;
	}
	return opts->rep.sst_file_manager->GetDeleteRateBytesPerSecond();
}

extern "C" uint64_t ankusa_paced_delete_trash(rocksdb_options_t* opts) {
	if (!opts->rep.sst_file_manager) {
		return 0;
	}
	return opts->rep.sst_file_manager->GetTotalTrashSize();
}
