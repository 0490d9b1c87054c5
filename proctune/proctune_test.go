package proctune

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeThreads answers findMonitor from a table: the thread ids and, per thread, the system calls it is seen in,
// the last one repeated.
type fakeThreads struct {
	ids   []int
	calls map[int][]string
	seen  map[int]int
}

func (f *fakeThreads) tids() ([]int, error) { return f.ids, nil }

func (f *fakeThreads) syscall(tid int) (string, error) {
	cs := f.calls[tid]
	if len(cs) == 0 {
		return "", fs.ErrNotExist
	}
	i := min(f.seen[tid], len(cs)-1)
	f.seen[tid]++
	return cs[i], nil
}

func TestFindMonitorTakesTheFirstThreadOnceSeenInNanosleep(t *testing.T) {
	f := &fakeThreads{ids: []int{100, 105, 103, 104}, seen: map[int]int{},
		calls: map[int][]string{103: {"running", "202", sysNanosleep}, 104: {sysNanosleep}, 105: {sysNanosleep}}}
	tid, err := findMonitor(f, 100)
	if err != nil || tid != 103 {
		t.Fatalf("findMonitor = %d, %v; want 103 (the lowest id after the main thread's 100)", tid, err)
	}
	if f.seen[103] != 3 {
		t.Fatalf("thread 103 looked at %d times, want 3 (until seen in nanosleep)", f.seen[103])
	}
}

func TestFindMonitorRefusesAThreadNeverSeenAsleep(t *testing.T) {
	// The lowest thread is not the monitor (the ids wrapped around): it waits on a futex, and no other
	// thread is taken in its place.
	f := &fakeThreads{ids: []int{100, 7, 103}, seen: map[int]int{},
		calls: map[int][]string{7: {"202"}, 103: {sysNanosleep}}}
	if tid, err := findMonitor(f, 100); !errors.Is(err, ErrNoMonitor) {
		t.Fatalf("findMonitor = %d, %v; want ErrNoMonitor", tid, err)
	}
	if f.seen[7] != monitorSamples {
		t.Fatalf("thread 7 looked at %d times, want %d", f.seen[7], monitorSamples)
	}
	if f, err := findMonitor(&fakeThreads{ids: []int{100}}, 100); !errors.Is(err, ErrNoMonitor) {
		t.Fatalf("a process of one thread: findMonitor = %d, %v; want ErrNoMonitor", f, err)
	}
}

func TestMonitorSlackSetting(t *testing.T) {
	for _, c := range []struct {
		v    string
		set  bool
		want time.Duration
		ok   bool
	}{
		{"", false, 0, true},
		{"1ms", false, 0, true},
		{"0", true, 0, true},
		{" 250us ", true, 250 * time.Microsecond, true},
		{"2ms", true, 2 * time.Millisecond, true},
		{"", true, 0, false},
		{"1000", true, 0, false},
		{"-1ms", true, 0, false},
		{"2s", true, 0, false},
	} {
		got, err := monitorSlackSetting(c.v, c.set)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("monitorSlackSetting(%q, %v) = %v, %v; want %v, ok %v", c.v, c.set, got, err, c.want, c.ok)
		}
	}
}

func TestMonitorSlackRefusesANonPositiveSlack(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Millisecond} {
		if _, err := MonitorSlack(d); err == nil {
			t.Fatalf("MonitorSlack(%v) = nil, want an error", d)
		}
	}
}

// TestMonitorSlackChangesTheMonitorAlone sets the slack in this process: as root, the chosen thread's slack is
// the one asked for, every other thread keeps its own, and the chosen thread wakes on its own while the process
// runs, as the monitor does; without CAP_SYS_NICE the write is refused and says so.
func TestMonitorSlackChangesTheMonitorAlone(t *testing.T) {
	const slack = 1_234_567 * time.Nanosecond
	before := slacks(t)
	tid, err := MonitorSlack(slack)
	if os.Geteuid() != 0 {
		if !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("MonitorSlack as uid %d = %v, want a permission error", os.Geteuid(), err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	after := slacks(t)
	if after[tid] != slack.Nanoseconds() {
		t.Fatalf("thread %d's slack = %d ns, want %d", tid, after[tid], slack.Nanoseconds())
	}
	for id, ns := range after {
		if id != tid && ns == slack.Nanoseconds() {
			t.Fatalf("thread %d's slack changed too: %d ns (was %d)", id, ns, before[id])
		}
	}
	// While a goroutine runs, the monitor keeps waking (at least every 10 ms plus the slack); any other thread
	// of an idle test process sleeps.
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
		}
	}()
	n0 := switches(t, tid)
	time.Sleep(300 * time.Millisecond)
	n1 := switches(t, tid)
	stop.Store(true)
	<-done
	if n1-n0 < 10 {
		t.Fatalf("thread %d woke %d times in 300 ms while a goroutine ran; the monitor wakes at least every ~11 ms", tid, n1-n0)
	}
}

// slacks reads every thread's timer slack in ns.
func slacks(t *testing.T) map[int]int64 {
	t.Helper()
	ids, err := procFS{}.tids()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int]int64, len(ids))
	for _, id := range ids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(id) + "/timerslack_ns")
		if errors.Is(err, fs.ErrNotExist) {
			continue // a thread that ended meanwhile
		}
		if err != nil {
			t.Fatal(err)
		}
		if out[id], err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// switches is thread tid's count of voluntary context switches.
func switches(t *testing.T, tid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no voluntary_ctxt_switches in thread %d's status", tid)
	return 0
}
