package sinks

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
)

// Inventory D.4: "tenant:source_id:dedupe_key (tenant default when nil) when a dedupe key exists, else the
// hook id … Optional #replay:<replay_id> suffix".
func TestIdempotencyKeyFormula(t *testing.T) {
	const id = "0190a4c2-7b1e-7c3d-8e9f-0a1b2c3d4e5f"
	f := func(e Envelope, want string) {
		t.Helper()
		e.IDText = id
		if got := e.IdempotencyKey(); got != want {
			t.Fatalf("IdempotencyKey(%+v) = %q, want %q", e, got, want)
		}
	}
	f(Envelope{Source: "gh"}, id)
	f(Envelope{Source: "gh", Tenant: "acme"}, id)
	f(Envelope{Source: "gh", Tenant: "acme", DedupeKey: "d-1"}, "acme:gh:d-1")
	f(Envelope{Source: "gh", DedupeKey: "d-1"}, "default:gh:d-1")
	f(Envelope{Source: "gh", Tenant: "acme", DedupeKey: "d-1", ReplayID: "r9"}, "acme:gh:d-1#replay:r9")
	f(Envelope{Source: "gh", ReplayID: "r9"}, id+"#replay:r9")
}

// IDText is canonical UUID text; an envelope built without it still names its hook.
func TestTextFormatsTheID(t *testing.T) {
	e := Envelope{ID: [16]byte{0x01, 0x90, 0xa4, 0xc2, 0x7b, 0x1e, 0x7c, 0x3d, 0x8e, 0x9f, 0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f}}
	if got, want := e.Text(), "0190a4c2-7b1e-7c3d-8e9f-0a1b2c3d4e5f"; got != want {
		t.Fatalf("Text() = %q, want %q", got, want)
	}
	if got := e.IdempotencyKey(); got != e.Text() {
		t.Fatalf("IdempotencyKey without IDText = %q", got)
	}
	e.IDText = "given"
	if e.Text() != "given" {
		t.Fatal("Text ignores IDText")
	}
}

// Inventory D.4: "default = all except authorization, proxy-authorization, cookie, x-api-key, host,
// content-length, content-type, connection, keep-alive, transfer-encoding, te, trailer, upgrade, expect and
// every x-ankusa-*".
func TestForwardedHeadersDefaultFilter(t *testing.T) {
	var in []Header
	for _, n := range []string{"authorization", "proxy-authorization", "cookie", "x-api-key", "host",
		"content-length", "content-type", "connection", "keep-alive", "transfer-encoding", "te", "trailer",
		"upgrade", "expect", "x-ankusa-id", "x-ankusa-anything", "X-Ankusa-Upper", "Authorization"} {
		in = append(in, Header{Name: n, Value: "dropped"})
	}
	kept := []Header{{"x-github-event", "push"}, {"user-agent", "GitHub-Hookshot/1"}, {"x-multi", "1"},
		{"x-multi", "2"}, {"x-ankusa", "not the x-ankusa- prefix"}, {"X-Signature", "sha256=ab"}}
	in = append(in, kept...)
	got := ForwardedHeaders(in, nil)
	want := append([]Header(nil), kept...)
	want[5].Name = "x-signature" // names come out lowercased
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ForwardedHeaders = %v\nwant %v", got, want)
	}
	if ForwardedHeaders(nil, nil) != nil {
		t.Fatal("no headers in, headers out")
	}
	got[0].Value = "changed"
	if in[len(in)-len(kept)].Value != "push" {
		t.Fatal("result aliases the stored headers")
	}
}

// Inventory B.3 `forward_headers`: "list of names or absent" — a list forwards only those names.
func TestForwardedHeadersAllowList(t *testing.T) {
	in := []Header{{"x-github-event", "push"}, {"authorization", "Bearer p"}, {"x-other", "o"},
		{"x-ankusa-id", "spoof"}, {"content-length", "5"}, {"x-multi", "1"}, {"x-multi", "2"}}
	got := ForwardedHeaders(in, []string{"X-GitHub-Event", "authorization", "x-multi", "x-ankusa-id", "content-length"})
	want := []Header{{"x-github-event", "push"}, {"authorization", "Bearer p"}, {"x-multi", "1"}, {"x-multi", "2"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("allow list: %v, want %v", got, want)
	}
	if got := ForwardedHeaders(in, []string{}); len(got) != 0 {
		t.Fatalf("empty allow list forwarded %v", got)
	}
}

// Inventory D.1: "{:permanent, term} → dead-letter now …; {:retry_after, ms, term} → next attempt ≥ ms (cap
// 1 h) …; else transient".
func TestClassify(t *testing.T) {
	base := errors.New("boom")
	var nilPerm *permanentError
	cases := []struct {
		name  string
		err   error
		class Class
		d     time.Duration
	}{
		{"nil", nil, Transient, 0},
		{"plain", base, Transient, 0},
		{"context", context.DeadlineExceeded, Transient, 0},
		{"permanent", Permanent(base), PermanentClass, 0},
		{"permanent of nil", Permanent(nil), PermanentClass, 0},
		{"wrapped permanent", fmt.Errorf("ctx: %w", Permanent(base)), PermanentClass, 0},
		{"joined permanent", errors.Join(base, Permanent(base)), PermanentClass, 0},
		{"retry after", RetryAfter(3*time.Second, base), RetryAfterClass, 3 * time.Second},
		{"retry after capped", RetryAfter(5*time.Hour, base), RetryAfterClass, time.Hour},
		{"retry after negative", RetryAfter(-time.Second, nil), RetryAfterClass, 0},
		{"wrapped retry after", fmt.Errorf("x: %w", RetryAfter(time.Minute, base)), RetryAfterClass, time.Minute},
		{"permanent wins", RetryAfter(time.Minute, Permanent(base)), PermanentClass, 0},
		{"typed nil pointer", nilPerm, PermanentClass, 0},
		{"panic", &panicError{val: Permanent(base)}, Transient, 0},
	}
	for _, c := range cases {
		cl, d := Classify(c.err)
		if cl != c.class || d != c.d {
			t.Errorf("%s: Classify = %s %s, want %s %s", c.name, cl, d, c.class, c.d)
		}
	}
	if Permanent(nil) == nil || RetryAfter(time.Second, nil) == nil {
		t.Fatal("a marked nil became success")
	}
	if !errors.Is(Permanent(base), base) || !errors.Is(RetryAfter(time.Second, base), base) {
		t.Fatal("marks hide the cause from errors.Is")
	}
	if !strings.Contains(RetryAfter(time.Second, base).Error(), "boom") {
		t.Fatal("retry-after error lost the cause's text")
	}
	if PermanentClass.String() != "permanent" || Class(9).String() != "class(9)" {
		t.Fatal("Class.String")
	}
}

type funcSink func(ctx context.Context, e *Envelope) error

func (f funcSink) Deliver(ctx context.Context, e *Envelope) error { return f(ctx, e) }
func (funcSink) Durable() bool                                    { return true }
func (funcSink) Close() error                                     { return nil }

// Inventory D.1: "Raise/throw/exit/other return ⇒ {:error, _} on every path (Sink.safe_deliver/4)".
func TestSafeDeliverTurnsPanicIntoTransientError(t *testing.T) {
	for name, val := range map[string]any{"string": "oops", "error": Permanent(errors.New("perm")), "nil": nil} {
		err := SafeDeliver(context.Background(), funcSink(func(context.Context, *Envelope) error { panic(val) }), &Envelope{})
		if !errors.Is(err, ErrPanicked) || !strings.Contains(err.Error(), "sink panicked") {
			t.Fatalf("%s: err = %v, want ErrPanicked", name, err)
		}
		if cl, _ := Classify(err); cl != Transient {
			t.Fatalf("%s: panic classified %s", name, cl)
		}
	}
	perm := Permanent(errors.New("refused"))
	if err := SafeDeliver(context.Background(), funcSink(func(context.Context, *Envelope) error { return perm }), &Envelope{}); err != perm {
		t.Fatalf("returned error not passed through: %v", err)
	}
	if err := SafeDeliver(context.Background(), funcSink(func(context.Context, *Envelope) error { return nil }), &Envelope{}); err != nil {
		t.Fatalf("success became %v", err)
	}
}

// Registry is instance-scoped: two registries never share factories; an unknown type is an error naming it.
func TestRegistry(t *testing.T) {
	a, b := NewRegistry(), NewRegistry()
	var gotDeps Deps
	a.Register("mem", func(spec config.SinkSpec, deps Deps) (Sink, error) {
		gotDeps = deps
		if err := NewOptions(spec.Type, spec.Options).Err(); err != nil {
			return nil, err
		}
		return funcSink(nil), nil
	})
	if _, err := a.New(config.SinkSpec{Type: "mem"}, Deps{Instance: "i1", Log: zerolog.Nop()}); err != nil || gotDeps.Instance != "i1" {
		t.Fatalf("New = %v, deps %+v", err, gotDeps)
	}
	_, err := b.New(config.SinkSpec{Type: "mem"}, Deps{})
	if !errors.Is(err, ErrUnknownType) || !strings.Contains(err.Error(), `"mem"`) {
		t.Fatalf("second registry: err = %v, want ErrUnknownType naming mem", err)
	}
	_, err = a.New(config.SinkSpec{Type: "mem", Options: map[string]any{"x": 1}}, Deps{})
	if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "mem sink: x: unknown option") {
		t.Fatalf("factory error: %v", err)
	}
	a.Register("none", func(config.SinkSpec, Deps) (Sink, error) { return nil, nil })
	if _, err := a.New(config.SinkSpec{Type: "none"}, Deps{}); err == nil {
		t.Fatal("a factory returning no sink and no error was accepted")
	}
	if got := a.Types(); !reflect.DeepEqual(got, []string{"mem", "none"}) {
		t.Fatalf("Types = %v", got)
	}
}

// Options reads what the config walk decodes and reports every problem by option name.
func TestOptions(t *testing.T) {
	o := NewOptions("t", map[string]any{
		"i": 3, "f": 4.0, "frac": 4.5, "nil": nil, "s": "v", "b": true, "l": []any{"a", 1, "c"},
		"one": "x", "m": map[string]any{"k": "v", "n": 2}, "extra2": 1, "extra1": 1,
	})
	if o.Int("i", 0, 0, 10) != 3 || o.Int("f", 0, 0, 10) != 4 || o.Int("nil", 7, 0, 10) != 7 || o.Int("absent", 8, 0, 10) != 8 {
		t.Fatal("Int")
	}
	_ = o.Int("frac", 0, 0, 10)
	if o.String("s", "") != "v" || !o.Bool("b", false) || o.Bool("absent-b", true) != true {
		t.Fatal("String/Bool")
	}
	if l, ok := o.Strings("l"); !ok || !reflect.DeepEqual(l, []string{"a", "c"}) {
		t.Fatalf("Strings = %v", l)
	}
	if l, ok := o.Strings("one"); !ok || !reflect.DeepEqual(l, []string{"x"}) {
		t.Fatalf("Strings(one) = %v", l)
	}
	if m, ok := o.StringMap("m"); !ok || !reflect.DeepEqual(m, map[string]string{"k": "v"}) {
		t.Fatalf("StringMap = %v", m)
	}
	_ = o.RequiredString("req")
	err := o.Err()
	msgs := strings.Split(err.Error(), "\n")
	want := []string{"t sink: frac: must be an integer", "t sink: l[1]: must be a string, got a number",
		"t sink: m.n: must be a string, got a number", "t sink: req: is required",
		"t sink: extra1: unknown option", "t sink: extra2: unknown option"}
	if !reflect.DeepEqual(msgs, want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
	var oe *OptionError
	if !errors.As(err, &oe) || !errors.Is(err, ErrInvalidOption) {
		t.Fatal("problems are not *OptionError")
	}
	if NewOptions("t", nil).Err() != nil {
		t.Fatal("no options, problems")
	}
}

type limitedSink struct {
	funcSink
	max int
}

func (s limitedSink) InlineMaxBytes() int { return s.max }

// Inventory D.5: "smallest threshold among the source's sinks"; a source without a queue sink never claims.
func TestClaimThresholdIsTheSmallestInlineLimit(t *testing.T) {
	plain := funcSink(func(context.Context, *Envelope) error { return nil })
	if _, ok := ClaimThreshold([]Sink{plain}); ok {
		t.Fatal("a source of HTTP-like sinks has a claim threshold")
	}
	got, ok := ClaimThreshold([]Sink{plain, limitedSink{plain, 65536}, limitedSink{plain, 1024}, limitedSink{plain, 4096}})
	if !ok || got != 1024 {
		t.Fatalf("ClaimThreshold = %d, %v; want 1024", got, ok)
	}
}
