// Package services tells a test whether a real service it needs (Redis, NATS JetStream, RabbitMQ) is
// listening on loopback, and decides what a missing one means: under CI=true the test FAILS, because CI
// provides every service and a skip there would hide the proof; elsewhere it is skipped with a message that
// says which service to start.
package services

import (
	"net"
	"os"
	"testing"
	"time"
)

// Loopback addresses of the services the tests use.
const (
	Redis    = "127.0.0.1:6379"
	NATS     = "127.0.0.1:4222"
	RabbitMQ = "127.0.0.1:5672" // guest/guest
)

// dialTimeout bounds the probe; a loopback service answers at once or is not there.
const dialTimeout = time.Second

// Require returns addr when a TCP connection to it opens. Otherwise it fails t under CI=true and skips it
// elsewhere, naming the service (name, e.g. "Redis") and the address.
func Require(t testing.TB, name, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err == nil {
		_ = c.Close()
		return addr
	}
	if CI() {
		t.Fatalf("%s is not reachable on %s (%v): under CI=true every service must run, a test never skips", name, addr, err)
	}
	t.Skipf("%s is not reachable on %s (%v): start it to run this test (under CI=true this fails)", name, addr, err)
	return ""
}

// CI reports whether the tests run under CI (CI=true), where a missing service is a failure.
func CI() bool { return os.Getenv("CI") == "true" }
