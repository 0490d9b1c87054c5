package edge

import (
	"errors"
	"testing"

	"github.com/ankusa-go/ankusa/config"
)

// Seed, Source store: "a source store that cannot answer makes ingest 503, never 404" — and a changed
// API-managed source is taken without a restart.
func TestLayeredSourcesUnavailableIsNeverUnknown(t *testing.T) {
	static, err := NewStaticSources(map[string]config.Source{"file": {Tenant: "acme", Sinks: []config.SinkSpec{{Type: "log"}}}})
	if err != nil {
		t.Fatal(err)
	}
	l := NewLayeredSources(static)
	if _, err := l.Lookup([]byte("api")); !errors.Is(err, ErrSourcesUnavailable) {
		t.Fatalf("before the first load: %v", err)
	}
	if _, err := l.Lookup([]byte("file")); err != nil {
		t.Fatalf("a file source before the first load: %v", err)
	}
	if err := l.Set(map[string]config.Source{"api": {Tenant: "acme", Sinks: []config.SinkSpec{{Type: "log"}}}}); err != nil {
		t.Fatal(err)
	}
	if src, err := l.Lookup([]byte("api")); err != nil || src.Tenant != "acme" {
		t.Fatalf("after Set: %v, %v", src, err)
	}
	if _, err := l.Lookup([]byte("nope")); !errors.Is(err, ErrUnknownSource) {
		t.Fatalf("unknown: %v", err)
	}
	l.Fail(errors.New("redis: connection refused"))
	for _, id := range []string{"api", "nope"} {
		if _, err := l.Lookup([]byte(id)); !errors.Is(err, ErrSourcesUnavailable) {
			t.Fatalf("%s while the store is down: %v", id, err)
		}
	}
	if _, err := l.Lookup([]byte("file")); err != nil {
		t.Fatalf("a file source while the store is down: %v", err)
	}
}
