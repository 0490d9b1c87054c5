package sources_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sources"
	"github.com/ankusa-go/ankusa/store"
	"github.com/ankusa-go/ankusa/test/services"
)

// redisBackend opens a store and a Redis source backend under a key prefix of the test's own, removed at the end.
func redisBackend(t *testing.T) (*sources.Redis, *store.DB, *redis.Client, string) {
	t.Helper()
	services.Require(t, "Redis", services.RedisAddr)
	db, err := store.Open(store.Options{Dir: t.TempDir(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	prefix := "ankusa:test:sources:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	r := sources.NewRedis(config.FleetStore{Addr: services.RedisAddr, KeyPrefix: prefix}, func() *store.DB { return db })
	rdb := redis.NewClient(&redis.Options{Addr: services.RedisAddr})
	t.Cleanup(func() {
		ctx := context.Background()
		rdb.Del(ctx, prefix+"specs", prefix+"owners", prefix+"version")
		_ = rdb.Close()
		_ = r.Close()
	})
	return r, db, rdb, prefix
}

var errKilled = errors.New("killed between the pending row and the change")

// killAt makes the backend "die" right after its pending row: fn runs (what reached Redis before the kill),
// then the write stops with no change and no finished row, as a kill -9 would leave it.
func killAt(r *sources.Redis, fn func()) {
	r.AfterPending = func() {
		fn()
		panic(errKilled)
	}
}

func putKilled(t *testing.T, set *sources.Set, name, spec string) {
	t.Helper()
	defer func() {
		if p := recover(); p != errKilled {
			t.Fatalf("recovered %v", p)
		}
	}()
	_, _ = set.Put(sources.Change{Audit: store.AuditEntry{Actor: "ops"}}, "acme", name, []byte(spec))
	t.Fatal("the write was not killed")
}

const (
	specA = `{"sinks":[{"type":"log"}]}`
	specB = `{"sinks":[{"type":"log"},{"type":"log"}]}`
)

// Issue 12 acceptance: pending-row verdicts against the real Redis. A node killed between an external change's
// pending row and its finished row leaves the row pending; the next boot settles it by hashing the subject:
// the change reached Redis → ok, it did not → failed, someone else changed it → interrupted.
func TestRedisPendingRowVerdicts(t *testing.T) {
	r, db, rdb, prefix := redisBackend(t)
	cfg := config.Default()
	set := sources.NewSet(cfg, r)
	ctx := context.Background()
	canon := func(s string) string {
		b, err := config.CanonicalSource([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	// ok: the change reached Redis, the node died before finishing the row.
	killAt(r, func() { rdb.HSet(ctx, prefix+"specs", "acme/applied", canon(specA)) })
	putKilled(t, set, "applied", specA)
	// failed: the node died before the change.
	killAt(r, func() {})
	putKilled(t, set, "lost", specA)
	// interrupted: the node died, and someone else wrote another spec meanwhile.
	killAt(r, func() { rdb.HSet(ctx, prefix+"specs", "acme/raced", canon(specB)) })
	putKilled(t, set, "raced", specA)
	r.AfterPending = nil

	pending, err := db.ListAudit(store.AuditFilter{Pending: true}, 10)
	if err != nil || len(pending) != 3 {
		t.Fatalf("pending rows %v, %v", pending, err)
	}
	settled, err := db.SettleAudit(r.Settle, time.Now().Add(time.Second).UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"source:acme/applied": store.AuditOK, "source:acme/lost": store.AuditFailed,
		"source:acme/raced": store.AuditInterrupted}
	for _, row := range settled {
		if row.Status != want[row.Subject] {
			t.Errorf("%s settled %s, want %s", row.Subject, row.Status, want[row.Subject])
		}
		t.Logf("%s: %s", row.Subject, row.Status)
	}
	if len(settled) != 3 {
		t.Fatalf("settled %d rows", len(settled))
	}
}

// A write that completes leaves one finished row, bumps the version a watcher follows, and lists the source.
func TestRedisSourceWriteIsAuditedAndVisible(t *testing.T) {
	r, db, _, _ := redisBackend(t)
	set := sources.NewSet(config.Default(), r)
	v0, err := r.Version()
	if err != nil {
		t.Fatal(err)
	}
	row, err := set.Put(sources.Change{Audit: store.AuditEntry{Actor: "ops"}}, "acme", "gh", []byte(specA))
	if err != nil || row.Status != store.AuditOK || row.Action != "source.create" {
		t.Fatalf("put: %+v, %v", row, err)
	}
	if _, err := set.Put(sources.Change{Audit: store.AuditEntry{Actor: "ops"}}, "acme", "gh", []byte(specA)); !errors.Is(err, store.ErrNoChange) {
		t.Fatalf("same spec again: %v", err)
	}
	if _, err := set.Put(sources.Change{Audit: store.AuditEntry{Actor: "ops"}}, "beta", "gh", []byte(specA)); !errors.Is(err, sources.ErrExists) {
		t.Fatalf("another tenant's id: %v", err)
	}
	if v, _ := r.Version(); v != v0+1 {
		t.Fatalf("version %d after one change from %d", v, v0)
	}
	m, err := set.Sources()
	if err != nil || len(m["gh"].Sinks) != 1 || m["gh"].Tenant != "acme" {
		t.Fatalf("sources %v, %v", m, err)
	}
	if _, err := set.Delete(sources.Change{Audit: store.AuditEntry{Actor: "ops"}}, "acme", "gh"); err != nil {
		t.Fatal(err)
	}
	rows, _ := db.ListAudit(store.AuditFilter{}, 10)
	if len(rows) != 2 || rows[1].Action != "source.delete" || rows[1].Status != store.AuditOK || rows[1].Revision != 2 {
		t.Fatalf("rows %+v", rows)
	}
}

// A Redis that cannot answer is ErrUnavailable (the edge then answers 503, never 404).
func TestRedisDownIsUnavailable(t *testing.T) {
	db, err := store.Open(store.Options{Dir: t.TempDir(), Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := sources.NewRedis(config.FleetStore{Addr: "127.0.0.1:1", KeyPrefix: "x:"}, func() *store.DB { return db })
	defer r.Close()
	set := sources.NewSet(config.Default(), r)
	if _, err := set.Sources(); !errors.Is(err, sources.ErrUnavailable) {
		t.Fatalf("list with Redis down: %v", err)
	}
	if _, err := set.Put(sources.Change{Audit: store.AuditEntry{Actor: "ops"}}, "acme", "gh", []byte(specA)); !errors.Is(err, sources.ErrUnavailable) {
		t.Fatalf("put with Redis down: %v", err)
	}
	if rows, _ := db.ListAudit(store.AuditFilter{}, 10); len(rows) != 0 {
		t.Fatalf("a refused change left rows: %+v", rows)
	}
}

// Inventory A.5 under the Redis source store: the source's rows live in this node's store, so a delete is
// refused while any is waiting (409 counts, the source still in Redis, no audit row), and with DeadLetter the
// source leaves Redis and its waiting rows are dead-lettered ({source_gone, id}).
func TestRedisDeleteChecksTheSourceRows(t *testing.T) {
	r, db, _, _ := redisBackend(t)
	set := sources.NewSet(config.Default(), r)
	c := sources.Change{Audit: store.AuditEntry{Actor: "ops"}}
	if _, err := set.Put(c, "acme", "gh", []byte(specA)); err != nil {
		t.Fatal(err)
	}
	h := store.Hook{ID: [16]byte{1}, ReceivedAt: time.Now().UnixMilli(), Tenant: "acme", Source: "gh", Body: []byte("{}")}
	recs := make([]*store.Record, 2)
	for i := range recs {
		h.ID[1] = byte(i)
		recs[i] = &store.Record{ID: h.ID, Tenant: "acme", Source: "gh", ReceivedAt: h.ReceivedAt, Size: 2,
			Value: store.AppendHook(nil, &h), Sinks: []store.SinkBinding{{Type: "log"}}}
	}
	if _, err := db.CommitHooks(recs); err != nil {
		t.Fatal(err)
	}
	audited, _ := db.ListAudit(store.AuditFilter{}, 100)
	var busy *store.SourceHasDeliveriesError
	if _, err := set.Delete(c, "acme", "gh"); !errors.As(err, &busy) || busy.Pending != 2 || busy.Inflight != 0 {
		t.Fatalf("delete with 2 waiting rows: %v", err)
	}
	if _, err := set.Get("acme", "gh"); err != nil {
		t.Fatalf("the refused delete removed the source: %v", err)
	}
	if rows, _ := db.ListAudit(store.AuditFilter{}, 100); len(rows) != len(audited) {
		t.Fatalf("a refused delete wrote an audit row")
	}
	c.DeadLetter = true
	if _, err := set.Delete(c, "acme", "gh"); err != nil {
		t.Fatal(err)
	}
	if _, err := set.Get("acme", "gh"); !errors.Is(err, sources.ErrNotFound) {
		t.Fatalf("after the delete: %v", err)
	}
	dead, err := db.ListDead("gh", 10)
	if err != nil || len(dead) != 2 || dead[0].Reason != "{source_gone, gh}" {
		t.Fatalf("dead = %+v, %v", dead, err)
	}
	if n, _ := db.CountSourceRows("acme", "gh"); n.Busy() {
		t.Fatalf("rows left: %+v", n)
	}
}
