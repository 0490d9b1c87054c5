package admin_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/ankusa-go/ankusa/admin"
	"github.com/ankusa-go/ankusa/config"
)

// Issue 12: "The OpenAPI document validates (a Go OpenAPI library in a test) and every route the router serves
// is in it, and the reverse."
func TestOpenAPIDocumentMatchesTheRouter(t *testing.T) {
	raw, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the document does not validate: %v", err)
	}
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(documented)
	// Both views of the router: with and without admin.metrics_auth (the scope changes, not the route).
	for _, auth := range []bool{false, true} {
		cfg := &config.Config{Admin: config.Admin{MetricsAuth: auth}}
		if served := admin.Patterns(&admin.Deps{Config: cfg}); !slices.Equal(served, documented) {
			t.Fatalf("router and document differ:\nserved     %v\ndocumented %v", served, documented)
		}
	}
}

// The document is served, unauthenticated, byte for byte the embedded file.
func TestOpenAPIDocumentIsServed(t *testing.T) {
	inst := startAdmin(t, "doc", nil)
	resp, err := client.Get("http://" + inst.AdminAddr() + "/v1/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	want, _ := os.ReadFile("openapi.yaml")
	if resp.StatusCode != http.StatusOK || string(got) != string(want) || !strings.HasPrefix(string(got), "openapi: 3") {
		t.Fatalf("GET /v1/openapi.yaml: %d, %d bytes (file %d)", resp.StatusCode, len(got), len(want))
	}
}
