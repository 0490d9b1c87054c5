package edge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// listener serves the ingest socket. Its Started opens the port (a port that cannot be
// bound fails the boot) or takes over the socket its previous incarnation parked; its
// Stopping stops accepting, waits for the requests it is serving, each of which ends in
// an answer, and parks the socket for the next incarnation (socket.go) unless the edge
// is stopping for good. A serve loop that ends while the listener is not stopping
// crashes the actor into its supervisor, which binds the port again.
type listener struct {
	e        *Edge
	srv      *fasthttp.Server
	acc      *acceptor
	view     *socketView
	broken   bool // the serve loop ended on its own: the socket is not handed on
	stopping atomic.Bool
	tasks    *task.Group // the serving goroutine and the acceptor's refusals
}

// serveEnded reports that a serve loop returned on its own.
type serveEnded struct {
	srv *fasthttp.Server
	err error
}

// NewListenerProps returns the ingest listener's props.
func NewListenerProps(e *Edge) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &listener{e: e} })
}

func (l *listener) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		if err := l.start(ctx.Self()); err != nil {
			panic(err) // fails the boot, or counts against the domain's restart budget
		}
	case *serveEnded:
		if msg.srv == l.srv {
			l.broken = true
			l.e.health.SetAccepting(false)
			panic(fmt.Errorf("edge: ingest serve loop ended: %w", msg.err))
		}
	case *actor.Stopping, *actor.Restarting:
		l.stop()
	}
}

func (l *listener) start(self *actor.PID) error {
	set := l.e.set
	tcfg, err := tlsConfig(set.TLS)
	if err != nil {
		return err
	}
	sock, conns := l.e.sock.take()
	if sock == nil {
		addr := net.JoinHostPort(set.IP, strconv.Itoa(set.Port))
		bound, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("edge: cannot listen on %s: %w", addr, err)
		}
		sock = bound.(*net.TCPListener)
	}
	l.view = &socketView{ln: sock, keeper: &l.e.sock, pending: conns}
	var ln net.Listener = l.view
	if set.WrapListener != nil {
		ln = set.WrapListener(ln)
	}
	l.tasks = &task.Group{}
	l.acc = newAcceptor(ln, l.e, tcfg == nil, l.tasks)
	ln = l.acc
	if tcfg != nil {
		ln = tls.NewListener(ln, tcfg)
	}
	bodyRead := fasthttp.RequestConfig{ReadTimeout: set.ReadTimeout}
	l.srv = &fasthttp.Server{
		Handler: l.e.Handle,
		Name:    "ankusa",
		// The body is streamed so that everything that can refuse a request runs before
		// it is read; the cap is enforced by the handler, not by fasthttp's own 413.
		StreamRequestBody:            true,
		MaxRequestBodySize:           int(set.MaxBodyBytes),
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		NoDefaultDate:                true,
		// ReadTimeout is the head's deadline, from the connection's open or a keep-alive
		// request's first byte; once the head is in, HeaderReceived re-arms one deadline
		// for the body. Both are deadlines: a client sending a byte at a time cannot
		// stretch them.
		ReadTimeout:    set.HeaderTimeout,
		HeaderReceived: func(*fasthttp.RequestHeader) fasthttp.RequestConfig { return bodyRead },
		WriteTimeout:   30 * time.Second,
		IdleTimeout:    set.IdleTimeout,
		ReadBufferSize: 16 << 10,
		// The acceptor caps connections first, with the contract's JSON answer; fasthttp's
		// own limit (a plain-text 503) sits above it and is never reached.
		Concurrency:  set.MaxConns + 1024,
		ErrorHandler: l.e.transportError,
		// Expect: 100-continue is answered only once the refusals that need no body passed.
		ExpectHandler: l.e.expect,
		// fasthttp quotes a malformed request head (Authorization, ?token= and all) in
		// its errors unless told not to; its own messages go to zerolog, sampled.
		SecureErrorLogMessage: true,
		Logger:                newServerLog(l.e.log),
	}
	bound := ln.Addr().String()
	l.e.addr.Store(&bound)
	l.e.health.SetAccepting(true)
	srv, system := l.srv, l.e.system
	l.tasks.Go(func(<-chan struct{}) {
		err := srv.Serve(ln)
		if l.stopping.Load() {
			return
		}
		if err == nil {
			err = errors.New("serve returned without an error")
		}
		l.e.log.Error().Err(err).Msg("ingest serve loop ended; restarting the listener")
		system.Root.Send(self, &serveEnded{srv: srv, err: err})
	})
	l.e.log.Info().Str("addr", bound).Int("max_conns", set.MaxConns).Int("max_conns_per_ip", set.MaxConnsPerIP).Msg("ingest listening")
	return nil
}

func (l *listener) stop() {
	if l.srv == nil {
		return
	}
	l.stopping.Store(true)
	if err := l.shutdown(); err != nil {
		l.e.log.Warn().Err(err).Msg("ingest listener shutdown")
	}
	// fasthttp's Shutdown closes only the listeners its Serve has registered: a stop that
	// comes right after the start, before the serve goroutine got there, would leave that
	// Serve waiting in Accept for good. Closing the view ends it either way (a second
	// Close is a no-op).
	_ = l.view.Close()
	l.tasks.Stop()
	sock, conns := l.view.handBack()
	if l.broken {
		_ = sock.Close()
		closeAll(conns)
	} else {
		l.e.sock.park(sock, conns)
	}
	l.srv, l.tasks, l.view = nil, nil, nil
	empty := ""
	l.e.addr.Store(&empty)
}

// shutdown stops the server and returns once every connection it served is closed, each
// request on them answered. fasthttp's Shutdown looks at its open connections every
// 100 ms; a restart behind a crashed batcher or writer waits for this stop, with new
// connections waiting in the backlog, so the acceptor's own count is watched instead,
// every millisecond, and ends the wait as soon as it is zero.
func (l *listener) shutdown() error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	acc := l.acc
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tk := time.NewTicker(time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				if acc.drained() {
					cancel()
					return
				}
			}
		}
	}()
	err := l.srv.ShutdownWithContext(ctx)
	cancel()
	<-watched
	if errors.Is(err, context.Canceled) {
		return nil // every connection closed: what Shutdown would have found at its next look
	}
	return err
}

// serverLog routes fasthttp's own messages into zerolog at warn, sampled (a burst of 10
// a second, then 1 in 100), so a flood of malformed requests cannot flood the log.
// Besides SecureErrorLogMessage, a message is cut at the first word that may introduce
// a credential, so no header value or query token reaches the log.
type serverLog struct{ log zerolog.Logger }

func newServerLog(l zerolog.Logger) serverLog {
	return serverLog{log: l.Sample(&zerolog.BurstSampler{Burst: 10, Period: time.Second,
		NextSampler: &zerolog.BasicSampler{N: 100}})}
}

// credentialWords may introduce a secret in a message fasthttp formats.
var credentialWords = []string{"contents:", "authorization", "token", "secret", "signature", "cookie",
	"api-key", "apikey", "api_key", "password", "?"}

func (s serverLog) Printf(format string, args ...any) {
	s.log.Warn().Str("detail", redactMessage(fmt.Sprintf(format, args...))).Msg("ingest http server")
}

// redactMessage cuts a transport message at the first word that may introduce a
// credential: fasthttp quotes a malformed header line even in its secure mode.
func redactMessage(msg string) string {
	lower := strings.ToLower(msg)
	cut := len(msg)
	for _, w := range credentialWords {
		if i := strings.Index(lower, w); i >= 0 && i < cut {
			cut = i
		}
	}
	if cut < len(msg) {
		msg = msg[:cut] + "[redacted]"
	}
	return msg
}

// transportError answers what fasthttp could not parse as the edge's own JSON refusals.
func (e *Edge) transportError(ctx *fasthttp.RequestCtx, err error) {
	// fasthttp reads the first bytes of a body (up to 8 KiB, never more than
	// max_body_bytes) before the handler runs; a body that breaks off there lands here.
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout() && len(ctx.Request.Header.RawHeaders()) == 0:
		// No request head arrived before http.header_timeout_ms: there is no request to answer. An unprompted
		// 400 would be read by a client that sends its first request just then as the answer to that request,
		// so the connection is closed without a word (fasthttp's error write then fails on the closed socket).
		_ = ctx.Conn().Close()
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e.refuseEarly(ctx, refuseTooLarge(e.set.MaxBodyBytes))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.As(err, &ne) && ne.Timeout():
		e.log.Debug().Str("error", redactMessage(err.Error())).Msg("request body could not be read")
		e.refuseEarly(ctx, refuseBodyRead)
	default:
		e.log.Debug().Str("error", redactMessage(err.Error())).Msg("request could not be parsed")
		e.refuseEarly(ctx, refuseBadRequest)
	}
}

// tlsConfig builds the ingest listener's TLS; nil when TLS is off. With client_auth
// request any client certificate is taken and client_cert sources check it against
// their pins; with require it must chain to client_ca_file.
func tlsConfig(t config.TLS) (*tls.Config, error) {
	c, err := t.ServerConfig(false)
	if err != nil {
		return nil, fmt.Errorf("edge: http.tls: %w", err)
	}
	return c, nil
}
