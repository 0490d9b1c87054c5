package edge

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// connPair is a loopback TCP connection: the server end wrapped as the listener wraps it, and the client end.
func connPair(t *testing.T) (*trackedConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return &trackedConn{Conn: server}, client
}

// sendAfter writes b to c after d, from a goroutine the test waits for.
func sendAfter(t *testing.T, c net.Conn, d time.Duration, b string) {
	done := make(chan error, 1)
	go func() {
		time.Sleep(d)
		_, err := c.Write([]byte(b))
		done <- err
	}()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("client write: %v", err)
		}
	})
}

// A deadline moved later is not armed, yet the read is not cut short at the earlier one: it waits for the later.
func TestLazyDeadlineMovedLaterHoldsTheRead(t *testing.T) {
	c, client := connPair(t)
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if !c.rd.armed.Before(c.rd.want) {
		t.Fatalf("the later deadline was armed at once: armed %v, want %v", c.rd.armed, c.rd.want)
	}
	sendAfter(t, client, 200*time.Millisecond, "x")
	buf := make([]byte, 1)
	n, err := c.Read(buf)
	if err != nil || n != 1 {
		t.Fatalf("read = %d, %v; want the byte sent after the first deadline", n, err)
	}
	if !c.rd.armed.Equal(c.rd.want) {
		t.Fatalf("after the early expiry the poller holds %v, want %v", c.rd.armed, c.rd.want)
	}
}

// A deadline moved earlier is armed at once: a read blocked under a later one ends at the earlier.
func TestLazyDeadlineMovedEarlierEndsTheRead(t *testing.T) {
	c, _ := connPair(t)
	if err := c.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	}()
	start := time.Now()
	_, err := c.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read error = %v, want the deadline's", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("read ended after %v, not at the earlier deadline", waited)
	}
}

// A cleared deadline is honoured: the armed one's expiry clears the poller's and the read goes on.
func TestLazyDeadlineClearedHoldsTheRead(t *testing.T) {
	c, client := connPair(t)
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	sendAfter(t, client, 200*time.Millisecond, "x")
	if n, err := c.Read(make([]byte, 1)); err != nil || n != 1 {
		t.Fatalf("read = %d, %v; want the byte", n, err)
	}
}

// The wanted deadline still ends a read that never gets data, after any number of early expiries.
func TestLazyDeadlineWantedOneEndsTheRead(t *testing.T) {
	c, _ := connPair(t)
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	want := time.Now().Add(150 * time.Millisecond)
	if err := c.SetReadDeadline(want); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read error = %v, want the deadline's", err)
	}
	if now := time.Now(); now.Before(want) {
		t.Fatalf("read ended %v before the wanted deadline", want.Sub(now))
	}
}

// A write under an expired, earlier armed deadline is re-armed and completes; past the wanted one it fails.
func TestLazyDeadlineWrite(t *testing.T) {
	c, client := connPair(t)
	if err := c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := c.SetWriteDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond) // the armed deadline is now past
	if n, err := c.Write([]byte("hello")); err != nil || n != 5 {
		t.Fatalf("write = %d, %v; want all 5 bytes", n, err)
	}
	buf := make([]byte, 5)
	if _, err := client.Read(buf); err != nil || string(buf) != "hello" {
		t.Fatalf("client read %q, %v", buf, err)
	}
	if err := c.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("late")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past the deadline: %v, want the deadline's error", err)
	}
}

// Steady keep-alive traffic (the read deadlines fasthttp sets per request: idle, head, body) arms the poller on
// the first request only (the idle deadline, then the earlier head one), not three times a request.
func TestLazyDeadlineArmsOncePerPeriod(t *testing.T) {
	c, _ := connPair(t)
	arms := 0
	arm := func(time.Time) error { arms++; return nil }
	now := time.Now()
	for i := range 1000 {
		at := now.Add(time.Duration(i) * time.Millisecond)
		for _, d := range []time.Duration{60 * time.Second, 10 * time.Second, 10 * time.Second} {
			if err := c.rd.set(at.Add(d), arm); err != nil {
				t.Fatal(err)
			}
		}
	}
	if arms != 2 {
		t.Fatalf("the poller was armed %d times over 1000 requests, want 2", arms)
	}
}
