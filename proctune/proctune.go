// Package proctune tunes how the kernel treats the threads of a process that hosts nodes.
//
// One tuning so far, off unless asked for: the timer slack of the Go runtime's monitor thread (sysmon). The
// monitor sleeps between rounds, 20 µs at first and twice as long after each 50 rounds that found nothing to
// do, up to 10 ms; each time it takes a P back from a thread that sat in a system call or a cgo call while
// goroutines waited for that P, it starts again at 20 µs. A node makes such calls all the time (socket writes
// that wake the peer, RocksDB writes), so under load the monitor wakes thousands of times a second, and on a
// virtual machine each wake-up is a context switch that costs several µs. A timer slack of 1 ms lets the kernel
// batch those wake-ups, and the monitor then wakes about once a millisecond while busy: at a steady load that
// leaves a core spare, that took 6 % off the node's CPU a hook and a quarter off its ack p99. The price is the
// P taken back a millisecond late instead of tens of µs: flat out, 64 connections in a closed loop, the node's
// ingest rate fell by about a tenth (each ack waits for the Ps its path crosses). Hence opt-in.
// docs/architecture.md ("The runtime's monitor thread") has the measurements.
package proctune

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MonitorSlackEnv names the environment variable that sets the monitor thread's timer slack in a process that
// hosts nodes: a Go duration, or unset or 0 to leave the kernel's (50 µs unless the process inherited another).
const MonitorSlackEnv = "ANKUSA_MONITOR_TIMER_SLACK"

// MeasuredMonitorSlack is the slack docs/architecture.md measured (the value to try first).
const MeasuredMonitorSlack = time.Millisecond

// monitorSlackSetting is the slack MonitorSlackEnv asks for, given its value v and whether it is set: 0 (leave
// the kernel's) when unset or "0", else v as a Go duration of at most a second.
func monitorSlackSetting(v string, set bool) (time.Duration, error) {
	if !set || strings.TrimSpace(v) == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 || d > time.Second {
		return 0, fmt.Errorf("%s=%q: want a duration in (0, 1s], or 0 to leave the kernel's", MonitorSlackEnv, v)
	}
	return d, nil
}

// Tuned is what TuneMonitor did: Slack 0 left the kernel's; otherwise Tid is the monitor thread, and Refused
// why its slack could not be set (the process goes on as if it had not asked).
type Tuned struct {
	Slack   time.Duration
	Tid     int
	Refused error
}

// TuneMonitor applies what MonitorSlackEnv asks for, given its value v and whether it is set: the one decision
// the binary and anything else hosting nodes make at start. Only a malformed value is an error.
func TuneMonitor(v string, set bool) (Tuned, error) {
	slack, err := monitorSlackSetting(v, set)
	if err != nil || slack == 0 {
		return Tuned{}, err
	}
	tid, err := MonitorSlack(slack)
	return Tuned{Slack: slack, Tid: tid, Refused: err}, nil
}

// ErrNoMonitor is returned when the monitor thread cannot be told apart from the others.
var ErrNoMonitor = errors.New("cannot find the Go runtime's monitor thread")

// MonitorSlack sets the timer slack of the Go runtime's monitor thread to slack and returns the thread's id.
// Setting another thread's slack takes CAP_SYS_NICE; without it the error wraps fs.ErrPermission and nothing
// changed.
func MonitorSlack(slack time.Duration) (tid int, err error) {
	if slack <= 0 {
		return 0, fmt.Errorf("timer slack %v: must be positive", slack)
	}
	tid, err = findMonitor(procFS{}, os.Getpid())
	if err != nil {
		return 0, err
	}
	// The per-thread file lives under /proc/<tid>, not /proc/self/task/<tid>.
	f, err := os.OpenFile("/proc/"+strconv.Itoa(tid)+"/timerslack_ns", os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(strconv.FormatInt(slack.Nanoseconds(), 10))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return tid, fmt.Errorf("cannot set the timer slack of the runtime's monitor thread %d (needs CAP_SYS_NICE): %w", tid, err)
		}
		return tid, fmt.Errorf("cannot set the timer slack of the runtime's monitor thread %d: %w", tid, err)
	}
	return tid, nil
}

// threads is what findMonitor reads of the process: its thread ids and the system call a thread is in.
type threads interface {
	tids() ([]int, error)
	// syscall is the first field of /proc/self/task/<tid>/syscall: the system call's number, "running", or -1.
	syscall(tid int) (string, error)
}

// monitorSamples and monitorPause bound the wait for the monitor to be seen asleep: 200 looks, 100 µs apart.
const (
	monitorSamples = 200
	monitorPause   = 100 * time.Microsecond
)

// findMonitor returns the monitor thread of process pid. The runtime starts it first of all threads (in
// runtime.main, before any package's init), so it has the lowest thread id after the main thread's unless the
// kernel's ids wrapped around meanwhile; the thread is taken only once it was seen in nanosleep, where the
// monitor spends nearly all its time while the process runs (a caller keeps a P busy by running, so the
// monitor is not parked for want of work).
func findMonitor(th threads, pid int) (int, error) {
	tids, err := th.tids()
	if err != nil {
		return 0, err
	}
	tids = slices.DeleteFunc(tids, func(t int) bool { return t == pid })
	if len(tids) == 0 {
		return 0, fmt.Errorf("%w: the process has no thread but the main one", ErrNoMonitor)
	}
	tid := slices.Min(tids)
	for range monitorSamples {
		sc, err := th.syscall(tid)
		if err != nil {
			return 0, fmt.Errorf("%w: thread %d: %w", ErrNoMonitor, tid, err)
		}
		if sc == sysNanosleep {
			return tid, nil
		}
		time.Sleep(monitorPause)
	}
	return 0, fmt.Errorf("%w: thread %d, the first after the main one, was never seen in nanosleep", ErrNoMonitor, tid)
}

// procFS reads the process's threads from /proc/self.
type procFS struct{}

func (procFS) tids() ([]int, error) {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("cannot list the process's threads: %w", err)
	}
	tids := make([]int, 0, len(entries))
	for _, e := range entries {
		if t, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, t)
		}
	}
	return tids, nil
}

func (procFS) syscall(tid int) (string, error) {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/syscall")
	if err != nil {
		return "", err
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	return first, nil
}
