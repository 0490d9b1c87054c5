package edge

import (
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
)

// takes counts the hooks tenant is granted at now before its first 429.
func takes(e *Edge, tenant string, now time.Time) int {
	for n := 0; n < 100; n++ {
		if r := e.chargeTenant(tenant, 0, now); r != nil {
			return n
		}
	}
	return 100
}

// Inventory B.3 "runtime override > tenant entry > default": an override wins at once, with the tenant's
// bucket reset; removing it brings the config's limit back; SetRateOverrides (the boot's load) resets the
// buckets of the tenants whose override changed and no other.
func TestRateOverrideWinsAndResetsTheBucket(t *testing.T) {
	cfg := config.RateLimits{Default: &config.Rate{Rate: 0.001, Burst: 3},
		Tenants: map[string]config.TenantLimits{"acme": {Rate: 0.001, Burst: 2}}}
	e := &Edge{limits: newLimits(cfg, config.Quarantine{})}
	now := time.Now()
	if n := takes(e, "acme", now); n != 2 {
		t.Fatalf("config entry: %d", n)
	}
	e.SetRateOverride("acme", &config.Rate{Rate: 0.001, Burst: 5})
	if n := takes(e, "acme", now); n != 5 {
		t.Fatalf("override: %d", n)
	}
	if r, ok := e.RateOverride("acme"); !ok || r.Burst != 5 {
		t.Fatalf("RateOverride: %v %v", r, ok)
	}
	e.SetRateOverride("acme", nil)
	if n := takes(e, "acme", now); n != 2 {
		t.Fatalf("override removed: %d", n)
	}
	if n := takes(e, "beta", now); n != 3 {
		t.Fatalf("default: %d", n)
	}
	e.SetRateOverrides(map[string]config.Rate{"acme": {Rate: 0.001, Burst: 4}})
	if n := takes(e, "acme", now); n != 4 {
		t.Fatalf("loaded override: %d", n)
	}
	if n := takes(e, "beta", now); n != 0 {
		t.Fatalf("beta's bucket was reset by a load that did not change it: %d", n)
	}
	e.SetRateOverrides(map[string]config.Rate{"acme": {Rate: 0.001, Burst: 4}})
	if n := takes(e, "acme", now); n != 0 {
		t.Fatalf("an unchanged override reset acme's bucket: %d", n)
	}
	e.SetRateOverrides(nil)
	if n := takes(e, "acme", now); n != 2 {
		t.Fatalf("every override removed: %d", n)
	}
}
