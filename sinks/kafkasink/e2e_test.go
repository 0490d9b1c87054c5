package kafkasink_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/sinks/kafkasink"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// Design §6: "A sink's nil means the destination confirmed: ... Kafka acks=all". An instance whose source
// names a kafka sink answers 201, and a consumer then reads the hook as Message v1 with the body byte-exact.
// While every produce is refused (NOT_ENOUGH_REPLICAS) a hook still answers 201 and dispatch retries it;
// once the partition accepts again it arrives: nothing acknowledged to the sender is lost.
func TestInstanceDeliversToKafkaAndRetriesThroughAnOutage(t *testing.T) {
	c := kafkasink.NewCluster(t)
	cons := kafkasink.NewConsumer(t, c.ListenAddrs(), kafkasink.TestTopic)
	brokers := make([]any, 0, 3)
	for _, a := range c.ListenAddrs() {
		brokers = append(brokers, a)
	}
	inst := fixture.InstanceWith(t, "kafka-e2e", func(cfg *config.Config) {
		cfg.Admin.Enabled = false
		cfg.Dispatch.Retry = config.Retry{BaseMS: 50, MaxMS: 300, MaxAttempts: 1000}
		cfg.Dispatch.AttemptTimeoutMS = 3000
		cfg.Dispatch.BreakerFailures = 0
		cfg.Sources = map[string]config.Source{"orders": {Tenant: "acme", Sinks: []config.SinkSpec{{Type: "kafka", Options: map[string]any{
			"brokers": brokers, "topic": kafkasink.TestTopic, "produce_timeout_ms": 1000,
		}}}}}
	}, instance.Options{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)})

	arrives := func(id string, body []byte) {
		t.Helper()
		poll.Eventually(t, 20*time.Second, func() error {
			got, err := cons.Bodies(id)
			if err != nil {
				return err
			}
			if len(got) == 0 {
				return fmt.Errorf("hook %s not in the topic yet", id)
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

	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: kafkasink.TestTopic, Err: kerr.NotEnoughReplicas, Count: -1})
	during := []byte(`{"order":43,"during":"outage"}`)
	id := post(t, inst, during)
	// Two refused produce requests at least: the first attempt and a retry by dispatch.
	poll.True(t, 20*time.Second, "produce requests refused during the outage", func() bool { return h.Hits() >= 2 })
	if got, _ := cons.Bodies(id); len(got) != 0 {
		t.Fatalf("hook %s is in the topic while every produce is refused", id)
	}
	h.Remove()
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
