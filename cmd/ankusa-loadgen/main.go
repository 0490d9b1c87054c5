package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ankusa-go/ankusa/test/load"
)

const (
	exitOK          = 0
	exitLostLines   = 1
	exitNoStart     = 2
	exitUndelivered = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// flags are the command line, parsed.
type flags struct {
	url       string
	workers   int
	rate      float64
	requests  int
	duration  time.Duration
	bodyBytes int
	headers   []string
	timeout   time.Duration
	out       string
	json      bool
	warmup    time.Duration
	recorder  string
	metrics   string
	drain     time.Duration
}

// run parses args, drives the load and prints the report; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f flags
	code := exitOK
	cmd := &cobra.Command{
		Use:           "ankusa-loadgen",
		Short:         "POST webhooks at a URL and report what was acknowledged",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(*cobra.Command, []string) error {
			var err error
			code, err = drive(ctx, f, stdout, stderr)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.url, "url", "", "full URL to POST to, e.g. http://127.0.0.1:4000/webhooks/sample (required)")
	fs.IntVar(&f.workers, "workers", 64, "concurrent workers, each with its own keep-alive connection")
	fs.Float64Var(&f.rate, "rate", 0, "open loop at this many requests/s (0 = closed loop)")
	fs.IntVar(&f.requests, "requests", 0, "stop after this many requests (0 = no limit)")
	fs.DurationVar(&f.duration, "duration", 0, "stop after this long, e.g. 30s (0 = no limit)")
	fs.IntVar(&f.bodyBytes, "body-bytes", 1024, "body size in bytes")
	fs.StringArrayVar(&f.headers, "header", nil, "extra request header k=v (repeatable)")
	fs.DurationVar(&f.timeout, "timeout", 20*time.Second, "per-request timeout")
	fs.StringVar(&f.out, "out", "", `append "id sha256hex" of every acknowledged hook to this file`)
	fs.BoolVar(&f.json, "json", false, "print the report as JSON")
	fs.DurationVar(&f.warmup, "warmup", 0, "first run this long at the same rate and leave it out of the figures (its acks are still checked for delivery)")
	fs.StringVar(&f.recorder, "recorder", "", "serve a sink recorder on this host:port (point the node's http sink at http://<it>/hooks) and report delivery latency and missing ids")
	fs.StringVar(&f.metrics, "metrics", "", "the node's /metrics URL: report the delivery backlog (ankusa_queue_pending+scheduled+inflight) at the end")
	fs.DurationVar(&f.drain, "drain", 30*time.Second, "with --recorder: how long to wait after the load for every acknowledged id to arrive")
	_ = cmd.MarkFlagRequired("url")
	cmd.AddCommand(recorderCommand(ctx, stdout))
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(stderr, "ankusa-loadgen:", err)
		if code == exitOK {
			code = exitNoStart
		}
	}
	return code
}

// drive runs the load described by f; the error, if any, is printed by run.
func drive(ctx context.Context, f flags, stdout, stderr io.Writer) (int, error) {
	o := load.Options{
		URL: f.url, Workers: f.workers, Rate: f.rate, Requests: f.requests, Duration: f.duration,
		BodyBytes: f.bodyBytes, Timeout: f.timeout,
	}
	if len(f.headers) > 0 {
		o.Headers = make(map[string]string, len(f.headers))
		for _, h := range f.headers {
			k, v, ok := strings.Cut(h, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return exitNoStart, fmt.Errorf("--header %q is not k=v", h)
			}
			o.Headers[strings.TrimSpace(k)] = v
		}
	}
	var log *ackLog
	if f.out != "" {
		file, err := os.OpenFile(f.out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return exitNoStart, fmt.Errorf("cannot open --out: %w", err)
		}
		log = &ackLog{f: file}
		o.OnAccepted = log.record
	}
	var rec *load.Recorder
	if f.recorder != "" {
		var err error
		if rec, err = load.StartRecorder(f.recorder); err != nil {
			return exitNoStart, err
		}
		defer func() { _ = rec.Close() }()
		o.OnAcked = rec.Acked
	}
	rep, err := warmAndRun(ctx, o, f.warmup)
	var lost error
	if log != nil {
		lost = log.close()
	}
	if err != nil {
		return exitNoStart, err
	}
	printReport(rep, f, stdout, stderr)
	code := exitOK
	if rec != nil {
		d := rec.Deliveries(ctx, f.drain)
		if f.json {
			b, _ := json.Marshal(d)
			fmt.Fprintf(stdout, "%s\n", b)
		} else {
			fmt.Fprintln(stdout, d.String())
		}
		if d.Missing > 0 {
			fmt.Fprintf(stderr, "ankusa-loadgen: %d acknowledged ids not delivered within --drain %v, e.g. %v\n", d.Missing, f.drain, d.Missed)
			code = exitUndelivered
		}
	}
	if f.metrics != "" {
		n, err := load.ScrapeBacklog(ctx, f.metrics)
		if err != nil {
			fmt.Fprintln(stderr, "ankusa-loadgen:", err)
		} else {
			fmt.Fprintf(stdout, "backlog=%d\n", n)
		}
	}
	if lost != nil {
		return exitLostLines, lost
	}
	return code, nil
}

// warmAndRun runs o for warmup first (when > 0), its figures discarded, then o itself.
func warmAndRun(ctx context.Context, o load.Options, warmup time.Duration) (load.Report, error) {
	if warmup > 0 {
		w := o
		w.Requests, w.Duration = 0, warmup
		if _, err := load.Run(ctx, w); err != nil {
			return load.Report{}, fmt.Errorf("cannot warm up: %w", err)
		}
	}
	return load.Run(ctx, o)
}

func printReport(rep load.Report, f flags, stdout, stderr io.Writer) {
	if f.rate > 0 && rep.Elapsed > 0 {
		// The open loop only offers the rate if the workers keep up; say so when not,
		// or a low accepted/s would be read as the server's limit.
		if sent := float64(rep.Sent) / rep.Elapsed.Seconds(); sent < 0.95*f.rate {
			fmt.Fprintf(stderr, "ankusa-loadgen: sent %.1f/s, below 95%% of --rate %.1f: raise --workers\n", sent, f.rate)
		}
	}
	if f.json {
		b, err := json.Marshal(rep)
		if err != nil {
			fmt.Fprintln(stderr, "ankusa-loadgen: cannot encode report:", err)
			return
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return
	}
	fmt.Fprintln(stdout, rep.String())
	fmt.Fprintln(stdout, "refused by status:", rep.Refusals())
}

// ackLog appends one line per acknowledged hook. Each line is one write(2) to a file
// opened O_APPEND, so it is in the kernel before the worker goes on: no buffer of
// ours can be lost when the server under test dies.
type ackLog struct {
	mu   sync.Mutex
	f    *os.File
	line []byte
	err  error // the first write error; later lines are dropped and the run exits 1
}

func (l *ackLog) record(id string, body []byte) {
	sum := sha256.Sum256(body)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	l.line = append(l.line[:0], id...)
	l.line = append(l.line, ' ')
	l.line = hex.AppendEncode(l.line, sum[:])
	l.line = append(l.line, '\n')
	if _, err := l.f.Write(l.line); err != nil {
		l.err = fmt.Errorf("cannot record acknowledged id %s in --out: %w", id, err)
	}
}

// close reports the first write error, if any, else the close error.
func (l *ackLog) close() error {
	cerr := l.f.Close()
	return errors.Join(l.err, cerr)
}

// recorderCommand is `ankusa-loadgen recorder`: a sink recorder on its own, for a node whose load comes from
// elsewhere. It prints the ids received every --every and once more at exit.
func recorderCommand(ctx context.Context, stdout io.Writer) *cobra.Command {
	var listen string
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "recorder",
		Short: "serve a local HTTP sink that answers 200 and counts the hook ids it receives",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			rec, err := load.StartRecorder(listen)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "recording at %s\n", rec.URL())
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					fmt.Fprintf(stdout, "received=%d\n", rec.Received())
				case <-ctx.Done():
					err := rec.Close()
					fmt.Fprintf(stdout, "received=%d %s\n", rec.Received(), rec.Deliveries(context.Background(), 0))
					return err
				}
			}
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:9099", "host:port to serve on")
	cmd.Flags().DurationVar(&every, "every", 5*time.Second, "how often to print the count")
	return cmd
}
