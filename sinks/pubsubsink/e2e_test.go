package pubsubsink_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/sinks/pubsubsink"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// Design §6: "A sink's nil means the destination confirmed: ... SQS/PubSub publish result". A running
// instance whose source names a google_pubsub sink answers 201 and the topic then holds the hook as Message
// v1, body byte-exact.
func TestInstanceDeliversToPubSub(t *testing.T) {
	addr, messages := pubsubsink.PstestTopic(t, "e2e")
	inst := fixture.InstanceWith(t, "pubsub-e2e", func(cfg *config.Config) {
		cfg.Admin.Enabled = false
		cfg.Sources = map[string]config.Source{"orders": {Tenant: "acme", Sinks: []config.SinkSpec{{Type: "google_pubsub", Options: map[string]any{
			"project": pubsubsink.Project, "topic": "e2e", "endpoint": addr, "auth": "none",
		}}}}}
	}, instance.Options{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)})

	body := []byte("{\"order\":42}\x00\xff")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Post("http://"+inst.IngestAddr()+"/webhooks/orders", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var ack struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&ack)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || ack.ID == "" {
		t.Fatalf("POST answered %d (id %q), want 201", resp.StatusCode, ack.ID)
	}
	var got *message.Message
	poll.Eventually(t, 10*time.Second, func() error {
		for _, data := range messages() {
			dec, err := message.Decode(data)
			if err != nil {
				return fmt.Errorf("topic holds a message that is not Message v1: %w", err)
			}
			if dec.ID == ack.ID {
				got = dec
				return nil
			}
		}
		return fmt.Errorf("hook %s not published yet", ack.ID)
	})
	if !bytes.Equal(got.Body(), body) || got.SourceID != "orders" || got.TenantID != "acme" || got.Instance != "pubsub-e2e" {
		t.Fatalf("published message: %+v, body %q", got, got.Body())
	}
}
