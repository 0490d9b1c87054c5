package admin

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/dispatch"
	"github.com/ankusa-go/ankusa/routes/registry"
	"github.com/ankusa-go/ankusa/sources"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// Deps is what the admin listener reads and steers, handed over by the instance as functions and values so
// that admin imports no role package (the instance owns the edge, dispatch and the store).
type Deps struct {
	Config  *config.Config
	Version string
	Log     zerolog.Logger
	// Metrics serves the instance's own registry (GET /metrics).
	Metrics http.Handler
	// Ready reports readiness (GET /ready): ok false answers 503 with Retry-After: 1.
	Ready func(now time.Time) (ok bool, body map[string]any)
	// Bound is told the listener's address once it listens.
	Bound func(addr string)
	// Principals are the callers of /v1 (admin.principals, plus the local one under the embedded default).
	Principals []config.Principal
	// Store is the open store (nil while closed).
	Store func() *store.DB
	// Dispatcher runs replay jobs (nil without the dispatch role).
	Dispatcher *dispatch.Dispatcher
	// Release re-verifies held hooks and commits those that pass (nil without the edge role).
	Release func(source string, limit int) (ReleaseReport, error)
	// FetchArchived reads an archived hook (storage.FetchVisible: ErrNotFound, ErrGone); nil without the
	// storage role.
	FetchArchived func(ctx context.Context, id [16]byte) (store.Hook, error)
	// EraseTenant starts or joins a tenant erase job and waits up to wait for it (nil without a store).
	EraseTenant func(ctx context.Context, tenant string, e store.AuditEntry, wait time.Duration) (EraseStatus, error)
	// SetLogLevel sets the instance's log level at runtime.
	SetLogLevel func(zerolog.Level)
	// Sources are the file's and the API-managed sources (nil: sources routes answer 503).
	Sources *sources.Set
	// RateOverride applies a tenant's runtime rate-limit override to the edge (nil removes it); nil without
	// the edge role (the rate-limit routes answer 409 role_not_enabled).
	RateOverride func(tenant string, r *config.Rate)
	// Routes manage the edge's route table (nil without the edge role: the route routes answer 409
	// role_not_enabled).
	Routes *registry.Registry
	// Intake reports the dual intake log's state for GET /v1/wal (nil unless wal.type is dual).
	Intake func() IntakeStatus
	// Lifecycle flags source changes for lifecycle publication (lifecycle.sinks set).
	Lifecycle bool
	// LogLevel reads the instance's log level (nil: unknown, every change is audited as one).
	LogLevel func() zerolog.Level
	// Gatherer is the instance's registry, read by the console's overview (nil: no figures).
	Gatherer prometheus.Gatherer
	// Console, when set, builds the handler served under /console/ from the in-process API (the console is a
	// package of its own that imports admin; the instance installs it).
	Console func(*API) (http.Handler, error)
}

// IntakeStatus is the intake object of GET /v1/wal under wal.type dual.
type IntakeStatus struct {
	Node       string            `json:"node"`
	State      string            `json:"state"`     // recovering, down (breaker open), up
	Pending    int               `json:"pending"`   // hooks in flight or half-persisted
	Watermark  uint64            `json:"watermark"` // every hook below this seq is in the store
	Partitions []IntakePartition `json:"partitions"`
}

// IntakePartition is one partition of the intake topic as the node last saw it.
type IntakePartition struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`           // one past the highest offset the node had confirmed
	Watermark int64 `json:"watermark_offset"` // where a replay of the partition starts
}

// ReleaseReport says what a quarantine release did.
type ReleaseReport struct {
	Released   int // verified now and committed with their original id
	Duplicates int // verified, but their event was already stored: left the pen as skipped
	Held       int // still failing verification: kept in the pen
}

// ShutdownTimeout bounds how long a stopping admin listener waits for the requests it serves (a scrape, a
// probe) before it closes their connections.
const ShutdownTimeout = 5 * time.Second

// server is the admin actor: it owns the listener and its serving goroutine.
type server struct {
	d     *Deps
	srv   *http.Server
	tasks *task.Group // the serving goroutine
}

// NewProps returns the admin actor's props. A listener that cannot bind panics the actor: at boot that fails
// the boot with the error, later the supervisor restarts the isolated admin domain.
func NewProps(d *Deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &server{d: d} })
}

func (s *server) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		if err := s.start(); err != nil {
			panic(err)
		}
	case *actor.Stopping, *actor.Restarting:
		s.stop()
	}
}

func (s *server) start() error {
	cfg := s.d.Config
	addr := net.JoinHostPort(cfg.Admin.IP, strconv.Itoa(cfg.Admin.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.Join(errors.New("admin: cannot listen on "+addr), err)
	}
	h, err := NewRouter(s.d)
	if err != nil {
		_ = ln.Close()
		return err
	}
	tcfg, err := cfg.Admin.TLS.ServerConfig(true)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("admin: admin.tls: %w", err)
	}
	if tcfg != nil {
		ln = tls.NewListener(ln, tcfg)
	}
	if len(s.d.Principals) == 0 {
		s.d.Log.Warn().Msg("admin: no principal configured, every /v1 route answers 401; add one under " +
			"admin.principals: {name, token_sha256: hex of the token's SHA-256, scopes: [...], tenants: [\"*\"]}")
	}
	// The server's own messages (a failed TLS handshake) go to the instance's log, not to stderr.
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: log.New(s.d.Log.With().Str("component", "admin_http").Logger(), "", 0)}
	bound := ln.Addr().String()
	if s.d.Bound != nil {
		s.d.Bound(bound)
	}
	srv := s.srv
	s.tasks = &task.Group{}
	s.tasks.Go(func(<-chan struct{}) {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.d.Log.Error().Err(err).Msg("admin listener stopped")
		}
	})
	s.d.Log.Info().Str("addr", bound).Bool("tls", tcfg != nil).Msg("admin listening")
	return nil
}

// stop shuts the server down (no new connection, in-flight requests answered) and waits for its serving
// goroutine, so a restarted admin can bind the port again.
func (s *server) stop() {
	if s.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.d.Log.Warn().Err(err).Msg("admin shutdown: closing the connections still open")
		_ = s.srv.Close()
	}
	s.tasks.Stop()
	s.srv, s.tasks = nil, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
