package sources

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/store"
)

// Redis is the backend of source_store.type redis: the sources of a fleet in a shared Redis (hash
// <prefix>specs: "<tenant>/<name>" → spec; hash <prefix>owners: name → tenant; <prefix>version counts
// changes). A change there is external to this node's store, so it is audited as a dual write: a synced
// pending row (store.DB.BeginAudit), the change, the row finished ok or failed. A node killed in between
// leaves the row pending and the next boot settles it (Settle).
type Redis struct {
	rdb     *redis.Client
	prefix  string
	timeout time.Duration
	// DB returns this node's open store, where the audit rows go.
	DB func() *store.DB
	// AfterPending lets tests kill the node between the pending row and the change; nil in production.
	AfterPending func()
}

// RedisTimeout bounds one call to the source store's Redis.
const RedisTimeout = 2 * time.Second

// NewRedis returns the backend of cfg (source_store.redis).
func NewRedis(cfg config.FleetStore, db func() *store.DB) *Redis {
	rdb := redis.NewClient(&redis.Options{
		Addr: cfg.Addr, DB: cfg.DB, Password: cfg.Password, DialTimeout: RedisTimeout, ReadTimeout: RedisTimeout,
		WriteTimeout: RedisTimeout, ContextTimeoutEnabled: true, MaxRetries: 1, DisableIdentity: true,
	})
	return &Redis{rdb: rdb, prefix: cfg.KeyPrefix, timeout: RedisTimeout, DB: db}
}

// Close closes the client's connections.
func (r *Redis) Close() error { return r.rdb.Close() }

// Kind implements Backend.
func (r *Redis) Kind() string { return KindRedis }

func (r *Redis) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), r.timeout)
}

func field(tenant, name string) string { return tenant + "/" + name }

// List implements Backend.
func (r *Redis) List() ([]store.StoredSource, error) {
	ctx, cancel := r.ctx()
	defer cancel()
	m, err := r.rdb.HGetAll(ctx, r.prefix+"specs").Result()
	if err != nil {
		return nil, fmt.Errorf("redis source store: %w", err)
	}
	out := make([]store.StoredSource, 0, len(m))
	for f, spec := range m {
		tenant, name, ok := strings.Cut(f, "/")
		if !ok {
			continue
		}
		out = append(out, store.StoredSource{Tenant: tenant, Name: name, Spec: []byte(spec)})
	}
	return out, nil
}

// Version is the change counter every write increments (a watcher reloads when it moves).
func (r *Redis) Version() (int64, error) {
	ctx, cancel := r.ctx()
	defer cancel()
	v, err := r.rdb.Get(ctx, r.prefix+"version").Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// spec reads tenant/name's spec (nil when absent).
func (r *Redis) spec(tenant, name string) ([]byte, error) {
	ctx, cancel := r.ctx()
	defer cancel()
	v, err := r.rdb.HGet(ctx, r.prefix+"specs", field(tenant, name)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, err
}

// Put implements Backend.
func (r *Redis) Put(c Change, tenant, name string, spec []byte) (store.AuditRow, error) {
	ctx, cancel := r.ctx()
	defer cancel()
	owner, err := r.rdb.HGet(ctx, r.prefix+"owners", name).Result()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return store.AuditRow{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case owner != tenant:
		return store.AuditRow{}, ErrExists
	}
	prev, err := r.spec(tenant, name)
	if err != nil {
		return store.AuditRow{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	action := "source.update"
	if prev == nil {
		action = "source.create"
	}
	return r.dual(c, action, tenant, name, prev, spec, func(ctx context.Context, p redis.Pipeliner) {
		p.HSet(ctx, r.prefix+"specs", field(tenant, name), spec)
		p.HSet(ctx, r.prefix+"owners", name, tenant)
	})
}

// Delete implements Backend.
func (r *Redis) Delete(c Change, tenant, name string) (store.AuditRow, error) {
	prev, err := r.spec(tenant, name)
	if err != nil {
		return store.AuditRow{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if prev == nil {
		return store.AuditRow{}, ErrNotFound
	}
	// The source's rows live in this node's store: counted before the change (refused while any is left,
	// unless c.DeadLetter), buried after it. A hook accepted between the two is dead-lettered by dispatch
	// when it finds the source gone: no row is lost either way.
	db := r.DB()
	if db == nil {
		return store.AuditRow{}, ErrUnavailable
	}
	n, err := db.CountSourceRows(tenant, name)
	if err != nil {
		return store.AuditRow{}, err
	}
	if n.Busy() && !c.DeadLetter {
		return store.AuditRow{}, &store.SourceHasDeliveriesError{SourceRows: n}
	}
	row, err := r.dual(c, "source.delete", tenant, name, prev, nil, func(ctx context.Context, p redis.Pipeliner) {
		p.HDel(ctx, r.prefix+"specs", field(tenant, name))
		p.HDel(ctx, r.prefix+"owners", name)
	})
	if err != nil || !c.DeadLetter {
		return row, err
	}
	if _, err := db.BurySourceRows(tenant, name, store.SourceGoneReason(name), time.Now().UnixMilli()); err != nil {
		// The source is gone: its rows left waiting are dead-lettered by dispatch when it claims them.
		return row, fmt.Errorf("source deleted; its waiting rows not yet dead-lettered: %w", err)
	}
	return row, nil
}

// dual is the audited dual write: the pending row (synced), the change in one MULTI with the version bump,
// the finished row. A pending row that cannot be written refuses the change; a change Redis refuses finishes
// the row failed and is ErrUnavailable.
func (r *Redis) dual(c Change, action, tenant, name string, before, after []byte,
	change func(context.Context, redis.Pipeliner)) (store.AuditRow, error) {
	db := r.DB()
	if db == nil {
		return store.AuditRow{}, ErrUnavailable
	}
	e := c.Audit
	e.Action, e.Subject, e.Tenant, e.Before, e.After, e.Lifecycle = action, Subject(tenant, name), tenant, before, after, c.Lifecycle
	row, err := db.BeginAudit(e)
	if err != nil {
		return row, err
	}
	if r.AfterPending != nil {
		r.AfterPending()
	}
	ctx, cancel := r.ctx()
	defer cancel()
	_, cerr := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		change(ctx, p)
		p.Incr(ctx, r.prefix+"version")
		return nil
	})
	status := store.AuditOK
	if cerr != nil {
		status = store.AuditFailed
	}
	// A row that cannot be finished stays pending and is settled at the next boot.
	row, _ = db.FinishAudit(row, status)
	if cerr != nil {
		return row, fmt.Errorf("%w: %w", ErrUnavailable, cerr)
	}
	return row, nil
}

// Settle is the store.SubjectState of the rows this backend leaves pending: a source's current spec in Redis
// (known); any other subject is not known here.
func (r *Redis) Settle(row store.AuditRow) ([]byte, bool, error) {
	rest, ok := strings.CutPrefix(row.Subject, "source:")
	if !ok {
		return nil, false, nil
	}
	tenant, name, ok := strings.Cut(rest, "/")
	if !ok {
		return nil, false, nil
	}
	spec, err := r.spec(tenant, name)
	return spec, err == nil, err
}

// Watch calls changed whenever the version counter moves, or Redis answers again after failing (and fail
// while it does not), every interval until stop closes. Run it on a task.Group goroutine.
func (r *Redis) Watch(stop <-chan struct{}, interval time.Duration, changed func(), fail func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	last, failing := int64(-1), false
	for {
		v, err := r.Version()
		switch {
		case err != nil:
			failing = true
			fail(err)
		case failing || v != last:
			failing, last = false, v
			changed()
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}
