package config

// Dispatch is the delivery scheduler's configuration (dispatch.*), ignored under wal.type none.
type Dispatch struct {
	Batch            int   `yaml:"batch"`               // default 128 rows claimed per scan
	Concurrency      int   `yaml:"concurrency"`         // default 32 deliveries at once
	MaxInflight      int   `yaml:"max_inflight"`        // default 4096 claimed rows
	MaxInflightBytes int64 `yaml:"max_inflight_bytes"`  // default 128 MiB of stored hook size
	AttemptTimeoutMS int   `yaml:"attempt_timeout_ms"`  // default 30_000
	SinkConcurrency  int   `yaml:"sink_concurrency"`    // default 0 = no per-key cap below concurrency
	BreakerFailures  int   `yaml:"breaker_failures"`    // default 5; 0 disables
	BreakerOpenMS    int   `yaml:"breaker_open_ms"`     // default 30_000
	BreakerMaxOpenMS int   `yaml:"breaker_max_open_ms"` // default 300_000
	Retry            Retry `yaml:"retry"`               // the default retry policy of every source
	IdleLaneMS       int   `yaml:"idle_lane_ms"`        // default 30_000: a lane idle this long is stopped
	// Tenants are per-tenant windows; a tenant without an entry is bounded only by the global limits.
	Tenants map[string]TenantWindow `yaml:"tenants"`
}

// Retry is an exponential back-off with full jitter: delay = min(base·2^(n-1), max) × U[0.5, 1].
type Retry struct {
	BaseMS      int  `yaml:"base_ms"`      // default 100
	MaxMS       int  `yaml:"max_ms"`       // default 300_000
	MaxAttempts int  `yaml:"max_attempts"` // default 84
	Jitter      bool `yaml:"jitter"`       // default true
}

// TenantWindow bounds one tenant's share of dispatch (dispatch.tenants.<t>); 0 = unbounded.
type TenantWindow struct {
	MaxInflight      int   `yaml:"max_inflight"`
	MaxInflightBytes int64 `yaml:"max_inflight_bytes"`
	Concurrency      int   `yaml:"concurrency"`
}

func defaultDispatch() Dispatch {
	return Dispatch{
		Batch: 128, Concurrency: 32, MaxInflight: 4096, MaxInflightBytes: 128 << 20,
		AttemptTimeoutMS: 30_000, BreakerFailures: 5, BreakerOpenMS: 30_000, BreakerMaxOpenMS: 300_000,
		Retry:      defaultRetry(),
		IdleLaneMS: 30_000,
		Tenants:    map[string]TenantWindow{},
	}
}

func defaultRetry() Retry { return Retry{BaseMS: 100, MaxMS: 300_000, MaxAttempts: 84, Jitter: true} }

func (c *Config) validateDispatch(ps *problems) {
	d := c.Dispatch
	positive(ps, "dispatch.batch", d.Batch)
	positive(ps, "dispatch.concurrency", d.Concurrency)
	positive(ps, "dispatch.max_inflight", d.MaxInflight)
	positive(ps, "dispatch.max_inflight_bytes", d.MaxInflightBytes)
	positive(ps, "dispatch.attempt_timeout_ms", d.AttemptTimeoutMS)
	if d.SinkConcurrency < 0 || d.SinkConcurrency > d.Concurrency {
		ps.mustBe("dispatch.sink_concurrency", "0 (unset) or 1..dispatch.concurrency", d.SinkConcurrency)
	}
	nonNegative(ps, "dispatch.breaker_failures", d.BreakerFailures)
	positive(ps, "dispatch.breaker_open_ms", d.BreakerOpenMS)
	if d.BreakerMaxOpenMS < d.BreakerOpenMS {
		ps.mustBe("dispatch.breaker_max_open_ms", ">= dispatch.breaker_open_ms", d.BreakerMaxOpenMS)
	}
	positive(ps, "dispatch.idle_lane_ms", d.IdleLaneMS)
	validateRetry(ps, "dispatch.retry", d.Retry)
	for t, w := range d.Tenants {
		p := join("dispatch.tenants", t)
		if !validID(t) {
			ps.add(p, "tenant id must match [A-Za-z0-9_-]{1,64}")
		}
		nonNegative(ps, join(p, "max_inflight"), w.MaxInflight)
		nonNegative(ps, join(p, "max_inflight_bytes"), w.MaxInflightBytes)
		nonNegative(ps, join(p, "concurrency"), w.Concurrency)
	}
}

func validateRetry(ps *problems, p string, r Retry) {
	positive(ps, join(p, "base_ms"), r.BaseMS)
	if r.MaxMS < r.BaseMS {
		ps.mustBe(join(p, "max_ms"), ">= base_ms", r.MaxMS)
	}
	positive(ps, join(p, "max_attempts"), r.MaxAttempts)
}

// RetryOf returns the retry policy of source id: its own `retry` when set, else dispatch.retry.
func (c *Config) RetryOf(id string) Retry {
	if s, ok := c.Sources[id]; ok && s.Retry != nil {
		return *s.Retry
	}
	return c.Dispatch.Retry
}
