package edge

import (
	"testing"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/store"
)

// Issue 8 item 12: store_headers drops every header on the one credential list the sinks' forward filter
// uses (sinks.CredentialHeaders; sinks/credentials_test.go proves the sink side), x-gitlab-token included.
func TestStoreHeadersUseTheSinksCredentialList(t *testing.T) {
	for _, name := range append([]string{"x-gitlab-token"}, sinks.CredentialHeaders...) {
		in := []store.Header{{Name: name, Value: "s3cret"}, {Name: "x-event", Value: "push"}}
		kept, _ := NewHeaderPolicy(config.StoreHeaders{}, nil).Apply(in, nil)
		if len(kept) != 1 || kept[0].Name != "x-event" {
			t.Errorf("%s: store_headers kept %v", name, kept)
		}
	}
}
