package instance

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ankusa-go/ankusa/store"
)

// storeOwner is the child that owns the RocksDB handle: it opens the store when it
// starts (a store that refuses to open fails the boot) and closes it when it stops.
// Everything after it in the tree reaches the handle through the instance.
type storeOwner struct{ i *Instance }

func newStoreProps(i *Instance) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &storeOwner{i: i} })
}

func (s *storeOwner) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		start := time.Now()
		db, err := store.Open(store.Options{Dir: s.i.cfg.StoreDir(), Log: s.i.log, Faults: s.i.opts.Faults,
			DedupeMaxEntries: s.i.cfg.Dedupe.MaxEntries, DedupeMaxEntriesPerTenant: s.i.cfg.Dedupe.MaxEntriesPerTenant,
			DedupeMaxEntriesPerSource: s.i.cfg.Dedupe.MaxEntriesPerSource})
		if err != nil {
			panic(err)
		}
		s.i.db.Store(db)
		s.i.health.SetStoreOpen(true)
		s.i.log.Info().Str("dir", s.i.cfg.StoreDir()).Uint64("next_seq", db.NextSeq()).
			Dur("open", time.Since(start)).Msg("store open")
	case *actor.Stopping, *actor.Restarting:
		s.close()
	}
}

func (s *storeOwner) close() {
	db := s.i.db.Swap(nil)
	s.i.health.SetStoreOpen(false)
	if db == nil {
		return
	}
	if err := db.Close(); err != nil {
		s.i.log.Error().Err(err).Msg("store close")
	}
}

// gauges samples what the metrics cannot count as it happens: queue depth and the store's
// next seq, every interval. Each sample is a few atomic reads: O(1) whatever the backlog.
type gauges struct {
	i    *Instance
	stop chan struct{}
}

type tick struct{}

const gaugeInterval = time.Second

func newGaugesProps(i *Instance) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &gauges{i: i} })
}

func (g *gauges) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		g.stop = make(chan struct{})
		self, root, stop := ctx.Self(), ctx.ActorSystem().Root, g.stop
		go func() {
			t := time.NewTicker(gaugeInterval)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					root.Send(self, tick{})
				case <-stop:
					return
				}
			}
		}()
	case tick:
		g.sample()
	case *actor.Stopping, *actor.Restarting:
		if g.stop != nil {
			close(g.stop)
			g.stop = nil
		}
	}
}

func (g *gauges) sample() {
	m := g.i.tel.Metrics
	if g.i.edge != nil {
		g.i.edge.Sweep(time.Now())
		recs, bytes := g.i.edge.Queue()
		m.QueueRecords.Set(float64(recs))
		m.QueueBytes.Set(float64(bytes))
	}
	if db := g.i.db.Load(); db != nil {
		m.StoreNextSeq.Set(float64(db.NextSeq()))
		m.StoreUnavailable.Set(0)
	}
}

// admin serves the operator surface: GET /metrics (the instance's own registry),
// /health and /ready. It is an isolated domain: its crash never touches ingest.
type admin struct {
	i   *Instance
	srv *http.Server
}

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
		if a.srv != nil {
			_ = a.srv.Close()
			a.srv = nil
		}
	}
}

func (a *admin) start() error {
	cfg := a.i.cfg
	addr := net.JoinHostPort(cfg.Admin.IP, strconv.Itoa(cfg.Admin.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.Join(errors.New("admin: cannot listen on "+addr), err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.i.tel.Metrics.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"status": "ok", "instance": cfg.Instance, "roles": cfg.EffectiveRoles(), "version": a.i.opts.Version,
		})
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		ok, status, st := a.i.health.Ready(time.Now())
		if !ok {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": status, "instance": cfg.Instance, "store": st})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": status, "instance": cfg.Instance, "store": st})
	})
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	bound := ln.Addr().String()
	a.i.adminAddr.Store(&bound)
	srv := a.srv
	go func() { _ = srv.Serve(ln) }()
	a.i.log.Info().Str("addr", bound).Msg("admin listening")
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
