package deploy_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
)

// No Docker engine runs here, so the image is never built in a test. What can drift
// without one is checked instead: the Dockerfile against go.mod, the config it ships, and
// the binary's own loading and readiness.

// instruction is one Dockerfile instruction: its keyword and the rest of its line, with
// continuation lines joined.
type instruction struct {
	cmd, args string
}

func dockerfile(t *testing.T) (build, run []instruction) {
	t.Helper()
	raw, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var all []instruction
	var cur strings.Builder
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			continue
		}
		cmd, args, _ := strings.Cut(text, " ")
		all = append(all, instruction{strings.ToUpper(cmd), strings.Join(strings.Fields(args), " ")})
	}
	var stages [][]instruction
	for _, in := range all {
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile: %s before the first FROM", in.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	if len(stages) != 2 {
		t.Fatalf("Dockerfile has %d stages, want build and run", len(stages))
	}
	return stages[0], stages[1]
}

func find(ins []instruction, cmd string) []string {
	var out []string
	for _, in := range ins {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

func one(t *testing.T, ins []instruction, cmd string) string {
	t.Helper()
	got := find(ins, cmd)
	if len(got) != 1 {
		t.Fatalf("Dockerfile run stage: %d %s instructions, want 1 (%q)", len(got), cmd, got)
	}
	return got[0]
}

func jsonArray(t *testing.T, what, s string) []string {
	t.Helper()
	var a []string
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		t.Fatalf("%s %q is not the exec (JSON) form: %v", what, s, err)
	}
	return a
}

// imageEnv is the run stage's ENV as the binary's environment lookup.
func imageEnv(t *testing.T, run []instruction) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, args := range find(run, "ENV") {
		for _, kv := range strings.Fields(args) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("ENV %q: want KEY=value", args)
			}
			env[k] = v
		}
	}
	return env
}

// copyDest returns the destination of the COPY whose source is src (with the flag, e.g.
// --from=build, when given).
func copyDest(t *testing.T, run []instruction, flag, src string) string {
	t.Helper()
	for _, args := range find(run, "COPY") {
		f := strings.Fields(args)
		if flag != "" {
			if f[0] != flag {
				continue
			}
			f = f[1:]
		}
		if len(f) == 2 && f[0] == src {
			return f[1]
		}
	}
	t.Fatalf("Dockerfile run stage copies no %s %s", flag, src)
	return ""
}

func TestDockerfileBuildsTheBinaryWithCgo(t *testing.T) {
	build, run := dockerfile(t)
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if goVersion == nil {
		t.Fatal("go.mod has no go directive")
	}
	if want := "golang:" + string(goVersion[1]) + "-bookworm AS build"; build[0].args != want {
		t.Errorf("build stage FROM %q, want %q (go.mod's go version, Debian bookworm for RocksDB 7.8)", build[0].args, want)
	}
	if want := "debian:bookworm-slim"; run[0].args != want {
		t.Errorf("run stage FROM %q, want %q: the same Debian release as the builder, so its librocksdb is the one linked", run[0].args, want)
	}
	runs := strings.Join(find(build, "RUN"), "\n")
	for _, want := range []string{"librocksdb-dev", "CGO_ENABLED=1 go build", "-X main.version=", "./cmd/ankusa"} {
		if !strings.Contains(runs, want) {
			t.Errorf("build stage RUN does not contain %q", want)
		}
	}
	lib := regexp.MustCompile(`\blibrocksdb(\d+\.\d+)\b`).FindStringSubmatch(strings.Join(find(run, "RUN"), "\n"))
	if lib == nil {
		t.Fatal("run stage installs no librocksdb<version> runtime package")
	}
	// The runtime package must be the library the builder's headers belong to; this machine
	// is bookworm too, so its librocksdb-dev says which.
	if dpkg, err := exec.LookPath("dpkg-query"); err == nil {
		out, err := exec.Command(dpkg, "-W", "-f", "${Version}", "librocksdb-dev").Output()
		if err == nil && !strings.HasPrefix(string(out), lib[1]+".") {
			t.Errorf("run stage installs librocksdb%s, but librocksdb-dev here is %s", lib[1], out)
		}
	}
	bin := copyDest(t, run, "--from=build", "/out/ankusa")
	if !strings.Contains(runs, "-o /out/ankusa") {
		t.Error("build stage does not write the binary the run stage copies (/out/ankusa)")
	}
	entry := jsonArray(t, "ENTRYPOINT", one(t, run, "ENTRYPOINT"))
	if !slices.Equal(entry, []string{bin, "serve"}) {
		t.Errorf("ENTRYPOINT %q, want [%q serve]", entry, bin)
	}
	if user := one(t, run, "USER"); user == "root" || user == "0" || strings.HasPrefix(user, "0:") || strings.HasPrefix(user, "root:") {
		t.Errorf("USER %q: the image must not run as root", user)
	}
	if one(t, run, "STOPSIGNAL") != "SIGTERM" {
		t.Error("STOPSIGNAL must be SIGTERM, the signal serve drains on")
	}
}

// The config the image ships loads and passes every check serve runs at boot, under the
// image's environment; its data dir is the image's volume, created for the image's user;
// the image exposes exactly the listeners the config opens to the network; the health
// check asks /ready on the admin listener the config binds; and admin stays on loopback
// (its open routes answer anyone, and the shipped config names no principals).
func TestDockerfileAgreesWithTheShippedConfig(t *testing.T) {
	_, run := dockerfile(t)
	env := imageEnv(t, run)
	cfgPath, ok := env["ANKUSA_CONFIG"]
	if !ok {
		t.Fatal("the image sets no ANKUSA_CONFIG")
	}
	if dest := copyDest(t, run, "", "deploy/ankusa.yml"); dest != cfgPath {
		t.Fatalf("deploy/ankusa.yml is copied to %s, ANKUSA_CONFIG names %s", dest, cfgPath)
	}
	cfg, err := config.Load("ankusa.yml", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if err := instance.Check(cfg); err != nil {
		t.Fatalf("the shipped config is refused at boot: %v", err)
	}
	volumes := jsonArray(t, "VOLUME", one(t, run, "VOLUME"))
	if !slices.Equal(volumes, []string{cfg.Node.DataDir}) {
		t.Errorf("VOLUME %q, want the data dir %q only", volumes, cfg.Node.DataDir)
	}
	if raw, _ := os.ReadFile("ankusa.yml"); !strings.Contains(string(raw), "data_dir: "+cfg.Node.DataDir+"\n") {
		t.Errorf("deploy/ankusa.yml does not name the data dir %s itself (only the image's environment does)", cfg.Node.DataDir)
	}
	if runs := strings.Join(find(run, "RUN"), "\n"); !strings.Contains(runs, "install -d -o ankusa -g ankusa -m 0750 "+cfg.Node.DataDir) {
		t.Errorf("the run stage does not create %s for the image's user", cfg.Node.DataDir)
	}

	loopback := func(ip string) bool { a := net.ParseIP(ip); return a != nil && a.IsLoopback() }
	var open []int
	if cfg.HasRole(config.RoleEdge) && !loopback(cfg.HTTP.IP) {
		open = append(open, cfg.HTTP.Port)
	}
	if cfg.HasRole(config.RoleClaimCheck) && !loopback(cfg.ClaimCheck.IP) {
		open = append(open, cfg.ClaimCheck.Port)
	}
	if cfg.Admin.Enabled && !loopback(cfg.Admin.IP) {
		t.Errorf("admin listens on %q: /metrics, /health and /ready answer without a token and the image ships no principals; keep it on loopback (docs/deployment.md)", cfg.Admin.IP)
	}
	var exposed []int
	for _, args := range find(run, "EXPOSE") {
		for _, p := range strings.Fields(args) {
			n, err := strconv.Atoi(strings.TrimSuffix(p, "/tcp"))
			if err != nil {
				t.Fatalf("EXPOSE %q", args)
			}
			exposed = append(exposed, n)
		}
	}
	slices.Sort(open)
	slices.Sort(exposed)
	if !slices.Equal(exposed, open) {
		t.Errorf("EXPOSE %v, want the ports the config opens beyond loopback %v", exposed, open)
	}

	hc := one(t, run, "HEALTHCHECK")
	_, cmd, ok := strings.Cut(hc, " CMD ")
	if !ok {
		t.Fatalf("HEALTHCHECK %q has no CMD", hc)
	}
	argv := jsonArray(t, "HEALTHCHECK CMD", cmd)
	u, err := url.Parse(argv[len(argv)-1])
	if err != nil {
		t.Fatalf("HEALTHCHECK %q: the last argument is not a URL: %v", hc, err)
	}
	want := "http://" + net.JoinHostPort(cfg.Admin.IP, strconv.Itoa(cfg.Admin.Port)) + "/ready"
	if u.String() != want {
		t.Errorf("HEALTHCHECK asks %s, want %s", u, want)
	}
	if argv[0] != "curl" || !slices.Contains(argv, "-f") && !slices.Contains(argv, "-fsS") {
		t.Errorf("HEALTHCHECK %q: want curl -f, which fails on the 503 of an unready node", argv)
	}
	if !strings.Contains(strings.Join(find(run, "RUN"), "\n"), " curl ") {
		t.Error("the run stage does not install curl, which the HEALTHCHECK runs")
	}
}

// The shipped config and the quickstart's, started as the image and the walkthrough start
// them (on free loopback ports and a temporary data dir), answer the health check's
// /ready with 200.
func TestShippedConfigsStartReady(t *testing.T) {
	for name, path := range map[string]string{"image": "ankusa.yml", "quickstart": "../examples/quickstart/ankusa.yml"} {
		t.Run(name, func(t *testing.T) {
			dataDir := t.TempDir()
			env := map[string]string{"ANKUSA_DATA_DIR": dataDir, "ANKUSA_HTTP_PORT": "0", "ANKUSA_ADMIN_PORT": "0"}
			cfg, err := config.Load(path, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			if err != nil {
				t.Fatal(err)
			}
			cfg.HTTP.IP = "127.0.0.1"
			cfg.Listener.DrainDelayMS = 0
			inst, err := instance.New(cfg, instance.Options{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
			if err != nil {
				t.Fatal(err)
			}
			if err := inst.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := inst.Stop(); err != nil {
					t.Error(err)
				}
			})
			c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
			defer c.CloseIdleConnections()
			resp, err := c.Get("http://" + inst.AdminAddr() + "/ready")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/ready answered %d, want 200", resp.StatusCode)
			}
		})
	}
}
