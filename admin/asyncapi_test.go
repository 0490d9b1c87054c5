package admin_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ankusa-go/ankusa/config"
)

// Secrets the sinks of the AsyncAPI tests hold: none may appear in the document.
var asyncSecrets = []string{"hookuser", "hook-pass-0042", "tok-query-secret", "kafka-sasl-secret", "kuser-sasl",
	"rabbit-pass-77", "nats-auth-token-9", "lifecycle-key-secret", "redis-pass-31"}

func asyncSources() map[string]config.Source {
	sink := func(typ string, opts map[string]any) config.SinkSpec {
		return config.SinkSpec{Type: typ, Options: opts}
	}
	return map[string]config.Source{
		// The edge refuses nothing here: these sinks are never reached (no hook is sent).
		"orders": {Tenant: "acme", Sinks: []config.SinkSpec{
			sink("http", map[string]any{"url": "https://hookuser:hook-pass-0042@hooks.example.com/in/orders?token=tok-query-secret"}),
			sink("kafka", map[string]any{"brokers": []any{"127.0.0.1:1"}, "topic": "acme.orders",
				"sasl": map[string]any{"mechanism": "plain", "username": "kuser-sasl", "password": "kafka-sasl-secret"}}),
			{Type: "log"},
		}},
		"billing": {Tenant: "beta", Sinks: []config.SinkSpec{
			sink("rabbitmq", map[string]any{"url": "amqp://guest:rabbit-pass-77@127.0.0.1:1/", "exchange": "hooks"}),
			sink("sqs", map[string]any{"queue_url": "https://sqs.eu-west-1.amazonaws.com/123456789012/billing",
				"region": "eu-west-1"}),
		}},
	}
}

// docRef is a $ref of the document.
type docRef struct {
	Ref string `json:"$ref"`
}

type asyncDocument struct {
	AsyncAPI string                     `json:"asyncapi"`
	Info     map[string]any             `json:"info"`
	Servers  map[string]json.RawMessage `json:"servers"`
	Channels map[string]struct {
		Address  string            `json:"address"`
		Servers  []docRef          `json:"servers"`
		Messages map[string]docRef `json:"messages"`
	} `json:"channels"`
	Operations map[string]struct {
		Action   string
		Channel  docRef
		Messages []docRef
	} `json:"operations"`
	Components struct {
		Schemas  map[string]json.RawMessage `json:"schemas"`
		Messages map[string]struct {
			Headers *docRef         `json:"headers"`
			Payload json.RawMessage `json:"payload"`
		} `json:"messages"`
	} `json:"components"`
}

// fetchAsyncAPI gets the document with token and checks what every document must hold: the AsyncAPI 3.0
// required fields, and every reference (channel to server and message, operation to channel and channel
// message, message to schema) resolving inside the document. No Go AsyncAPI validator is at hand, so this
// structural check stands in for one.
func fetchAsyncAPI(t *testing.T, base, token string) (asyncDocument, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/asyncapi.json", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/asyncapi+json" {
		t.Fatalf("GET /asyncapi.json: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	var doc asyncDocument
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	if doc.AsyncAPI != "3.0.0" || doc.Info["title"] == "" || doc.Info["version"] == "" {
		t.Fatalf("top level: asyncapi %q info %v", doc.AsyncAPI, doc.Info)
	}
	for id, ch := range doc.Channels {
		if len(ch.Messages) == 0 {
			t.Fatalf("channel %s has no message", id)
		}
		for _, s := range ch.Servers {
			if _, ok := doc.Servers[strings.TrimPrefix(s.Ref, "#/servers/")]; !ok {
				t.Fatalf("channel %s names server %s the document lacks", id, s.Ref)
			}
		}
		for name, m := range ch.Messages {
			cm, ok := doc.Components.Messages[strings.TrimPrefix(m.Ref, "#/components/messages/")]
			if !ok {
				t.Fatalf("channel %s message %s: %s is not defined", id, name, m.Ref)
			}
			if cm.Headers != nil {
				if _, ok := doc.Components.Schemas[strings.TrimPrefix(cm.Headers.Ref, "#/components/schemas/")]; !ok {
					t.Fatalf("message %s: headers %s not defined", m.Ref, cm.Headers.Ref)
				}
			}
			for _, r := range strings.Split(string(cm.Payload), `"$ref":"`)[1:] {
				r = r[:strings.IndexByte(r, '"')]
				if _, ok := doc.Components.Schemas[strings.TrimPrefix(r, "#/components/schemas/")]; !ok {
					t.Fatalf("message %s: payload names %s, not defined", m.Ref, r)
				}
			}
		}
	}
	if len(doc.Operations) != len(doc.Channels) {
		t.Fatalf("%d operations for %d channels", len(doc.Operations), len(doc.Channels))
	}
	for id, op := range doc.Operations {
		chID := strings.TrimPrefix(op.Channel.Ref, "#/channels/")
		ch, ok := doc.Channels[chID]
		if op.Action != "send" || !ok || len(op.Messages) != len(ch.Messages) {
			t.Fatalf("operation %s: %+v", id, op)
		}
		for _, m := range op.Messages {
			if _, ok := ch.Messages[strings.TrimPrefix(m.Ref, op.Channel.Ref+"/messages/")]; !ok {
				t.Fatalf("operation %s: message %s is not its channel's", id, m.Ref)
			}
		}
	}
	return doc, string(raw)
}

// addresses lists "address <- publishers" of every channel, sorted.
func addresses(doc asyncDocument) []string {
	var out []string
	for _, ch := range doc.Channels {
		var pubs []string
		for name := range ch.Messages {
			pubs = append(pubs, name)
		}
		slices.Sort(pubs)
		out = append(out, ch.Address+" <- "+strings.Join(pubs, ","))
	}
	slices.Sort(out)
	return out
}

// Inventory A.5/H.5: GET /asyncapi.json is the AsyncAPI 3.0 document of the channels the node publishes to,
// one per sink destination of every source (an API-created one at once, without a restart) and of
// lifecycle.sinks, with no credential of any sink; a tenant-scoped principal sees its tenants' channels only.
func TestAsyncAPIDocument(t *testing.T) {
	inst := startAdmin(t, "asyncapi", func(cfg *config.Config) {
		cfg.Sources = asyncSources()
		cfg.Lifecycle.Sinks = []config.SinkSpec{{Type: "http", Options: map[string]any{
			"url": "http://127.0.0.1:1/lifecycle", "headers": map[string]any{"X-Api-Key": "lifecycle-key-secret"}}}}
	})
	base := "http://" + inst.AdminAddr()
	call(t, "GET", base+"/asyncapi.json", "", nil).want(t, "no token", http.StatusUnauthorized, "unauthorized")
	call(t, "GET", base+"/asyncapi.json", scraperTok, nil).want(t, "no config:read", http.StatusForbidden, "forbidden")

	doc, raw := fetchAsyncAPI(t, base, opsToken)
	want := []string{
		"/in/orders <- orders",            // http: host+path, no userinfo, no query
		"/lifecycle <- ankusa.lifecycle",  // lifecycle.sinks
		"acme.orders <- orders",           // kafka topic
		"hooks/ankusa.billing <- billing", // rabbitmq exchange/routing key (default key, filled per source)
		"https://sqs.eu-west-1.amazonaws.com/123456789012/billing <- billing",
	}
	if got := addresses(doc); !slices.Equal(got, want) {
		t.Fatalf("channels\n got %q\nwant %q", got, want)
	}

	// A source created through the API is in the next document.
	spec := `{"sinks":[{"type":"nats","servers":"nats://127.0.0.1:1","subject":"beta.events","auth":{"token":"nats-auth-token-9"}},` +
		`{"type":"redis","url":"redis://:redis-pass-31@127.0.0.1:1/0","channel":"beta-live"}]}`
	call(t, "PUT", base+"/v1/tenants/beta/sources/events", opsToken, json.RawMessage(spec)).want(t, "create", http.StatusCreated, "")
	doc, raw2 := fetchAsyncAPI(t, base, opsToken)
	want = slices.Insert(want, 1, "beta-live <- events", "beta.events <- events")
	slices.Sort(want)
	if got := addresses(doc); !slices.Equal(got, want) {
		t.Fatalf("channels after the API create\n got %q\nwant %q", got, want)
	}
	for _, s := range asyncSecrets {
		if strings.Contains(raw, s) || strings.Contains(raw2, s) {
			t.Fatalf("the document shows %q", s)
		}
	}
	if _, again := fetchAsyncAPI(t, base, opsToken); again != raw2 {
		t.Fatal("two fetches of the same sinks differ")
	}
	t.Logf("%d channels, %d servers, %d messages, %d bytes; no secret", len(doc.Channels), len(doc.Servers),
		len(doc.Components.Messages), len(raw2))

	// reader: config:read on tenant acme only; no lifecycle channel (its events span every tenant).
	doc, _ = fetchAsyncAPI(t, base, readerToken)
	want = []string{"/in/orders <- orders", "acme.orders <- orders"}
	if got := addresses(doc); !slices.Equal(got, want) {
		t.Fatalf("tenant-scoped channels\n got %q\nwant %q", got, want)
	}
}
