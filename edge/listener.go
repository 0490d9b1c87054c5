package edge

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/valyala/fasthttp"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// listener owns the ingest socket. Its Started opens the port (a port that cannot be
// bound fails the boot); its Stopping closes the listener and waits for the requests it
// is serving, each of which ends in an answer.
type listener struct {
	e     *Edge
	srv   *fasthttp.Server
	tasks *task.Group // the serving goroutine
}

// NewListenerProps returns the ingest listener's props.
func NewListenerProps(e *Edge) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &listener{e: e} })
}

func (l *listener) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		if err := l.start(); err != nil {
			panic(err) // fails the boot, or counts against the domain's restart budget
		}
	case *actor.Stopping, *actor.Restarting:
		l.stop()
	}
}

func (l *listener) start() error {
	addr := net.JoinHostPort(l.e.set.IP, strconv.Itoa(l.e.set.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("edge: cannot listen on %s: %w", addr, err)
	}
	l.srv = &fasthttp.Server{
		Handler: l.e.Handle,
		Name:    "ankusa",
		// The body is streamed so that everything that can refuse a request runs before
		// it is read; the cap is enforced by the handler, not by fasthttp's own 413.
		StreamRequestBody:            true,
		MaxRequestBodySize:           int(l.e.set.MaxBodyBytes),
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		NoDefaultDate:                true,
		ReadTimeout:                  30 * time.Second,
		WriteTimeout:                 30 * time.Second,
		IdleTimeout:                  90 * time.Second,
		ReadBufferSize:               16 << 10,
		Concurrency:                  64 << 10,
		ErrorHandler:                 l.e.transportError,
	}
	if tcfg, err := tlsConfig(l.e.set.TLS); err != nil {
		_ = ln.Close()
		return err
	} else if tcfg != nil {
		ln = tls.NewListener(ln, tcfg)
	}
	bound := ln.Addr().String()
	l.e.addr.Store(&bound)
	l.tasks = &task.Group{}
	srv := l.srv
	l.tasks.Go(func(<-chan struct{}) {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) {
			l.e.log.Error().Err(err).Msg("ingest listener stopped")
		}
	})
	l.e.log.Info().Str("addr", bound).Msg("ingest listening")
	return nil
}

func (l *listener) stop() {
	if l.srv == nil {
		return
	}
	if err := l.srv.Shutdown(); err != nil {
		l.e.log.Warn().Err(err).Msg("ingest listener shutdown")
	}
	l.tasks.Stop()
	l.srv, l.tasks = nil, nil
	empty := ""
	l.e.addr.Store(&empty)
}

// transportError answers what fasthttp could not parse as the edge's own JSON refusals.
func (e *Edge) transportError(ctx *fasthttp.RequestCtx, err error) {
	// fasthttp reads the first bytes of a body (up to 8 KiB, never more than
	// max_body_bytes) before the handler runs; a body that breaks off there lands here.
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e.refuseEarly(ctx, refuseTooLarge(e.set.MaxBodyBytes))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.As(err, &ne) && ne.Timeout():
		e.refuseEarly(ctx, refuseBodyRead(err))
	default:
		e.log.Debug().Err(err).Msg("request could not be parsed")
		e.refuseEarly(ctx, refuseBadRequest)
	}
}

// tlsConfig builds the ingest listener's TLS; nil when TLS is off. With client_auth
// request any client certificate is taken and client_cert sources check it against
// their pins; with require it must chain to client_ca_file.
func tlsConfig(t config.TLS) (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("edge: cannot load the TLS certificate: %w", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	switch t.ClientAuth {
	case "request":
		c.ClientAuth = tls.RequestClientCert
	case "require":
		pem, err := os.ReadFile(t.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("edge: cannot read client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("edge: client_ca_file holds no PEM certificate")
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}
