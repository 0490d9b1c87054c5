// Package lifecycle publishes source, route and tenant changes (inventory A.4-A.7, G) as CloudEvents 1.0 JSON bodies
// to the sinks of lifecycle.sinks. Its outbox is the audit trail: a change flagged for publication commits its
// audit row, and the redacted entity beside it, in the change's own synced batch. The Publisher reads the
// flagged rows past m:lifecycle_cursor in commit order, delivers each to every sink until the sink confirms
// (retrying a transient failure with back-off) and only then advances the synced cursor. A kill -9 before the
// advance delivers the event again after the restart, with the same id: delivery is at least once and a
// consumer dedupes on id. It also runs the lifecycle replay jobs (replay.go).
package lifecycle

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/sinks"
	"github.com/ankusa-go/ankusa/store"
)

// SourceID is the source id the lifecycle events carry in their envelope (reserved: no source can take it).
const SourceID = "ankusa:lifecycle"

// ContentType is the media type of an event body (CloudEvents structured mode, JSON format).
const ContentType = "application/cloudevents+json"

// Event is one CloudEvents 1.0 event in JSON format. Data is the subject's redacted entity, never a secret.
type Event struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject"`
	Time            string          `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Tenant          string          `json:"tenant,omitempty"` // extension: the tenant the subject belongs to
	Revision        uint64          `json:"revision"`         // extension: the subject's revision
	Data            json.RawMessage `json:"data,omitempty"`
}

// EventType maps an audit action to its event type ("" for an action that publishes nothing).
func EventType(action string) string {
	switch action {
	case "source.create":
		return "io.ankusa.source.created"
	case "source.update":
		return "io.ankusa.source.updated"
	case "source.delete":
		return "io.ankusa.source.deleted"
	case "route.create":
		return "io.ankusa.route.created"
	case "route.update":
		return "io.ankusa.route.updated"
	case "route.delete":
		return "io.ankusa.route.deleted"
	case "tenant.delete":
		return "io.ankusa.tenant.deleted"
	}
	return ""
}

// EventID is the id of the event of audit row seq on node: the same on every delivery of the row.
func EventID(node string, seq uint64) string { return node + "-" + strconv.FormatUint(seq, 10) }

// Build returns the event of row r with the redacted entity e (nil: none). ok is false for a row that
// publishes nothing: an action without an event type, or a change that was not made (failed, interrupted).
func Build(node string, r store.AuditRow, e []byte) (ev Event, ok bool) {
	typ := EventType(r.Action)
	if typ == "" || r.Status != store.AuditOK {
		return ev, false
	}
	ev = Event{SpecVersion: "1.0", ID: EventID(node, r.Seq), Source: "ankusa/" + node, Type: typ,
		Subject: r.Subject, Time: time.UnixMilli(r.At).UTC().Format(time.RFC3339Nano),
		DataContentType: "application/json", Tenant: r.Tenant, Revision: r.Revision}
	if json.Valid(e) {
		ev.Data = e
	}
	return ev, true
}

// Target is one sink of lifecycle.sinks; Name labels its metric and logs (its index).
type Target struct {
	Name string
	Sink sinks.Sink
}

// Metrics is what the publisher reports (telemetry.Telemetry implements it).
type Metrics interface {
	LifecyclePublished(sink string)
	LifecycleFailed(reason string)
	LifecycleLag(n int)
}

// Publisher delivers the flagged audit rows of one node's store. Run is its loop; it is one goroutine, so
// events reach a sink in commit order.
type Publisher struct {
	DB      func() *store.DB // nil while the store is closed
	Node    string
	Targets []Target
	Metrics Metrics
	// Replays counts the events lifecycle replay jobs published (nil: not counted).
	Replays ReplayMetrics
	Log     zerolog.Logger
	// Poll is how often the trail is read without a notification (default 1 s); MinBackoff and MaxBackoff
	// bound the wait between attempts of a failing sink (default 200 ms and 30 s); Timeout is one attempt's
	// deadline (default 10 s).
	Poll, MinBackoff, MaxBackoff, Timeout time.Duration
}

const batch = 1000

func (p *Publisher) defaults() {
	if p.Poll <= 0 {
		p.Poll = time.Second
	}
	if p.MinBackoff <= 0 {
		p.MinBackoff = 200 * time.Millisecond
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = 30 * time.Second
	}
	if p.Timeout <= 0 {
		p.Timeout = 10 * time.Second
	}
}

// Run publishes until stop is closed: the live events, then a step of each running lifecycle replay job,
// again at once while a job has work left.
func (p *Publisher) Run(stop <-chan struct{}) {
	p.defaults()
	t := time.NewTicker(p.Poll)
	defer t.Stop()
	for {
		var notify <-chan struct{}
		more := false
		if db := p.DB(); db != nil {
			notify = db.AuditNotify()
			if err := p.drain(db, stop); err != nil && !errors.Is(err, errStopped) {
				p.Log.Warn().Err(err).Msg("lifecycle: cannot read the audit trail; retrying")
			}
			var err error
			if more, err = p.replayStep(db, stop); err != nil && !errors.Is(err, errStopped) {
				p.Log.Warn().Err(err).Msg("lifecycle: replay step failed; retrying")
				more = false
			}
		}
		if more {
			select {
			case <-stop:
				return
			default:
				continue
			}
		}
		select {
		case <-stop:
			return
		case <-notify:
		case <-t.C:
		}
	}
}

var errStopped = errors.New("lifecycle: stopped")

// drain publishes every flagged row past the cursor, stopping at a pending row (its outcome is not known yet).
func (p *Publisher) drain(db *store.DB, stop <-chan struct{}) error {
	for {
		cur, err := db.LifecycleCursor()
		if err != nil {
			return err
		}
		rows, err := db.ListAudit(store.AuditFilter{After: cur, Flagged: true}, batch)
		if err != nil {
			return err
		}
		p.Metrics.LifecycleLag(len(rows))
		if len(rows) == 0 {
			return nil
		}
		for n, r := range rows {
			if r.Status == store.AuditPending {
				return nil
			}
			if _, err := p.publish(db, r, stop); err != nil {
				return err
			}
			if err := db.SetLifecycleCursor(r.Seq); err != nil {
				return fmt.Errorf("advance the lifecycle cursor to %d: %w", r.Seq, err)
			}
			p.Metrics.LifecycleLag(len(rows) - n - 1)
		}
	}
}

// publish delivers row r to every target, retrying a transient failure with back-off; published is false for
// a row that makes no event.
func (p *Publisher) publish(db *store.DB, r store.AuditRow, stop <-chan struct{}) (published bool, err error) {
	e, err := db.AuditEntity(r.Seq)
	if err != nil {
		return false, err
	}
	ev, ok := Build(p.Node, r, e)
	if !ok {
		return false, nil
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return false, fmt.Errorf("encode event %s: %w", ev.ID, err)
	}
	sum := sha256.Sum256([]byte(ev.ID))
	env := &sinks.Envelope{Source: SourceID, Tenant: r.Tenant, ReceivedAt: r.At, ContentType: ContentType,
		Body: body, Verification: sinks.VerificationSkipped}
	copy(env.ID[:], sum[:16])
	env.ID[6], env.ID[8] = env.ID[6]&0x0f|0x50, env.ID[8]&0x3f|0x80 // a name-based (v5-shaped) UUID
	log := p.Log.With().Str("event_id", ev.ID).Str("type", ev.Type).Uint64("audit_seq", r.Seq).Logger()
	for _, t := range p.Targets {
		wait := p.MinBackoff
		for attempt := 1; ; attempt++ {
			env.Attempt = attempt
			ctx, cancel := context.WithTimeout(context.Background(), p.Timeout)
			err := sinks.SafeDeliver(ctx, t.Sink, env)
			cancel()
			if err == nil {
				p.Metrics.LifecyclePublished(t.Name)
				break
			}
			class, after := sinks.Classify(err)
			if class == sinks.PermanentClass {
				p.Metrics.LifecycleFailed("permanent")
				log.Error().Err(err).Str("sink", t.Name).Msg("lifecycle: the sink refused the event for good; it is lost for that sink")
				break
			}
			p.Metrics.LifecycleFailed("transient")
			d := max(wait, min(after, p.MaxBackoff))
			log.Warn().Err(err).Str("sink", t.Name).Int("attempt", attempt).Dur("retry_in", d).Msg("lifecycle: delivery failed")
			select {
			case <-stop:
				return false, errStopped
			case <-time.After(d):
			}
			wait = min(wait*2, p.MaxBackoff)
		}
	}
	return true, nil
}
