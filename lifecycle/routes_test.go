package lifecycle

import (
	"bytes"
	"testing"

	"github.com/ankusa-go/ankusa/routes"
	"github.com/ankusa-go/ankusa/routes/registry"
	"github.com/ankusa-go/ankusa/store"
)

// Inventory F.8: types "io.ankusa.route.{created,updated,deleted}"; design (Lifecycle events): "the audit row
// of a source or route change is flagged for publication and committed in the same synced batch as the
// change, with its redacted entity beside it", delivered in commit order with the subject's revision.
func TestRouteChangesArePublished(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	r := newRecorder(t, 1) // the first delivery fails: the event is retried, not lost
	m := &nopMetrics{}
	stop := start(t, db, r, m)
	defer stop()
	reg := registry.New(registry.Options{DB: func() *store.DB { return db }, Table: routes.NewTable(), Max: 10,
		Lifecycle: true})
	if err := reg.Load(); err != nil {
		t.Fatal(err)
	}
	c := registry.Change{Audit: store.AuditEntry{Actor: "ops", RequestID: "r"}}
	if _, _, err := reg.Create(c, routes.Spec{ID: "gh", Path: "/webhooks/github", Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reg.Update(c, "gh", func(s *routes.Spec) error { s.Methods = []string{"PUT"}; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Delete(c, "gh"); err != nil {
		t.Fatal(err)
	}
	// The global rules are audited but publish nothing.
	if _, _, err := reg.SetIPRules(c, routes.RulesSpec{Default: "deny"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 events", func() bool { return len(r.events()) >= 4 }) // 3 + the failed first attempt
	var got []Event
	for _, ev := range r.events() {
		if len(got) == 0 || got[len(got)-1].ID != ev.ID {
			got = append(got, ev)
		}
	}
	types := []string{"io.ankusa.route.created", "io.ankusa.route.updated", "io.ankusa.route.deleted"}
	if len(got) != 3 {
		t.Fatalf("%d distinct events, want 3: %+v", len(got), got)
	}
	for i, ev := range got {
		if ev.Type != types[i] || ev.Subject != "route:gh" || ev.Revision != uint64(i+1) || ev.Tenant != "acme" ||
			!bytes.Contains(ev.Data, []byte(`"path":"/webhooks/github"`)) {
			t.Fatalf("event %d: %+v data %s", i, ev, ev.Data)
		}
		t.Logf("event %d: id=%s type=%s revision=%d", i, ev.ID, ev.Type, ev.Revision)
	}
}
