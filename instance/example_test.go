package instance_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
)

// Two instances embedded in one program (docs/embedding.md): each has its own config,
// data dir, ports, actor tree and metrics registry; each is drained on its own.
func Example() {
	dataDir, err := os.MkdirTemp("", "ankusa-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dataDir)
	log := zerolog.New(os.Stderr).Level(zerolog.WarnLevel)

	var insts []*instance.Instance
	for _, name := range []string{"orders", "billing"} {
		// The same YAML as a config file; config.Load reads one from disk. Port 0 is a free
		// port, read back with IngestAddr.
		cfg, err := config.Parse([]byte(`
instance: `+name+`
node: {data_dir: `+dataDir+`, roles: [edge]}
http: {ip: 127.0.0.1, port: 0}
admin: {port: 0}
listener: {drain_delay_ms: 0}
sources:
  sample:
    sinks: [{type: log}]
`), nil)
		if err != nil {
			panic(err)
		}
		inst, err := instance.New(cfg, instance.Options{Log: log, Version: "example"})
		if err != nil {
			panic(err)
		}
		if err := inst.Start(); err != nil {
			panic(err)
		}
		insts = append(insts, inst)
	}

	for _, inst := range insts {
		resp, err := http.Post("http://"+inst.IngestAddr()+"/webhooks/sample", "application/json", strings.NewReader(`{"hello":"world"}`))
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(inst.Config().Instance, resp.StatusCode)
	}

	// Drain answers every request in flight, then stops the tree and closes the store.
	for _, inst := range insts {
		if err := inst.Drain(context.Background()); err != nil {
			panic(err)
		}
	}
	// Output:
	// orders 201
	// billing 201
}
