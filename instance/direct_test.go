package instance_test

import (
	"net"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
)

// Under wal.type none the instance builds its sinks before the tree starts; a boot that
// then fails (the ingest port is taken) closes them, so a broker client's goroutines do
// not outlive it (TestMain's goleak check).
func TestWalNoneFailedBootClosesItsSinks(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "hooks"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	cfg := config.Default()
	cfg.Instance, cfg.Node.DataDir, cfg.Node.Roles = "direct", t.TempDir(), []string{"edge"}
	cfg.WAL.Type = config.WALNone
	cfg.HTTP.IP, cfg.HTTP.Port = "127.0.0.1", taken.Addr().(*net.TCPAddr).Port
	cfg.Admin.Enabled = false
	cfg.Sources = map[string]config.Source{"gh": {Tenant: "default", Sinks: []config.SinkSpec{
		{Type: "kafka", Options: map[string]any{"brokers": []any{cluster.ListenAddrs()[0]}, "topic": "hooks"}}}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	inst, err := instance.New(cfg, instance.Options{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.Start(); err == nil || !strings.Contains(err.Error(), "listen") {
		_ = inst.Stop()
		t.Fatalf("Start on a taken port: %v, want a listen error", err)
	}
}
