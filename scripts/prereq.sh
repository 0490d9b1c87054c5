#!/usr/bin/env bash
# Installs what building Ankusa needs and is not a Go module: the RocksDB C headers and
# library (Debian's librocksdb-dev, 7.8.x, which grocksdb v1.7.15 is pinned against).
# `make` calls it before every target that compiles; .ci/run calls it too. Idempotent:
# when the headers are present it prints nothing and exits at once.
set -euo pipefail

have_rocksdb() {
	if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists rocksdb 2>/dev/null; then
		return 0
	fi
	local inc
	for inc in ${CGO_CFLAGS:-} /usr/include /usr/local/include; do
		inc=${inc#-I}
		[ -f "$inc/rocksdb/c.h" ] && return 0
	done
	return 1
}

have_rocksdb && exit 0

install_cmd="apt-get update && apt-get install -y librocksdb-dev"
run_as_root=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		run_as_root="sudo -n"
	else
		echo "ankusa: the RocksDB headers (rocksdb/c.h) are missing; run: sudo sh -c '$install_cmd'" >&2
		exit 1
	fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "ankusa: the RocksDB headers (rocksdb/c.h) are missing and apt-get is not available; install RocksDB 7.8 development files (Debian: librocksdb-dev)" >&2
	exit 1
fi

echo "ankusa: installing librocksdb-dev (RocksDB headers for cgo)..." >&2
export DEBIAN_FRONTEND=noninteractive
$run_as_root apt-get update -qq
$run_as_root apt-get install -y -qq librocksdb-dev >/dev/null
have_rocksdb || { echo "ankusa: librocksdb-dev installed but rocksdb/c.h still not found; run: $install_cmd" >&2; exit 1; }
echo "ankusa: librocksdb-dev installed" >&2
