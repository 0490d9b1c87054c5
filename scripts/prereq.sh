#!/usr/bin/env bash
# Installs what building and testing Ankusa needs and is not a Go module: the RocksDB C
# headers and library (Debian's librocksdb-dev, 7.8.x, which grocksdb v1.7.15 is pinned
# against), promtool (Debian's prometheus package) for the alert rules' unit tests and
# Debian's chromium for the web console's end-to-end tests (admin/console).
# `make` calls it before every target that compiles; .ci/run calls it too. Idempotent:
# when both are present it prints nothing and exits at once.
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

need=()
have_rocksdb || need+=(librocksdb-dev)
# promtool runs the alert rules' unit tests (deploy/monitoring_test.go); Debian ships it in
# the prometheus package.
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# The console's browser tests drive headless Chromium (chromedp); they fail without it under CI=true.
[ -x /usr/bin/chromium ] || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0

install_cmd="apt-get update && apt-get install -y --no-install-recommends ${need[*]}"
run_as_root=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		run_as_root="sudo -n"
	else
		echo "ankusa: missing ${need[*]} (the RocksDB headers for cgo, promtool for the monitoring tests, chromium for the console's browser tests); run: sudo sh -c '$install_cmd'" >&2
		# Without promtool or chromium only their tests cannot run (they fail under CI=true); the build can.
		have_rocksdb && exit 0
		exit 1
	fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "ankusa: missing ${need[*]} and apt-get is not available; install RocksDB 7.8 development files (Debian: librocksdb-dev), promtool (Prometheus 2.x) and Chromium" >&2
	have_rocksdb && exit 0
	exit 1
fi

echo "ankusa: installing ${need[*]}..." >&2
export DEBIAN_FRONTEND=noninteractive
$run_as_root apt-get update -qq
$run_as_root apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
if [[ " ${need[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
	# The package enables and starts a Prometheus server; only its promtool was wanted.
	$run_as_root systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
have_rocksdb || { echo "ankusa: librocksdb-dev installed but rocksdb/c.h still not found; run: $install_cmd" >&2; exit 1; }
command -v promtool >/dev/null 2>&1 || { echo "ankusa: prometheus installed but promtool still not found; run: $install_cmd" >&2; exit 1; }
[ -x /usr/bin/chromium ] || { echo "ankusa: chromium installed but /usr/bin/chromium still not found; run: $install_cmd" >&2; exit 1; }
echo "ankusa: ${need[*]} installed" >&2
