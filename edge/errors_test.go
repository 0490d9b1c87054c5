package edge

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/verify"
)

// TestRefusalOfMapsEveryStepError: every error an ingest step returns has one answer and
// one outcome label, decided in refusalOf alone.
func TestRefusalOfMapsEveryStepError(t *testing.T) {
	f := func(err error, status int, reason, outcome string) {
		t.Helper()
		r, got := refusalOf(err)
		if r.Status != status || r.Reason != reason || got != outcome {
			t.Errorf("refusalOf(%v) = %d %s %s, want %d %s %s", err, r.Status, r.Reason, got, status, reason, outcome)
		}
	}
	f(ErrUnknownSource, 404, "unknown_source", "unknown_source")
	f(fmt.Errorf("lookup: %w", ErrSourcesUnavailable), 503, "store_unavailable", "store_unavailable")
	f(errDeadline, 503, "deadline_exceeded", "deadline_exceeded")
	f(fmt.Errorf("%w: %w", errDedupeLookup, errors.New("io")), 503, "store_unavailable", "store_unavailable")
	f(fmt.Errorf("commit: %w", store.ErrDedupeQuota), 503, "dedupe_quota", "dedupe_quota")
	f(errors.New("rocksdb: IO error"), 503, "store_unavailable", "store_unavailable")
	f(refuseVerification(verify.ErrNoMatch), 401, "verification_failed", "rejected")
	f(refuse429("rate_limited", time.Second), 429, "rate_limited", "rate_limited")
	f(refuseTenantOverload, 429, "tenant_overload", "tenant_overload")
	f(refuseOverload, 503, "overload", "overload")
	f(refuseTooLarge(10), 413, "payload_too_large", "payload_too_large")
}
