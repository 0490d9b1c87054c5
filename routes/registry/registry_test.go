package registry_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"testing"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/routes"
	"github.com/ankusa-go/ankusa/routes/registry"
	"github.com/ankusa-go/ankusa/store"
)

func openStore(t testing.TB, dir string) *store.DB {
	t.Helper()
	db, err := store.Open(store.Options{Dir: dir, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

type fixture struct {
	db    *store.DB
	table *routes.Table
	reg   *registry.Registry
	size  int
}

func newFixture(t *testing.T, dir string, o registry.Options) *fixture {
	t.Helper()
	f := &fixture{db: openStore(t, dir), table: routes.NewTable()}
	t.Cleanup(func() { _ = f.db.Close() })
	o.DB, o.Table = func() *store.DB { return f.db }, f.table
	if o.Max == 0 {
		o.Max = 100
	}
	o.Changed = func(n int) { f.size = n }
	f.reg = registry.New(o)
	if err := f.reg.Load(); err != nil {
		t.Fatal(err)
	}
	return f
}

func rows(t *testing.T, db *store.DB) []store.AuditRow {
	t.Helper()
	r, err := db.ListAudit(store.AuditFilter{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var by = registry.Change{Audit: store.AuditEntry{Actor: "ops", Client: "127.0.0.1:1", RequestID: "r1"}}

func allowed(s *routes.Snapshot, path string) bool {
	return s.Decide([]byte("POST"), []byte(path), netip.MustParseAddr("192.0.2.1")).Allow
}

// Design (Audit trail): "Every change ... to a route, the global IP rules ... leaves one row ... A request that
// changes nothing writes no row." (Lifecycle events): "the audit row of a source or route change is flagged
// for publication and committed in the same synced batch as the change, with its redacted entity beside it".
func TestRouteChangesAuditedOnceEach(t *testing.T) {
	f := newFixture(t, t.TempDir(), registry.Options{Lifecycle: true})
	r, row, err := f.reg.Create(by, routes.Spec{ID: "github", Path: "/webhooks/github"})
	if err != nil {
		t.Fatal(err)
	}
	if row.Action != "route.create" || row.Subject != "route:github" || !row.Lifecycle || r.Revision != 1 || row.Revision != 1 {
		t.Fatalf("create row %+v route %+v", row, r)
	}
	if !allowed(f.table.Load(), "/webhooks/github") || f.size != 1 {
		t.Fatal("the created route is not in the published table")
	}
	ent, err := f.db.AuditEntity(row.Seq)
	if err != nil || !bytes.Contains(ent, []byte(`"path":"/webhooks/github"`)) {
		t.Fatalf("entity %s %v", ent, err)
	}
	// The same spec again: no row, nothing published.
	if _, _, _, err := f.reg.Put(by, routes.Spec{ID: "github", Path: "/webhooks/github"}); !errors.Is(err, store.ErrNoChange) {
		t.Fatalf("no-op put: %v", err)
	}
	if _, _, err := f.reg.Update(by, "github", func(s *routes.Spec) error { s.Methods = []string{"POST"}; return nil }); !errors.Is(err, store.ErrNoChange) {
		t.Fatalf("no-op update: %v", err)
	}
	r, row, err = f.reg.Update(by, "github", func(s *routes.Spec) error { s.Methods = []string{"PUT"}; return nil })
	if err != nil || row.Action != "route.update" || r.Revision != 2 || r.InsertedAt == 0 {
		t.Fatalf("update: %+v %+v %v", row, r, err)
	}
	if allowed(f.table.Load(), "/webhooks/github") {
		t.Fatal("POST still allowed after the route became PUT only")
	}
	if _, err := f.reg.Delete(by, "github"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reg.Delete(by, "github"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	// Global IP rules: a change is a row, the same rules again none.
	deny := routes.RulesSpec{Default: "allow", Rules: []routes.RuleSpec{{Action: "deny", CIDR: "203.0.113.0/24"}}}
	if _, row, err := f.reg.SetIPRules(by, deny); err != nil || row.Action != "ip_rules.update" {
		t.Fatalf("ip rules: %+v %v", row, err)
	}
	if _, _, err := f.reg.SetIPRules(by, deny); !errors.Is(err, store.ErrNoChange) {
		t.Fatalf("no-op ip rules: %v", err)
	}
	var actions []string
	for _, r := range rows(t, f.db) {
		actions = append(actions, r.Action)
	}
	want := []string{"route.create", "route.update", "route.delete", "ip_rules.update"}
	if len(actions) != len(want) {
		t.Fatalf("rows %v, want %v", actions, want)
	}
	for i := range want {
		if actions[i] != want[i] {
			t.Fatalf("rows %v, want %v", actions, want)
		}
	}
}

// Inventory A.6: "Two enabled routes may not share path+method. Past max_routes → 409." A refused change
// writes nothing.
func TestConflictAndLimitRefusedBeforeAnyWrite(t *testing.T) {
	f := newFixture(t, t.TempDir(), registry.Options{Max: 2})
	if _, _, err := f.reg.Create(by, routes.Spec{ID: "a", Path: "/h/:x"}); err != nil {
		t.Fatal(err)
	}
	var ce *routes.ConflictError
	if _, _, err := f.reg.Create(by, routes.Spec{ID: "b", Path: "/h/:y"}); !errors.As(err, &ce) {
		t.Fatalf("conflict: %v", err)
	}
	off := false
	if _, _, err := f.reg.Create(by, routes.Spec{ID: "b", Path: "/h/:y", Enabled: &off}); err != nil {
		t.Fatalf("a disabled twin: %v", err)
	}
	if _, _, err := f.reg.Create(by, routes.Spec{ID: "c", Path: "/c"}); !errors.Is(err, registry.ErrLimit) {
		t.Fatalf("limit: %v", err)
	}
	if _, _, err := f.reg.Create(by, routes.Spec{ID: "a", Path: "/other"}); !errors.Is(err, registry.ErrExists) {
		t.Fatalf("exists: %v", err)
	}
	if _, _, err := f.reg.Update(by, "b", func(s *routes.Spec) error { on := true; s.Enabled = &on; return nil }); !errors.As(err, &ce) {
		t.Fatalf("enabling the twin: %v", err)
	}
	if n := len(rows(t, f.db)); n != 2 {
		t.Fatalf("%d audit rows, want 2 (the refused changes wrote none)", n)
	}
}

// A route created through the registry is in the table of a node restarted on the same store, and a seed
// never overwrites it.
func TestRoutesSurviveRestartAndSeedOnlyFillsGaps(t *testing.T) {
	dir := t.TempDir()
	db := openStore(t, dir)
	reg := registry.New(registry.Options{DB: func() *store.DB { return db }, Table: routes.NewTable(), Max: 10})
	if err := reg.Load(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reg.Create(by, routes.Spec{ID: "a", Path: "/from-api"}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, dir, registry.Options{Seed: []routes.Spec{{ID: "a", Path: "/from-seed"}, {ID: "s", Path: "/seeded"}}})
	snap := f.table.Load()
	if !allowed(snap, "/from-api") || allowed(snap, "/from-seed") || !allowed(snap, "/seeded") {
		t.Fatalf("after restart: %+v", snap.List())
	}
	last := rows(t, f.db)
	if a := last[len(last)-1]; a.Action != "route.create" || a.Actor != "system" || a.Subject != "route:s" {
		t.Fatalf("seed row %+v", a)
	}
}

// Design (Tenant erase): the erase "removes its sources, routes, override, ...".
func TestTenantEraseRemovesItsRoutes(t *testing.T) {
	f := newFixture(t, t.TempDir(), registry.Options{})
	acme := registry.Change{Audit: by.Audit, Sees: func(t string) bool { return t == "acme" }}
	if _, _, err := f.reg.Create(acme, routes.Spec{ID: "node", Path: "/node"}); !errors.Is(err, registry.ErrForbidden) {
		t.Fatalf("a tenant principal created a node route: %v", err)
	}
	if _, _, err := f.reg.Create(acme, routes.Spec{ID: "acme-hooks", Path: "/acme", Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.reg.Create(by, routes.Spec{ID: "node", Path: "/node"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reg.Get(acme, "node"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("a tenant principal sees a node route: %v", err)
	}
	x, err := f.db.EraseTenantRows("acme")
	if err != nil || x.Routes != 1 {
		t.Fatalf("erase: %+v %v", x, err)
	}
	if err := f.reg.Reload(); err != nil {
		t.Fatal(err)
	}
	snap := f.table.Load()
	if snap.Get("acme-hooks") != nil || snap.Get("node") == nil {
		t.Fatalf("after erase: %+v", snap.List())
	}
	if err := f.db.ForEachKey(func(cf string, k, _ []byte) error {
		if cf == "default" && bytes.Contains(k, []byte("acme")) && !bytes.HasPrefix(k, []byte("v:")) {
			t.Errorf("key %q left after the erase", k)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestStoredRouteValueIsJSON(t *testing.T) {
	f := newFixture(t, t.TempDir(), registry.Options{})
	if _, _, err := f.reg.Create(by, routes.Spec{ID: "a", Path: "/a", Metadata: map[string]string{"team": "payments"}}); err != nil {
		t.Fatal(err)
	}
	list, err := f.db.ListRoutes()
	if err != nil || len(list) != 1 {
		t.Fatal(list, err)
	}
	var v map[string]any
	if err := json.Unmarshal(list[0].Value, &v); err != nil || v["revision"].(float64) != 1 {
		t.Fatalf("%s %v", list[0].Value, err)
	}
}
