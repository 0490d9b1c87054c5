package rabbitsink_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/sinks/rabbitsink"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// Design §6: "A sink's nil means the destination confirmed: ... RabbitMQ publisher confirm (mandatory)". An
// instance whose source names a rabbitmq sink answers 201 and a consumer of the bound queue gets the hook as
// Message v1, body byte-exact. With the queue gone a hook still answers 201, every attempt is unroutable and
// retried by dispatch; once a queue is bound again the hook arrives: nothing is lost.
func TestInstanceDeliversToRabbitMQAndRetriesUntilRouted(t *testing.T) {
	b := rabbitsink.NewBroker(t)
	inst := fixture.InstanceWith(t, "rabbit-e2e", func(cfg *config.Config) {
		cfg.Admin.Enabled = false
		cfg.Dispatch.Retry = config.Retry{BaseMS: 50, MaxMS: 300, MaxAttempts: 1000}
		cfg.Dispatch.AttemptTimeoutMS = 3000
		cfg.Dispatch.BreakerFailures = 0
		cfg.Sources = map[string]config.Source{"orders": {Tenant: "acme", Sinks: []config.SinkSpec{{Type: "rabbitmq", Options: map[string]any{
			"url": b.URL(), "exchange": b.Exchange(), "exchange_type": "topic",
		}}}}}
	}, instance.Options{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)})

	arrives := func(id string, body []byte) {
		t.Helper()
		poll.Eventually(t, 20*time.Second, func() error {
			got, err := b.Bodies(id)
			if err != nil {
				return err
			}
			if len(got) == 0 {
				return fmt.Errorf("hook %s not in the queue yet", id)
			}
			for _, g := range got {
				if !bytes.Equal(g, body) {
					return fmt.Errorf("hook %s arrived with %d bytes, not the %d sent", id, len(g), len(body))
				}
			}
			return nil
		})
	}

	body := []byte(`{"order":42,"note":"caf\u00e9"}` + "\x00\xff")
	arrives(post(t, inst, body), body)

	b.DeleteQueue()
	during := []byte(`{"order":43,"while":"no queue is bound"}`)
	id := post(t, inst, during)
	// Dispatch retries: two unroutable attempts at least before a queue is bound again.
	retried := inst.Telemetry().Metrics.Dispatch.Deliveries.WithLabelValues(telemetry.ResultRetry, "rabbitmq")
	poll.True(t, 20*time.Second, "two unroutable attempts retried", func() bool { return testutil.ToFloat64(retried) >= 2 })
	b.DeclareQueue()
	arrives(id, during)
}

func post(t *testing.T, inst *instance.Instance, body []byte) string {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Post("http://"+inst.IngestAddr()+"/webhooks/orders", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ack struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&ack)
	if resp.StatusCode != http.StatusCreated || ack.ID == "" {
		t.Fatalf("POST answered %d (id %q), want 201", resp.StatusCode, ack.ID)
	}
	return ack.ID
}
