package admin_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/test/fixture"
)

var client = &http.Client{Timeout: 10 * time.Second}

func startAdmin(t *testing.T, name string, mutate func(*config.Config)) *instance.Instance {
	t.Helper()
	return fixture.Instance(t, name, func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge", "dispatch"}
		cfg.Sources = map[string]config.Source{"sample": fixture.LogSource("default", 1)}
		if mutate != nil {
			mutate(cfg)
		}
	}, nil)
}

func getJSON(t *testing.T, url string, header http.Header) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// Inventory A.4: /health on the admin port answers {status, instance, roles, version}; /ready reports the store.
func TestHealthAndReadyNeedNoCredentials(t *testing.T) {
	inst := startAdmin(t, "probe", nil)
	base := "http://" + inst.AdminAddr()
	status, body := getJSON(t, base+"/health", nil)
	if status != http.StatusOK || body["status"] != "ok" || body["instance"] != "probe" || body["roles"] == nil {
		t.Fatalf("/health: %d %v", status, body)
	}
	status, body = getJSON(t, base+"/ready", nil)
	if status != http.StatusOK || body["store"] != "ok" {
		t.Fatalf("/ready: %d %v", status, body)
	}
}
