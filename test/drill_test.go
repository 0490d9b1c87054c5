//go:build drill

package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ankusa-go/ankusa/test/fixture/s3fake"
	"github.com/ankusa-go/ankusa/test/poll"
)

// TestFleetDrillDual is the fleet drill of wal.type dual (design: "A replacement node started on an empty
// volume with the lost node's intake.node_id restores the latest backup and replays the log from the backup's
// offset: every acked hook comes back"; proofs: "the fleet drill ... host loss, the log's brokers down, a
// secondary-backup-only restore"). Three kfake brokers hold the intake topic; nodes A and B (node ids node-a,
// node-b) back up into one S3 bucket every 500 ms and deliver to one recording HTTP sink, under a steady load
// each. A is killed with SIGKILL and its data dir deleted; a replacement with node id node-a starts on an
// empty volume. Every hook either node acked must reach the sink.
func TestFleetDrillDual(t *testing.T) {
	for _, v := range []struct {
		name          string
		brokerDown    bool // one of the three brokers is removed during the load, before the kill
		secondaryOnly bool // the replacement's primary backup location cannot be read
	}{
		{name: "host-loss"},
		{name: "one-broker-down", brokerDown: true},
		{name: "secondary-backup-only", secondaryOnly: true},
	} {
		t.Run(v.name, func(t *testing.T) { fleetDrill(t, v.brokerDown, v.secondaryOnly) })
	}
}

func fleetDrill(t *testing.T, brokerDown, secondaryOnly bool) {
	t0 := time.Now()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "ankusa-intake"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	s3 := s3fake.Start(t)
	s3b := s3fake.Start(t) // the secondary backup location

	rec := &recorder{seen: map[string]int{}}
	sink := httptest.NewServer(rec)
	defer sink.Close()

	nodeSources := func(node, primary string) string {
		return fmt.Sprintf(`wal:
  type: dual
intake:
  brokers: [%s]
  node_id: %s
  publish_timeout_ms: 2000
  reconcile_interval_ms: 200
sources:
  sample:
    sinks:
      - type: http
        url: %s/hook
    retry:
      base_ms: 100
      max_ms: 500
      max_attempts: 10000
dispatch:
  breaker_failures: 0
backup:
  enabled: true
  interval_ms: 500
  keep: 2
  signing_key: "fleet-drill-signing-key"
  store:
%s  secondary:
%s`, strings.Join(brokers, ", "), node, sink.URL, primary, s3b.YAML(node+"/", 4))
	}
	dirA := t.TempDir()
	a := startNodeRoles(t, "drill", dirA, "edge, dispatch", nodeSources("node-a", s3.YAML("node-a/", 4)))
	b := startNodeRoles(t, "drill", t.TempDir(), "edge, dispatch", nodeSources("node-b", s3.YAML("node-b/", 4)))
	t.Logf("phase: A and B ready: %v", time.Since(t0).Round(time.Millisecond))

	var (
		mu           sync.Mutex
		acked        = map[string]string{} // id -> node
		refused      = map[string]int{}
		ctx, cancelB = context.WithCancel(context.Background())
	)
	ctxA, cancelA := context.WithCancel(ctx)
	var wg sync.WaitGroup
	steady := func(ctx context.Context, n *node, name string) {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond) // about 200 hooks/s per node
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			status, body, err := post(ctx, n.url("/webhooks/sample"), fmt.Appendf(nil, `{"node":%q,"n":%d}`, name, i))
			mu.Lock()
			switch {
			case err != nil:
				refused["error"]++
			case status == http.StatusCreated:
				var ack struct{ ID string }
				if json.Unmarshal(body, &ack) == nil && ack.ID != "" {
					acked[ack.ID] = name
				}
			default:
				var r struct{ Error string }
				_ = json.Unmarshal(body, &r)
				refused[strconv.Itoa(status)+" "+r.Error]++
			}
			mu.Unlock()
		}
	}
	wg.Add(2)
	go steady(ctxA, a, "A")
	go steady(ctx, b, "B")
	defer func() { cancelB(); wg.Wait() }()

	time.Sleep(1500 * time.Millisecond)
	if brokerDown {
		// Kafka with replication factor 3 and min.insync.replicas 2 keeps taking writes with one broker gone;
		// kfake has no replication, so the broker's partitions move to the two left (their data is shared).
		victim := cluster.LeaderFor("ankusa-intake", 0)
		if err := cluster.RemoveNode(victim); err != nil {
			t.Fatal(err)
		}
		t.Logf("phase: broker %d removed: %v", victim, time.Since(t0).Round(time.Millisecond))
		time.Sleep(1500 * time.Millisecond)
	}
	a.kill()
	cancelA()
	if err := os.RemoveAll(dirA); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	ackedA := 0
	for _, n := range acked {
		if n == "A" {
			ackedA++
		}
	}
	mu.Unlock()
	t.Logf("phase: A killed (SIGKILL) and its data dir deleted after %d acks: %v", ackedA, time.Since(t0).Round(time.Millisecond))

	primaryA := s3.YAML("node-a/", 4)
	if secondaryOnly {
		// The primary location of the replacement cannot be read: a closed port.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := "http://" + ln.Addr().String()
		ln.Close()
		primaryA = strings.Replace(primaryA, s3.Endpoint, dead, 1)
	}
	dirA2 := t.TempDir()
	a2 := startNodeRoles(t, "drill", dirA2, "edge, dispatch", nodeSources("node-a", primaryA))
	if !strings.Contains(a2.log(), "store restored from backup") {
		t.Fatalf("the replacement did not restore a backup; log:\n%s", a2.log())
	}
	if !strings.Contains(a2.log(), "intake recovery done") {
		t.Fatalf("the replacement did not replay the intake log; log:\n%s", a2.log())
	}
	t.Logf("phase: replacement restored, replayed and ready: %v", time.Since(t0).Round(time.Millisecond))
	for _, line := range strings.Split(a2.log(), "\n") {
		if strings.Contains(line, "intake recovery done") || strings.Contains(line, "store restored from backup") {
			t.Logf("replacement: %s", line)
		}
	}
	time.Sleep(time.Second)
	cancelB()
	wg.Wait()

	mu.Lock()
	ids := make([]string, 0, len(acked))
	for id := range acked {
		ids = append(ids, id)
	}
	mu.Unlock()
	missing := 0
	err = poll.Wait(90*time.Second, func() error {
		missing = 0
		for _, id := range ids {
			if !rec.has(id) {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d acked hooks not delivered", missing, len(ids))
		}
		return nil
	})
	delivered := len(ids) - missing
	t.Logf("acked=%d (A %d, B %d) delivered=%d missing=%d; refused during the drill: %v; sink saw %d distinct ids in %v",
		len(ids), ackedA, len(ids)-ackedA, delivered, missing, refused, rec.distinct(), time.Since(t0).Round(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []*node{b, a2} {
		if err := n.stop(); err != nil {
			t.Error(err)
		}
	}
}
