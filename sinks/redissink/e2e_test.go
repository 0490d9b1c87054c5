package redissink_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/services"
)

// Inventory D.2 redis: ":ok means PUBLISH reached ≥1 subscriber; no_subscribers is an error". A hook posted
// while nobody subscribes answers 201 (the store has it), every attempt fails as no_subscribers and dispatch
// retries it; once a subscriber listens the hook reaches it as Message v1 that decodes to the acked id with
// the body byte-exact, and so does the next hook.
func TestInstanceDeliversToRedisOnceSubscribed(t *testing.T) {
	services.Require(t, "Redis", services.RedisAddr)
	c := redis.NewClient(&redis.Options{Addr: services.RedisAddr, DisableIdentity: true})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	channel := "ankusa-e2e-" + uuid.NewString()

	inst := fixture.StartSink(t, "redis-e2e", config.SinkSpec{Type: "redis", Options: map[string]any{
		"url": "redis://" + services.RedisAddr, "channel": channel,
	}}, nil)

	early := []byte(`{"while":"nobody listens"}`)
	earlyID := inst.Post(t, early, fixture.GitHubPush())
	inst.AwaitRetries(t, 2, "two no_subscribers attempts retried")

	sub := c.Subscribe(ctx, channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription confirmation
		t.Fatal(err)
	}
	arrives := func(id string, body []byte) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, fixture.Arrival)
		defer rcancel()
		raw, err := sub.ReceiveMessage(rctx)
		if err != nil {
			t.Fatalf("hook %s never reached the subscriber: %v", id, err)
		}
		fixture.CheckForwarded(t, inst.Received(t, []byte(raw.Payload), id, body))
	}
	arrives(earlyID, early)
	body := []byte("{ \"event\":\t\"push\", \"name\":\"Zo\u00eb\" }\n")
	arrives(inst.Post(t, body, fixture.GitHubPush()), body)
}
