package sqssink_test

import (
	"testing"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/sinks/sqssink"
	"github.com/ankusa-go/ankusa/test/fixture"
)

// Design §6: "A sink's nil means the destination confirmed: ... SQS publish result". A running instance
// whose source names an sqs sink answers 201 and the queue then holds the hook as Message v1, body
// byte-exact.
func TestInstanceDeliversToSQS(t *testing.T) {
	c := sqssink.NewConsumer(t)
	q := c.CreateQueue(t, "e2e", nil)
	inst := fixture.StartSink(t, "sqs-e2e", config.SinkSpec{Type: "sqs", Options: map[string]any{
		"queue_url": q, "endpoint": sqssink.GoawsURL(),
		"credentials": map[string]any{"access_key_id": "test", "secret_access_key": "test"},
	}}, nil)

	body := []byte(`{"order":42,"note":"caf\u00e9 \u2028 \\ \"quoted\""}` + "\x00\xff")
	// Held reads goaws's state, not ReceiveMessage: see Held for the answer the SDK may lose.
	held := fixture.ByID(func() [][]byte {
		var out [][]byte
		for _, b := range sqssink.Held(q) {
			out = append(out, []byte(b))
		}
		return out
	})
	got := inst.AwaitDelivered(t, inst.Post(t, body, nil), body, held)
	if got.ContentType != "application/json" {
		t.Fatalf("message content type %q, want the posted application/json", got.ContentType)
	}
}
