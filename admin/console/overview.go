package console

import (
	"net/http"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// figures is what the overview shows and its script polls (GET /console/overview.json).
type figures struct {
	At             int64              `json:"at"` // unix ms of the sample: the script turns two samples into rates
	Acks           float64            `json:"acks"`
	Refusals       map[string]float64 `json:"refusals"` // by reason or outcome, since the start
	Pending        float64            `json:"pending"`
	Scheduled      float64            `json:"scheduled"`
	Inflight       float64            `json:"inflight"`
	OldestDueAge   float64            `json:"oldest_due_age_seconds"`
	BreakersOpen   float64            `json:"breakers_open"`
	Dead           float64            `json:"dead"`
	Quarantined    float64            `json:"quarantined"`
	Store          string             `json:"store"`
	Ready          bool               `json:"ready"`
	BackupAge      *float64           `json:"backup_age_seconds,omitempty"`
	BackupFailures float64            `json:"backup_failures"`
	DiskFree       *float64           `json:"disk_free_bytes,omitempty"`
}

// acked outcomes of ankusa_ingest_requests_total: the rest of its outcomes are refusals, like every reason of
// ankusa_ingest_refused_total.
var ackOutcomes = map[string]bool{"committed": true, "duplicate": true, "quarantined": true}

// figuresOf reads the node's own counters: the store's through /v1/wal (which also checks that the principal
// may read node figures), the rest from the instance's registry.
func (c *Console) figuresOf(r *http.Request, s *session) (figures, answer) {
	f := figures{At: c.now().UnixMilli(), Refusals: map[string]float64{}}
	a := c.call(r, s, "GET", "/v1/wal", nil, nil)
	if !a.ok() {
		return f, a
	}
	num := func(m map[string]any, k string) float64 {
		n, _ := m[k].(interface{ Float64() (float64, error) })
		if n == nil {
			return 0
		}
		v, _ := n.Float64()
		return v
	}
	f.Pending, f.Scheduled, f.Inflight, f.Dead = num(a.body, "pending"), num(a.body, "scheduled"),
		num(a.body, "inflight"), num(a.body, "dead")
	if q, ok := a.body["quarantine"].(map[string]any); ok {
		f.Quarantined = num(q, "entries")
	}
	d := c.api.Deps()
	if d.Ready != nil {
		ok, body := d.Ready(c.now())
		f.Ready = ok
		f.Store, _ = body["store"].(string)
	}
	if d.Gatherer == nil {
		return f, a
	}
	mfs, err := d.Gatherer.Gather()
	if err != nil {
		c.log.Warn().Err(err).Msg("console: cannot gather the node's metrics")
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := value(m)
			switch mf.GetName() {
			case "ankusa_ingest_requests_total":
				if o := label(m, "outcome"); ackOutcomes[o] {
					f.Acks += v
				} else {
					f.Refusals[o] += v
				}
			case "ankusa_ingest_refused_total":
				f.Refusals[label(m, "reason")] += v
			case "ankusa_queue_oldest_due_age_seconds":
				f.OldestDueAge = v
			case "ankusa_dispatch_breakers_open":
				f.BreakersOpen += v
			case "ankusa_backup_age_seconds":
				f.BackupAge = &v
			case "ankusa_backup_failures_total":
				f.BackupFailures += v
			case "ankusa_disk_free_bytes":
				f.DiskFree = &v
			}
		}
	}
	return f, a
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// perSource reads the acked and refused counts of each source from the registry.
func (c *Console) perSource() map[string][2]float64 {
	out := map[string][2]float64{}
	g := c.api.Deps().Gatherer
	if g == nil {
		return out
	}
	mfs, _ := g.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "ankusa_ingest_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			src := label(m, "source_id")
			n := out[src]
			if ackOutcomes[label(m, "outcome")] {
				n[0] += value(m)
			} else {
				n[1] += value(m)
			}
			out[src] = n
		}
	}
	return out
}

type reasonCount struct {
	Reason string
	Count  float64
}

func sortedRefusals(m map[string]float64) []reasonCount {
	out := make([]reasonCount, 0, len(m))
	for k, v := range m {
		out = append(out, reasonCount{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Count > out[j].Count || out[i].Count == out[j].Count && out[i].Reason < out[j].Reason
	})
	return out
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, s *session) {
	f, a := c.figuresOf(r, s)
	if !a.ok() {
		c.render(w, r, a.status, "overview", s, view{Title: "Overview", Active: "overview",
			Error: a.refusal() + " Node figures need a principal of every tenant with config:read or metrics:read."})
		return
	}
	c.render(w, r, http.StatusOK, "overview", s, view{Title: "Overview", Active: "overview", Data: map[string]any{
		"F": f, "Refusals": sortedRefusals(f.Refusals), "Instance": c.api.Config().Instance, "Version": c.api.Version(),
		"Sampled": time.UnixMilli(f.At).UTC().Format(time.RFC3339),
	}})
}

func (c *Console) overviewJSON(w http.ResponseWriter, r *http.Request, s *session) {
	f, a := c.figuresOf(r, s)
	if !a.ok() {
		writeJSON(w, a.status, a.body)
		return
	}
	writeJSON(w, http.StatusOK, f)
}
