package instance

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ankusa-go/ankusa/telemetry/task"
)

// gauges samples what the metrics cannot count as it happens: queue depth and the store's
// next seq, every interval. Each sample is a few atomic reads: O(1) whatever the backlog.
type gauges struct {
	i     *Instance
	tasks *task.Group // the ticker; one group per incarnation
}

type tick struct{}

const gaugeInterval = time.Second

func newGaugesProps(i *Instance) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &gauges{i: i} })
}

func (g *gauges) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		g.tasks = &task.Group{}
		self, root := ctx.Self(), ctx.ActorSystem().Root
		g.tasks.Every(gaugeInterval, func() { root.Send(self, tick{}) })
	case tick:
		g.sample()
	case *actor.Stopping, *actor.Restarting:
		if g.tasks != nil {
			g.tasks.Stop()
			g.tasks = nil
		}
	}
}

func (g *gauges) sample() {
	if g.i.edge != nil {
		g.i.tel.IngestQueue(g.i.edge.Queue())
	}
	if db := g.i.db.Load(); db != nil {
		g.i.tel.StoreNextSeq(db.NextSeq())
		g.i.tel.ArchivePending(db.Counts().ArchivePending)
	}
	g.i.tel.StoreUnavailable(g.i.health.StoreUnavailable(time.Now()))
}

// admin serves the operator surface: GET /metrics (the instance's own registry),
// /health and /ready. It is an isolated domain: its crash never touches ingest.
type admin struct {
	i     *Instance
	srv   *http.Server
	tasks *task.Group // the serving goroutine
}

// adminShutdownTimeout bounds how long a stopping admin listener waits for the requests
// it serves (a scrape, a probe) before it closes their connections.
const adminShutdownTimeout = 5 * time.Second

func newAdminProps(i *Instance) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &admin{i: i} })
}

func (a *admin) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		if err := a.start(); err != nil {
			panic(err)
		}
	case *actor.Stopping, *actor.Restarting:
		a.stop()
	}
}

// stop shuts the server down (no new connection, in-flight requests answered) and
// waits for its serving goroutine, so a restarted admin can bind the port again.
func (a *admin) stop() {
	if a.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminShutdownTimeout)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil {
		a.i.log.Warn().Err(err).Msg("admin shutdown: closing the connections still open")
		_ = a.srv.Close()
	}
	a.tasks.Stop()
	a.srv, a.tasks = nil, nil
}

func (a *admin) start() error {
	cfg := a.i.cfg
	addr := net.JoinHostPort(cfg.Admin.IP, strconv.Itoa(cfg.Admin.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.Join(errors.New("admin: cannot listen on "+addr), err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.i.tel.Handler())
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"status": "ok", "instance": cfg.Instance, "roles": cfg.EffectiveRoles(), "version": a.i.opts.Version,
		})
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		now := time.Now()
		ok, status, st := a.i.health.Ready(now)
		body := map[string]any{"status": status, "instance": cfg.Instance, "store": st}
		if watched, failing := a.i.health.Sinks(now); watched {
			// wal.type none: the sinks are where a hook is kept, so a failing one is a check.
			body["sinks"] = "ok"
			if len(failing) > 0 {
				body["sinks"], body["reasons"] = "failing", map[string]any{"sinks": failing}
			}
		}
		if !ok {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, body)
			return
		}
		writeJSON(w, http.StatusOK, body)
	})
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	bound := ln.Addr().String()
	a.i.adminAddr.Store(&bound)
	srv := a.srv
	a.tasks = &task.Group{}
	a.tasks.Go(func(<-chan struct{}) {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.i.log.Error().Err(err).Msg("admin listener stopped")
		}
	})
	a.i.log.Info().Str("addr", bound).Msg("admin listening")
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
