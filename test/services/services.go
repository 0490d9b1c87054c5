// Package services is how a test reaches a service that runs on the machine (RabbitMQ, Redis, NATS) and what it
// does when the service is down: under CI=true the test fails, because a CI run whose services are missing must
// not pass by skipping what it was meant to prove; elsewhere (a laptop without RabbitMQ) it skips, saying why.
package services

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/ankusa-go/ankusa/test/poll"
)

// Loopback addresses of the machine's services (docs: test-services).
const (
	RabbitMQAddr = "127.0.0.1:5672"
	RedisAddr    = "127.0.0.1:6379"
	NATSAddr     = "127.0.0.1:4222"
)

// RabbitMQURL is the AMQP URL of the machine's RabbitMQ (default guest account, loopback only).
const RabbitMQURL = "amqp://guest:guest@" + RabbitMQAddr + "/"

// wait is how long Require keeps dialing a service that refuses: RabbitMQ takes 4-7 s to start, and CI may start
// it just before the tests.
const wait = 10 * time.Second

// Require makes sure name answers TCP on addr. When it does not within a few seconds the test fails under
// CI=true and is skipped elsewhere.
func Require(t testing.TB, name, addr string) {
	t.Helper()
	require(t, name, addr, wait)
}

func require(t testing.TB, name, addr string, within time.Duration) {
	t.Helper()
	err := poll.Wait(within, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s is not reachable on %s: %v", name, addr, err)
	if CI() {
		t.Fatalf("%s (CI=true: a test whose service is down fails, it never skips)", msg)
	}
	t.Skip(msg)
}

// RabbitMQ is Require for the machine's RabbitMQ; it returns RabbitMQURL.
func RabbitMQ(t testing.TB) string {
	t.Helper()
	Require(t, "RabbitMQ", RabbitMQAddr)
	return RabbitMQURL
}

// CI reports whether the tests run under CI (CI=true).
func CI() bool { return os.Getenv("CI") == "true" }

// Command finds the program name on PATH. When it is missing the test fails under CI=true
// (.ci/run installs it; install says how) and is skipped elsewhere.
func Command(t testing.TB, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	msg := fmt.Sprintf("%s is not installed (%s)", name, install)
	if CI() {
		t.Fatalf("%s (CI=true: a test whose tool is missing fails, it never skips)", msg)
	}
	t.Skip(msg)
	return ""
}
