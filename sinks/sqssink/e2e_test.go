package sqssink_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/sinks/message"
	"github.com/ankusa-go/ankusa/sinks/sqssink"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

// Design §6: "A sink's nil means the destination confirmed: ... SQS publish result". A running instance
// whose source names an sqs sink answers 201 and the queue then holds the hook as Message v1, body
// byte-exact.
func TestInstanceDeliversToSQS(t *testing.T) {
	c := sqssink.NewConsumer(t)
	q := c.CreateQueue(t, "e2e", nil)
	inst := fixture.InstanceWith(t, "sqs-e2e", func(cfg *config.Config) {
		cfg.Admin.Enabled = false
		cfg.Sources = map[string]config.Source{"orders": {Tenant: "acme", Sinks: []config.SinkSpec{{Type: "sqs", Options: map[string]any{
			"queue_url": q, "endpoint": sqssink.GoawsURL(),
			"credentials": map[string]any{"access_key_id": "test", "secret_access_key": "test"},
		}}}}}
	}, instance.Options{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.ErrorLevel)})

	body := []byte(`{"order":42,"note":"caf\u00e9 \u2028 \\ \"quoted\""}` + "\x00\xff")
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
		for _, m := range c.Drain(t, q) {
			dec, err := message.Decode([]byte(aws.ToString(m.Body)))
			if err != nil {
				return fmt.Errorf("queue holds a message that is not Message v1: %w", err)
			}
			if dec.ID == ack.ID {
				got = dec
			}
		}
		if got == nil {
			return fmt.Errorf("hook %s not in the queue yet", ack.ID)
		}
		return nil
	})
	if !bytes.Equal(got.Body(), body) {
		t.Fatalf("queue body %q, want %q", got.Body(), body)
	}
	if got.SourceID != "orders" || got.TenantID != "acme" || got.ContentType != "application/json" || got.Instance != "sqs-e2e" {
		t.Fatalf("message metadata: %+v", got)
	}
}
