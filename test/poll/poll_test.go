package poll

import (
	"errors"
	"testing"
	"time"
)

func TestWaitReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	err := Wait(time.Second, func() error {
		n++
		if n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("err=%v after %d checks, want nil after 3", err, n)
	}
}

func TestWaitReportsTheLastErrorAtTheDeadline(t *testing.T) {
	want := errors.New("still down")
	start := time.Now()
	err := Wait(50*time.Millisecond, func() error { return want })
	if !errors.Is(err, want) {
		t.Fatalf("err=%v, want it to wrap %v", err, want)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before the deadline", el)
	}
}
