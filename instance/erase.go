package instance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/ankusa-go/ankusa/admin"
	"github.com/ankusa-go/ankusa/sinks/claimcheck"
	"github.com/ankusa-go/ankusa/sources"
	"github.com/ankusa-go/ankusa/store"
)

// eraser runs tenant erase jobs (seed: Tenant erase): the tenant is closed, its running attempts are waited
// for, its rows removed, its sources of a Redis source store and its claim-check objects deleted, its fleet
// buckets deleted, and its tombstone committed with the tenant.delete audit
// row in one synced batch. Each stage's start is synced (store.EraseProgress), so a job a kill -9 interrupts
// is resumed at the next boot from its stage.
type eraser struct {
	i       *Instance
	mu      sync.Mutex
	running map[string]chan struct{} // closed when the tenant's job ends
	wg      sync.WaitGroup
	stop    chan struct{}
	once    sync.Once
}

func newEraser(i *Instance) *eraser {
	return &eraser{i: i, running: map[string]chan struct{}{}, stop: make(chan struct{})}
}

// attemptsWait bounds how long a job waits for the tenant's running attempts: past it the rows are removed
// anyway, and an attempt still running finds its row gone (its outcome is refused, it cannot put it back).
func (x *eraser) attemptsWait() time.Duration {
	return time.Duration(x.i.cfg.Dispatch.AttemptTimeoutMS)*time.Millisecond + time.Second
}

// erase starts (or joins) tenant's job and waits up to wait for it to finish.
func (x *eraser) erase(ctx context.Context, tenant string, e store.AuditEntry, wait time.Duration) (admin.EraseStatus, error) {
	db := x.i.db.Load()
	if db == nil {
		return admin.EraseStatus{}, store.ErrClosed
	}
	if done, err := db.TenantErased(tenant); err != nil {
		return admin.EraseStatus{}, err
	} else if done {
		if _, running := x.job(tenant); !running {
			return admin.EraseStatus{Tenant: tenant, State: "erased", Stage: store.EraseCommit}, nil
		}
	}
	ch, running := x.job(tenant)
	if !running {
		p := store.EraseProgress{Tenant: tenant, Stage: store.EraseClosing, StartedAt: time.Now().UnixMilli(),
			Actor: e.Actor, Client: e.Client, RequestID: e.RequestID}
		if err := db.PutEraseProgress(p); err != nil {
			return admin.EraseStatus{}, err
		}
		ch = x.start(p)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
	return x.status(tenant)
}

func (x *eraser) job(tenant string) (chan struct{}, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ch, ok := x.running[tenant]
	return ch, ok
}

// status reads tenant's job from the store.
func (x *eraser) status(tenant string) (admin.EraseStatus, error) {
	db := x.i.db.Load()
	if db == nil {
		return admin.EraseStatus{}, store.ErrClosed
	}
	jobs, err := db.ErasingTenants()
	if err != nil {
		return admin.EraseStatus{}, err
	}
	for _, p := range jobs {
		if p.Tenant == tenant {
			return admin.EraseStatus{Tenant: tenant, State: "running", Stage: p.Stage, StartedAt: p.StartedAt}, nil
		}
	}
	if done, err := db.TenantErased(tenant); err != nil || !done {
		return admin.EraseStatus{Tenant: tenant, State: "failed"}, err
	}
	return admin.EraseStatus{Tenant: tenant, State: "erased", Stage: store.EraseCommit}, nil
}

// resume restarts every job the store holds unfinished (at boot, once the store is open).
func (x *eraser) resume() {
	db := x.i.db.Load()
	if db == nil {
		return
	}
	jobs, err := db.ErasingTenants()
	if err != nil {
		x.i.log.Error().Err(err).Msg("tenant erase: cannot read the unfinished jobs")
		return
	}
	for _, p := range jobs {
		if _, running := x.job(p.Tenant); !running {
			x.i.log.Info().Str("tenant", p.Tenant).Str("stage", p.Stage).Msg("tenant erase: resuming an unfinished job")
			x.start(p)
		}
	}
}

func (x *eraser) start(p store.EraseProgress) chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if ch, ok := x.running[p.Tenant]; ok {
		return ch
	}
	ch := make(chan struct{})
	x.running[p.Tenant] = ch
	if x.i.edge != nil {
		x.i.edge.CloseTenant(p.Tenant)
	}
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		err := x.run(p)
		x.mu.Lock()
		delete(x.running, p.Tenant)
		x.mu.Unlock()
		close(ch)
		if err != nil {
			// The tenant stays closed: the job resumes at the next boot, or a new DELETE restarts it.
			x.i.log.Error().Err(err).Str("tenant", p.Tenant).Str("stage", p.Stage).Msg("tenant erase failed")
			return
		}
		if x.i.edge != nil {
			x.i.edge.OpenTenant(p.Tenant)
		}
	}()
	return ch
}

// run carries p through its remaining stages.
func (x *eraser) run(p store.EraseProgress) error {
	log := x.i.log.With().Str("tenant", p.Tenant).Logger()
	for {
		db := x.i.db.Load()
		if db == nil {
			return store.ErrClosed
		}
		switch p.Stage {
		case store.EraseClosing:
			x.waitAttempts(db, p.Tenant)
			p.Stage = store.EraseRows
		case store.EraseRows:
			n, err := db.EraseTenantRows(p.Tenant)
			if err != nil {
				return fmt.Errorf("remove the rows: %w", err)
			}
			log.Info().Int("hooks", n.Hooks).Int("deliveries", n.Deliveries).Int("delivered", n.Delivered).Int("obligations", n.Obligations).
				Int("claim_markers", n.ClaimMarkers).Int("dedupe_keys", n.DedupeKeys).Int("pen_entries", n.PenEntries).
				Int("sources", n.Sources).Int("routes", n.Routes).Msg("tenant erase: rows removed")
			if n.Sources > 0 && x.i.sources != nil {
				x.i.applySources() // the edge and dispatch drop the removed sources
			}
			if x.i.edge != nil {
				x.i.edge.SetRateOverride(p.Tenant, nil) // its override row went in the same batch
			}
			if n.Routes > 0 && x.i.routes != nil {
				if err := x.i.routes.Reload(); err != nil { // the guard drops the removed routes
					return fmt.Errorf("reload the routes: %w", err)
				}
			}
			p.Stage = store.EraseSources
		case store.EraseSources:
			n, err := x.eraseRedisSources(p)
			if err != nil {
				return fmt.Errorf("delete the sources of the Redis source store: %w", err)
			}
			if n > 0 {
				log.Info().Int("sources", n).Msg("tenant erase: Redis sources removed")
			}
			p.Stage = store.EraseClaims
		case store.EraseClaims:
			n, err := x.eraseClaims(p.Tenant)
			if err != nil {
				return fmt.Errorf("delete the claim objects: %w", err)
			}
			log.Info().Int("claim_objects", n).Msg("tenant erase: claim objects removed")
			p.Stage = store.EraseFleet
		case store.EraseFleet:
			if x.i.edge != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := x.i.edge.ForgetTenant(ctx, p.Tenant)
				cancel()
				if err != nil {
					return fmt.Errorf("delete the fleet buckets: %w", err)
				}
			}
			p.Stage = store.EraseCommit
		case store.EraseCommit:
			at := time.Now().UnixMilli()
			_, err := db.CommitAudited(store.AuditEntry{Actor: p.Actor, Client: p.Client, RequestID: p.RequestID,
				Action: "tenant.delete", Subject: "tenant:" + p.Tenant, Tenant: p.Tenant,
				Before: []byte("tenant " + p.Tenant), After: nil,
				// The io.ankusa.tenant.deleted event: flagged in the tombstone's batch, its entity the tenant id.
				Lifecycle: x.i.cfg.LifecycleEnabled(), Entity: tenantEntity(p.Tenant)}, store.EraseOps(p.Tenant, at)...)
			if err != nil {
				return fmt.Errorf("commit the tombstone: %w", err)
			}
			log.Info().Str("actor", p.Actor).Msg("tenant erased")
			return nil
		default:
			return fmt.Errorf("unknown stage %q", p.Stage)
		}
		if err := db.PutEraseProgress(p); err != nil {
			return fmt.Errorf("sync stage %s: %w", p.Stage, err)
		}
		if k := x.i.cfg.Debug.EraseKillStage; k != "" && k == p.Stage {
			x.i.log.Warn().Str("stage", p.Stage).Msg("debug.erase_kill_stage: killing the process")
			killSelf()
		}
	}
}

// eraseRedisSources deletes the tenant's sources of a Redis source store, each as the external change any
// Redis source delete is (a pending audit row, the change, the finished row), on behalf of the erase's actor.
// A source already gone (a resumed job) is passed over.
func (x *eraser) eraseRedisSources(p store.EraseProgress) (int, error) {
	if x.i.redisSources == nil {
		return 0, nil
	}
	all, err := x.i.redisSources.List()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, st := range all {
		if st.Tenant != p.Tenant {
			continue
		}
		c := sources.Change{Audit: store.AuditEntry{Actor: p.Actor, Client: p.Client, RequestID: p.RequestID},
			Lifecycle: x.i.cfg.LifecycleEnabled()}
		if _, err := x.i.sources.Delete(c, st.Tenant, st.Name); err != nil && !errors.Is(err, sources.ErrNotFound) {
			return n, fmt.Errorf("source %s: %w", st.Name, err)
		}
		n++
	}
	return n, nil
}

// claimsDeleteTimeout bounds the claims stage's delete (a bucket listing and its deletes).
const claimsDeleteTimeout = 5 * time.Minute

// eraseClaims deletes every claim-check object of the tenant: the packs under claims/tenant=<t>/ of the claim
// blob store, which every node of the fleet checks in to (so those other nodes checked in go too).
func (x *eraser) eraseClaims(tenant string) (int, error) {
	bs, err := x.i.claimBlob()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), claimsDeleteTimeout)
	defer cancel()
	go func() {
		select {
		case <-x.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return bs.DeletePrefix(ctx, claimcheck.TenantPrefix(tenant))
}

// waitAttempts waits until the tenant has no claimed row (its running attempts ended), at most attemptsWait.
func (x *eraser) waitAttempts(db *store.DB, tenant string) {
	ord, ok := db.TenantOrdinal(tenant)
	if !ok {
		return
	}
	deadline := time.Now().Add(x.attemptsWait())
	for db.TenantCounts(ord).Inflight > 0 && time.Now().Before(deadline) {
		select {
		case <-x.stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// close waits for the running jobs (an instance that stops lets them finish the stage they are in).
func (x *eraser) close() {
	x.once.Do(func() { close(x.stop) })
	x.wg.Wait()
}

// killSelf is debug.erase_kill_stage's crash: SIGKILL, as an operator's kill -9 (no deferred call runs).
func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// resumeWhenOpen resumes the unfinished jobs once the store is open (a boot after a kill -9).
func (x *eraser) resumeWhenOpen() {
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		for x.i.db.Load() == nil {
			select {
			case <-x.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		x.resume()
	}()
}

// tenantEntity is the redacted entity of a tenant's lifecycle event.
func tenantEntity(tenant string) []byte {
	b, _ := json.Marshal(map[string]string{"tenant": tenant})
	return b
}
