// Package poll is the one way tests wait for a condition: poll it with a deadline,
// never sleep for a guessed time. Use it from the test goroutine only; a goroutine a
// test starts returns its error to the test goroutine instead of failing the test.
package poll

import (
	"fmt"
	"testing"
	"time"
)

// Every is the interval between two checks.
const Every = 10 * time.Millisecond

// Eventually checks cond until it returns nil or within has passed, then fails the test
// with cond's last error. The first check runs at once.
func Eventually(t testing.TB, within time.Duration, cond func() error) {
	t.Helper()
	if err := Wait(within, cond); err != nil {
		t.Fatal(err)
	}
}

// True is Eventually for a boolean condition; what names it in the failure.
func True(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, within, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("not yet: %s", what)
	})
}

// Wait is Eventually without a test: it returns the last error after within, for
// goroutines and helpers that must report rather than fail.
func Wait(within time.Duration, cond func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("after %v: %w", within, err)
		}
		time.Sleep(Every)
	}
}
