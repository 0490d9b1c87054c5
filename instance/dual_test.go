package instance_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/intake"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
)

const intakeTopic = "ankusa-intake"

// intakeCluster is a three-broker kfake cluster seeded with the intake topic, on fixed ports with its data on
// disk, so it can be stopped and started again as the same cluster; it closes when the test ends.
type intakeCluster struct {
	t     *testing.T
	ports []int
	dir   string
	c     *kfake.Cluster
}

func newIntakeCluster(t *testing.T) *intakeCluster {
	t.Helper()
	ic := &intakeCluster{t: t, dir: t.TempDir()}
	for range 3 {
		ic.ports = append(ic.ports, closedPort(t))
	}
	ic.start()
	t.Cleanup(func() { ic.c.Close() })
	return ic
}

func (ic *intakeCluster) start() {
	ic.t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.Ports(ic.ports...), kfake.SeedTopics(3, intakeTopic),
		kfake.DataDir(ic.dir), kfake.SyncWrites())
	if err != nil {
		ic.t.Fatal(err)
	}
	ic.c = c
}

// withDual runs wal.type dual against brokers, with a deduped source "sample" (key: header X-Event-Id).
func withDual(brokers []string, node string) func(*config.Config) {
	return func(cfg *config.Config) {
		cfg.Node.Roles = []string{"edge"}
		cfg.WAL.Type = config.WALDual
		cfg.Intake.Brokers = brokers
		cfg.Intake.NodeID = node
		cfg.Intake.BreakerFailures = 2
		cfg.Intake.PublishTimeoutMS = 1000
		cfg.Intake.ReconcileIntervalMS = 100
		src := fixture.LogSource("default", 1)
		src.Dedupe = &config.DedupeSpec{Header: "X-Event-Id", TTLSeconds: 3600}
		cfg.Sources = map[string]config.Source{"sample": src}
	}
}

type answer struct {
	status     int
	reason, id string
	duplicate  bool
	retryAfter string
}

func postEvent(t *testing.T, inst *instance.Instance, event string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+inst.IngestAddr()+"/webhooks/sample", strings.NewReader(`{"event":"`+event+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Event-Id", event)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var b struct {
		Reason    string `json:"error"`
		ID        string `json:"id"`
		Duplicate bool   `json:"duplicate"`
	}
	_ = json.Unmarshal(body, &b)
	return answer{status: resp.StatusCode, reason: b.Reason, id: b.ID, duplicate: b.Duplicate, retryAfter: resp.Header.Get("Retry-After")}
}

func waitRecovered(t *testing.T, inst *instance.Instance) {
	t.Helper()
	poll.True(t, 20*time.Second, "intake recovery done", func() bool { return !inst.Intake().Recovering() })
}

// loggedIDs reads the intake topic back and returns the hook ids of node's records (hex), with how often each
// occurs.
func loggedIDs(t *testing.T, brokers []string, node string) map[string]int {
	t.Helper()
	l, err := intake.NewLog(intake.LogOptions{Brokers: brokers, Topic: intakeTopic, Node: node, PublishTimeout: 5 * time.Second, MaxRecordBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ids := map[string]int{}
	_, err = l.Read(ctx, nil, func(_ int32, _ int64, v []byte) error {
		r, err := intake.DecodeRecord(v)
		if err != nil {
			return err
		}
		if r.Node == node {
			for _, e := range r.Entries {
				ids[fmt.Sprintf("%x", e.ID)]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func hexID(id string) string { return strings.ReplaceAll(id, "-", "") }

// TestNoAckWithoutIntakeConfirm proves the dual guarantee (design: "The log never gives up an ack silently: a
// node that cannot confirm in it answers 503 intake_unavailable and acks nothing, never 'disk only'. A hook
// that half-persists ... is carried to completion by a reconciler, not undone"; inventory E.7: "retry sees 503
// intake_pending, then 201 duplicate"): with the log's brokers refusing every produce, no request gets a 2xx;
// the first ones are synced here and held pending, then the open breaker refuses before either half is
// touched; a retry of a held hook is intake_pending; when the brokers return the reconciler publishes every
// held hook, and the retry is 201 duplicate with the first id.
func TestNoAckWithoutIntakeConfirm(t *testing.T) {
	t.Run("partitioned", func(t *testing.T) {
		var h *kfake.FaultHandle
		noAckWithoutIntakeConfirm(t, func(ic *intakeCluster) {
			h = ic.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: intakeTopic, Err: kerr.NotEnoughReplicas, Count: -1})
		}, func(*intakeCluster) { h.Remove() })
	})
	t.Run("stopped", func(t *testing.T) {
		noAckWithoutIntakeConfirm(t, func(ic *intakeCluster) { ic.c.Close() }, func(ic *intakeCluster) { ic.start() })
	})
}

func noAckWithoutIntakeConfirm(t *testing.T, down, up func(*intakeCluster)) {
	ic := newIntakeCluster(t)
	brokers := ic.c.ListenAddrs()
	inst := start(t, "dual", withDual(brokers, "node-a"))
	waitRecovered(t, inst)

	var acked []string
	for i := range 5 {
		a := postEvent(t, inst, fmt.Sprintf("ok-%d", i))
		if a.status != http.StatusCreated {
			t.Fatalf("healthy log: post %d = %+v", i, a)
		}
		acked = append(acked, a.id)
	}

	down(ic)
	var held []string // events synced here whose publish failed
	refusedBefore := 0
	for i := range 6 {
		ev := fmt.Sprintf("down-%d", i)
		next := inst.Store().NextSeq()
		a := postEvent(t, inst, ev)
		if a.status/100 == 2 {
			t.Fatalf("brokers down: post %s answered %+v", ev, a)
		}
		if a.status != http.StatusServiceUnavailable || a.reason != "intake_unavailable" || a.retryAfter != "2" {
			t.Fatalf("brokers down: post %s = %+v, want 503 intake_unavailable Retry-After 2", ev, a)
		}
		if inst.Store().NextSeq() == next {
			refusedBefore++ // the breaker refused before either half was touched
		} else {
			held = append(held, ev)
		}
	}
	t.Logf("brokers down: 6 posts, 0 acked, %d held (synced here, not confirmed), %d refused by the open breaker before either half", len(held), refusedBefore)
	if len(held) != 2 || refusedBefore != 4 {
		t.Fatalf("held %d, refused before touching %d; want 2 and 4 (intake.breaker_failures 2)", len(held), refusedBefore)
	}
	if n := inst.Intake().PendingCount(); n != len(held) {
		t.Fatalf("pending set holds %d, want %d", n, len(held))
	}
	if g := testutil.ToFloat64(inst.Telemetry().Metrics.Intake.Ready); g != 0 {
		t.Fatalf("ankusa_intake_ready = %v with the breaker open", g)
	}
	if a := postEvent(t, inst, held[0]); a.status != http.StatusServiceUnavailable || a.reason != "intake_pending" {
		t.Fatalf("retry of a held hook = %+v, want 503 intake_pending", a)
	}

	up(ic)
	poll.True(t, 20*time.Second, "pending set empty, breaker closed", func() bool { return inst.Intake().PendingCount() == 0 && inst.Intake().Ready() })
	for _, ev := range held {
		a := postEvent(t, inst, ev)
		orig, ok, err := inst.Store().LookupDedupe("default", "sample", ev, time.Now())
		if err != nil || !ok {
			t.Fatalf("dedupe key of %s: %v %v", ev, ok, err)
		}
		if a.status != http.StatusCreated || !a.duplicate || hexID(a.id) != fmt.Sprintf("%x", orig) {
			t.Fatalf("retry of %s after the reconciler = %+v, want 201 duplicate of %x", ev, a, orig)
		}
		acked = append(acked, a.id)
	}
	logged := loggedIDs(t, brokers, "node-a")
	for _, id := range acked {
		if logged[hexID(id)] == 0 {
			t.Fatalf("acked hook %s is not in the intake log", id)
		}
	}
	t.Logf("brokers back: reconciler completed %d held hooks; %d acked hooks, all %d in the intake log; ankusa_intake_pending_records=%v",
		len(held), len(acked), len(acked), testutil.ToFloat64(inst.Telemetry().Metrics.Intake.PendingRecords))
}

// Inventory A.5, GET /v1/wal under wal.type dual: the store figures carry an intake object (node, state,
// pending, watermark, the partitions this node confirmed offsets in); the state follows the log (up, then down
// while the brokers refuse, with the refused hooks counted pending). RocksDB's estimates of the hooks and
// delivery rows held are there too.
func TestWALStatsShowTheIntakeLog(t *testing.T) {
	ic := newIntakeCluster(t)
	const token = "wal-token"
	sum := sha256.Sum256([]byte(token))
	inst := start(t, "dualwal", func(cfg *config.Config) {
		withDual(ic.c.ListenAddrs(), "node-w")(cfg)
		cfg.Admin.Principals = []config.Principal{{Name: "ops", TokenSHA256: hex.EncodeToString(sum[:]),
			Scopes: []string{"config:read"}, Tenants: []string{"*"}}}
	})
	waitRecovered(t, inst)
	wal := func() map[string]any {
		req, _ := http.NewRequest(http.MethodGet, "http://"+inst.AdminAddr()+"/v1/wal", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
			t.Fatalf("GET /v1/wal: %d", resp.StatusCode)
		}
		return out
	}
	for i := range 3 {
		if a := postEvent(t, inst, fmt.Sprintf("w-%d", i)); a.status != http.StatusCreated {
			t.Fatalf("post %d: %+v", i, a)
		}
	}
	w := wal()
	in, _ := w["intake"].(map[string]any)
	parts, _ := in["partitions"].([]any)
	if in["node"] != "node-w" || in["state"] != "up" || in["pending"] != 0.0 || in["watermark"].(float64) < 3 || len(parts) == 0 {
		t.Fatalf("intake after three hooks: %v", in)
	}
	if w["hooks"].(float64) < 3 || w["deliveries"].(float64) < 3 || w["disk_bytes"] == nil {
		t.Fatalf("estimates after three hooks: hooks %v, deliveries %v, disk_bytes %v", w["hooks"], w["deliveries"], w["disk_bytes"])
	}
	t.Logf("up: intake %v; hooks %v, deliveries %v, disk_bytes %v", in, w["hooks"], w["deliveries"], w["disk_bytes"])

	h := ic.c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: intakeTopic, Err: kerr.NotEnoughReplicas, Count: -1})
	poll.True(t, 20*time.Second, "the intake state down", func() bool {
		postEvent(t, inst, fmt.Sprintf("down-%d", time.Now().UnixNano()))
		in, _ := wal()["intake"].(map[string]any)
		return in["state"] == "down"
	})
	in, _ = wal()["intake"].(map[string]any)
	if in["pending"].(float64) < 1 {
		t.Fatalf("intake while the log refuses: %v, want the refused hooks pending", in)
	}
	t.Logf("down: intake %v", in)
	h.Remove()
	poll.True(t, 20*time.Second, "the intake state up with nothing pending", func() bool {
		postEvent(t, inst, fmt.Sprintf("up-%d", time.Now().UnixNano()))
		in, _ := wal()["intake"].(map[string]any)
		return in["state"] == "up" && in["pending"] == 0.0
	})
}
