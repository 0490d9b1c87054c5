# Ankusa: `make run` starts a single node on the embedded default config; `make test` runs the suite.
GO       ?= go
PKGS     := ./...
BIN      := bin
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
BENCH_SECONDS ?= 5
BENCH_BACKLOG ?= 100000
# Seconds each open-loop trial of the sustainable-rate search and the steady 5,000/s run measures.
BENCH_SUSTAIN_SECONDS ?= 60

.PHONY: prereq run build test test-short bench lint chaos drill soak clean

# The RocksDB headers cgo needs: installed when missing (apt-get as root or via sudo -n),
# else one line naming the command to run.
prereq:
	@bash scripts/prereq.sh

run: prereq
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/ankusa serve

build: prereq
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ankusa ./cmd/ankusa
	$(GO) build -o $(BIN)/ankusa-loadgen ./cmd/ankusa-loadgen

# The tests that only hold without the race detector (timings, allocation counts: the
# race detector slows goroutines unevenly and makes sync.Pool drop items), run in a
# second pass; it fails when one of them did not run, so a renamed test cannot drop out.
NORACE_TESTS := TestTenantFairness TestVerifyAllocatesNothing TestDedupeKeyAllocatesOnlyTheKey TestStalledUploadsBoundedBeforeAdmission
NORACE_PKGS  := ./dispatch/ ./verify/ ./edge/

# The whole suite with the race detector, black-box kill tests included.
test: prereq
	$(GO) test -race -count=1 -timeout 12m $(PKGS)
	@out=$$($(GO) test -count=1 -timeout 3m -run '^($(subst $(eval) ,|,$(NORACE_TESTS)))$$' -v $(NORACE_PKGS) 2>&1); rc=$$?; \
	printf '%s\n' "$$out"; [ $$rc -eq 0 ] || exit $$rc; \
	for t in $(NORACE_TESTS); do printf '%s\n' "$$out" | grep -q -- "^--- PASS: $$t " || { echo "$$t did not run in the non-race pass"; exit 1; }; done


test-short: prereq
	$(GO) test -count=1 -short $(PKGS)

# Loopback load against the server and the reference server in one run (and wal.type dual against disk,
# BenchmarkLoopbackDual, matched by the same pattern), the drain of a
# stored backlog of BENCH_BACKLOG hooks to each broker sink (the services of the machine,
# kfake, goaws) and to a local HTTP sink beside the delivery reference, plus the in-process
# micro-benchmarks, what a LocalFS Put does to the synced appends beside it, and the console's page
# loads at a million stored hooks (BenchmarkConsolePages fails a list page whose median is over
# 200 ms). Other figures are printed, never asserted.
bench: prereq
	ANKUSA_BENCH_SECONDS=$(BENCH_SECONDS) $(GO) test -run '^$$' -bench 'Loopback' -benchtime 1x -timeout 20m ./test/...
	$(GO) test -run '^$$' -bench 'EndToEnd|QuarantineFlood' -benchtime 1x -timeout 20m ./test/...
	ANKUSA_BENCH_BACKLOG=$(BENCH_BACKLOG) $(GO) test -run '^$$' -bench 'BacklogDrain' -benchtime 1x -timeout 60m ./test/...
	ANKUSA_BENCH_BACKLOG=$(BENCH_BACKLOG) $(GO) test -run '^$$' -bench 'DeliveryVsReference' -benchtime 1x -timeout 30m ./test/
	ANKUSA_BENCH_SECONDS=$(BENCH_SECONDS) ANKUSA_BENCH_SUSTAIN_SECONDS=$(BENCH_SUSTAIN_SECONDS) $(GO) test -run '^$$' -bench 'SustainableRate|Steady5k' -benchtime 1x -timeout 90m ./test/
	$(GO) test -run '^$$' -bench 'TenantFairness' -benchtime 1x -timeout 20m ./dispatch/...
	$(GO) test -run '^$$' -bench 'SchedulerTick' -benchtime 300x -benchmem -timeout 20m ./dispatch/...
	$(GO) test -run '^$$' -bench . -benchmem -timeout 20m ./edge/... ./verify/... ./store/...
	$(GO) test -run '^$$' -bench 'BackupRun' -benchtime 3x -benchmem -timeout 20m ./storage/backup/
	$(GO) test -run '^$$' -bench 'Compaction' -benchmem -timeout 20m ./storage/
	$(GO) test -run '^$$' -bench 'PutBesideSyncedAppends' -benchtime 1x -timeout 20m ./storage/blob/
	$(GO) test -run '^$$' -bench . -benchmem -timeout 20m ./sinks/...
	$(GO) test -run '^$$' -bench 'ConsolePages' -benchtime 1x -timeout 30m ./admin/console/

# staticcheck is installed into $(GOBIN) when missing or of another version; the version
# is pinned so that lint results do not change under a developer.
STATICCHECK_VERSION := 0.8.2
GOBIN       ?= $(shell $(GO) env GOPATH)/bin
STATICCHECK := $(GOBIN)/staticcheck

lint: prereq
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@$(STATICCHECK) -version 2>/dev/null | grep -qF '($(STATICCHECK_VERSION))' || \
		GOBIN=$(GOBIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@v$(STATICCHECK_VERSION)
	$(STATICCHECK) $(PKGS)

# Slow drills, reported in notes rather than run by CI.
chaos: prereq
	$(GO) test -tags chaos -race -count=1 -timeout 30m -run 'Chaos' -v ./test/

# The fleet drill of wal.type dual: three kfake brokers, two nodes sharing one S3 bucket, kill -9 of one and a
# replacement with its node id on an empty volume (also with a broker down, and from the secondary backup only).
drill: prereq
	$(GO) test -tags drill -count=1 -timeout 20m -run 'FleetDrill' -v ./test/

soak: prereq
	$(GO) test -tags soak -count=1 -timeout 90m -run 'Soak' -v ./test/

clean:
	rm -rf $(BIN) data
