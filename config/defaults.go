package config

// Every default lives here. Parse decodes the file on top of these values, so a key the file leaves out
// keeps its default and a key it sets explicitly (even to zero or false) keeps the file's value.

const (
	defaultInstance     = "default"
	defaultTenant       = "default"
	defaultMaxBodyBytes = 8_000_000
)

// Default returns a configuration with every default filled in and no sources.
func Default() *Config {
	c := &Config{
		Instance: defaultInstance,
		Node: Node{
			DataDir: "./data",
			Roles:   []string{RoleEdge, RoleDispatch, RoleStorage},
		},
		Log: Log{Level: "info", Format: "auto"},
		HTTP: HTTP{
			IP:                   "",
			Port:                 4000,
			Prefix:               "/webhooks",
			Routing:              "path",
			MaxURLTenants:        1000,
			MaxBodyBytes:         defaultMaxBodyBytes,
			MaxConns:             10_000,
			MaxConnsPerIP:        512,
			MaxReadingBytes:      256 << 20,
			MaxReadingBytesPerIP: 64 << 20,
			HeaderTimeoutMS:      10_000,
			ReadTimeoutMS:        30_000,
			IdleTimeoutMS:        60_000,
		},
		MaxBodyBytes: defaultMaxBodyBytes,
		Admin:        Admin{Enabled: true, IP: "127.0.0.1", Port: 4002},
		WAL:          WAL{Type: WALDisk, PublishTimeoutMS: 8000},
		Intake: Intake{Topic: "ankusa-intake", BreakerFailures: 3, RetryAfterS: 2, PublishTimeoutMS: 5000,
			ReconcileIntervalMS: 1000, MaxInflight: 8, MaxRecordBytes: 900_000},
		Batcher: Batcher{
			Partitions:            2,
			MaxBatch:              256,
			MaxDelayMS:            0,
			MaxQueue:              10_000,
			MaxQueueBytes:         256 << 20,
			MaxCommits:            64,
			GroupCommitMaxBytes:   4 << 20,
			GroupCommitMaxRecords: 4096,
			RecordDeadlineMS:      15_000,
		},
		Listener: Listener{DrainDelayMS: 5000, DrainTimeoutMS: 30_000},
		Dispatch: defaultDispatch(),
		// rate_limits: every limit unset (unlimited) until the file sets one.
		Quarantine: Quarantine{Burst: 100, Rate: 20, MaxBytes: 1 << 30, MaxPending: 1000, SourceShare: 0.1,
			TenantShare: 0.5, RetentionSeconds: 7 * 24 * 3600, WriteTimeoutMS: 5000},
		Dedupe: Dedupe{MaxEntries: 10_000_000, MaxEntriesPerTenant: 1_000_000, MaxEntriesPerSource: 500_000,
			Scope: ScopeNode},
		RateLimits: RateLimits{Scope: ScopeNode},
		Fleet: Fleet{Store: FleetStore{KeyPrefix: "ankusa:fleet:"}, TimeoutMS: 50, BreakerFailures: 3,
			BreakerOpenMS: 5000},
		Store: Store{ReopenMinMS: 5000, ReopenMaxMS: 60_000, CommitStallMS: 5000, DeleteMBPerSec: 256,
			CommitThreadNice: -10},
		Storage:     defaultStorage(),
		Backup:      defaultBackup(),
		ClaimCheck:  defaultClaimCheck(),
		Health:      Health{SinkErrorWindowMS: 30_000},
		Audit:       Audit{RetentionDays: 365},
		SourceStore: SourceStore{Type: SourceStorePersistent, Redis: FleetStore{KeyPrefix: "ankusa:sources:"}},
		Routes: Routes{MaxRoutes: 10_000, Store: RouteStore{Type: RouteStoreLocal}, IPDeniedStatus: 403,
			LogSample: 100},
		Sources: map[string]Source{},
	}
	return c
}

// applyDefaults fills a source entry before the file's keys are decoded onto it. The walk calls
// applyDefaults on every map or list element whose pointer type has it, so a new keyed section gets its
// per-entry defaults by adding this one method.
func (s *Source) applyDefaults() {
	s.Tenant = defaultTenant
	s.OnVerifyFailure = OnVerifyReject
	s.StoreHeaders.Mode = StoreHeadersDrop
}
