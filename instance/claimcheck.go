package instance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/sinks/claimcheck"
	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/supervision"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// claimGateway is the claim_check role: the read-only claim gateway on claim_check.ip:port and, when
// claim_check.retention_days is set (a local claim store, on this host), the retention sweep. It is an
// isolated domain: its crash never touches ingest or dispatch.
type claimGateway struct {
	i     *Instance
	store blob.Store
	srv   *http.Server
	tasks *task.Group // the serving goroutine and the sweep loop
	// cancel ends the sweep's context; nil without a sweep.
	cancel context.CancelFunc
}

// claimShutdownTimeout bounds how long a stopping gateway waits for the reads it serves.
const claimShutdownTimeout = 5 * time.Second

// claimBlob is the claim blob store (claim_check.store, else the storage blob store unprefixed), opened once
// per instance and shared by the gateway, dispatch's check-ins and the direct publisher's.
func (i *Instance) claimBlob() (blob.Store, error) {
	i.claimMu.Lock()
	defer i.claimMu.Unlock()
	if i.claimStore == nil {
		store, err := blob.Open(context.Background(), i.cfg.ClaimBlobStore())
		if err != nil {
			return nil, fmt.Errorf("claim_check.store: %w", err)
		}
		i.claimStore = store
	}
	return i.claimStore, nil
}

// claimGatewayChild serves the claim blob store; each incarnation of the actor serves the same one.
func (i *Instance) claimGatewayChild() (supervision.ChildSpec, error) {
	store, err := i.claimBlob()
	if err != nil {
		return supervision.ChildSpec{}, err
	}
	props := actor.PropsFromProducer(func() actor.Actor { return &claimGateway{i: i, store: store} })
	return supervision.ChildSpec{Name: "claim-check", Props: i.withKill(props), Domain: "claim_check", Isolated: true}, nil
}

// claimFunc is the claim check-in of dispatch and of the direct publisher: a body over the source's inline limit
// is checked into the claim store as a one-claim pack whose id follows from the hook
// (claimcheck.Checker.CheckInHook), so a check-in repeated after a crash rewrites the same pack and yields the
// same ref. Dispatch records the ref (the store's claim marker) so it checks each hook in once.
func (i *Instance) claimFunc() (sinks.ClaimCheckIn, error) {
	store, err := i.claimBlob()
	if err != nil {
		return nil, err
	}
	checker := claimcheck.NewChecker(store, claimcheck.Options{PackMaxBytes: i.cfg.ClaimCheck.PackMaxBytes, CheckedIn: i.tel.ClaimCheckedIn})
	return func(ctx context.Context, e *sinks.Envelope) (string, error) {
		tenant := e.Tenant
		if tenant == "" {
			tenant = sinks.DefaultTenant
		}
		c, err := checker.CheckInHook(ctx, tenant, e.ID, time.UnixMilli(e.ReceivedAt), e.Body)
		return c.Ref, err
	}, nil
}

func (g *claimGateway) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		if err := g.start(); err != nil {
			panic(err)
		}
	case *actor.Stopping, *actor.Restarting:
		g.stop()
	}
}

func (g *claimGateway) start() error {
	cfg := g.i.cfg
	addr := net.JoinHostPort(cfg.ClaimCheck.IP, strconv.Itoa(cfg.ClaimCheck.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.Join(errors.New("claim_check: cannot listen on "+addr), err)
	}
	log := g.i.log.With().Str("component", "claim_check").Logger()
	h := claimcheck.NewGateway(claimcheck.NewReader(g.store), claimcheck.NewAuth(cfg.ClaimCheck.Auth), log,
		claimcheck.GatewayHooks{Redeemed: g.i.tel.ClaimRedeemed})
	g.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	srv := g.srv
	g.tasks = &task.Group{}
	g.tasks.Go(func(<-chan struct{}) {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("claim gateway stopped")
		}
	})
	if days := cfg.ClaimCheck.RetentionDays; days > 0 {
		every := time.Duration(cfg.ClaimCheck.SweepIntervalMS) * time.Millisecond
		store := g.store
		// The sweep lists and deletes files: it runs in the group's goroutine, never in Receive.
		ctx, cancel := context.WithCancel(context.Background())
		g.cancel = cancel // stop cancels a sweep in progress before it waits for the group
		g.tasks.Go(func(stop <-chan struct{}) {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				n, err := claimcheck.Sweep(ctx, store, days, time.Now())
				g.i.tel.ClaimSwept(n, err)
				switch {
				case err != nil && ctx.Err() == nil:
					log.Warn().Err(err).Int("deleted", n).Msg("claim retention sweep failed")
				case n > 0:
					log.Info().Int("deleted", n).Int("retention_days", days).Msg("claim packs past retention deleted")
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		})
	}
	bound := ln.Addr().String()
	g.i.claimAddr.Store(&bound)
	log.Info().Str("addr", bound).Str("store", g.store.String()).Msg("claim gateway listening")
	return nil
}

// stop shuts the server down (in-flight reads answered) and waits for the group's goroutines, so a restarted
// gateway can bind the port again.
func (g *claimGateway) stop() {
	if g.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), claimShutdownTimeout)
	defer cancel()
	if err := g.srv.Shutdown(ctx); err != nil {
		g.i.log.Warn().Err(err).Msg("claim gateway shutdown: closing the connections still open")
		_ = g.srv.Close()
	}
	if g.cancel != nil {
		g.cancel()
	}
	g.tasks.Stop()
	g.srv, g.tasks, g.cancel = nil, nil, nil
}
