package deploy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/test/fixture"
	"github.com/ankusa-go/ankusa/test/poll"
	"github.com/ankusa-go/ankusa/test/services"
)

const (
	rulesFile     = "monitoring/prometheus-rules.yaml"
	dashboardFile = "monitoring/grafana/ankusa.json"
	runbookURL    = "https://github.com/ankusa-go/ankusa/blob/main/docs/runbooks/"
	runbookDir    = "../docs/runbooks"
	deploymentDoc = "../docs/deployment.md"
)

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type ruleGroup struct {
	Name  string `yaml:"name"`
	Rules []rule `yaml:"rules"`
}

func loadRules(t *testing.T) []ruleGroup {
	t.Helper()
	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []ruleGroup `yaml:"groups"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	if len(f.Groups) == 0 {
		t.Fatalf("%s has no groups", rulesFile)
	}
	return f.Groups
}

func alerts(t *testing.T) []rule {
	var all []rule
	for _, g := range loadRules(t) {
		all = append(all, g.Rules...)
	}
	return all
}

// Design (Observability): "mise run check:monitoring runs promtool check rules, the unit
// tests in prometheus-rules.test.yaml". Here the unit tests are monitoring/tests/*.yaml.
func TestAlertRulesPassPromtool(t *testing.T) {
	promtool := services.Command(t, "promtool", "Debian: apt-get install -y prometheus; scripts/prereq.sh installs it")
	tests, err := filepath.Glob("monitoring/tests/*.yaml")
	if err != nil || len(tests) == 0 {
		t.Fatalf("no rule unit tests in monitoring/tests (%v)", err)
	}
	for _, args := range [][]string{{"check", "rules", rulesFile}, append([]string{"test", "rules"}, tests...)} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("promtool %s: %v", strings.Join(args, " "), err)
		}
	}
}

// Each alert has a unit test in which it fires: an alert whose expression can never be
// true (a misspelt label value, a wrong unit) passes promtool's checks but not this.
func TestEveryAlertHasAFiringUnitTest(t *testing.T) {
	tests, _ := filepath.Glob("monitoring/tests/*.yaml")
	fires := map[string]bool{}
	for _, p := range tests {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string `yaml:"alertname"`
					ExpAlerts []any  `yaml:"exp_alerts"`
				} `yaml:"alert_rule_test"`
			} `yaml:"tests"`
		}
		if err := yaml.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, tc := range f.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				}
			}
		}
	}
	for _, r := range alerts(t) {
		if !fires[r.Alert] {
			t.Errorf("alert %s has no unit test in monitoring/tests that expects it to fire", r.Alert)
		}
	}
}

// Design: "Every alert's runbook_url names a page in docs/runbooks/ (symptom, metric,
// action, verification)"; check:monitoring "fails on an alert whose runbook is missing".
func TestEveryAlertNamesARunbook(t *testing.T) {
	used := map[string]bool{}
	for _, r := range alerts(t) {
		url := r.Annotations["runbook_url"]
		page, ok := strings.CutPrefix(url, runbookURL)
		if !ok || !strings.HasSuffix(page, ".md") || strings.Contains(page, "/") {
			t.Errorf("alert %s: runbook_url %q is not %s<page>.md", r.Alert, url, runbookURL)
			continue
		}
		used[page] = true
		raw, err := os.ReadFile(filepath.Join(runbookDir, page))
		if err != nil {
			t.Errorf("alert %s: runbook %s: %v", r.Alert, page, err)
			continue
		}
		text := string(raw)
		for _, part := range []string{"## Symptom", "## Metric", "## Action", "## Verification"} {
			if !strings.Contains(text, "\n"+part+"\n") {
				t.Errorf("runbook %s has no %q section", page, part)
			}
		}
		if !strings.Contains(text, "**"+r.Alert+"**") {
			t.Errorf("runbook %s does not name alert %s", page, r.Alert)
		}
		if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
			t.Errorf("alert %s needs a severity label and a summary", r.Alert)
		}
	}
	pages, _ := filepath.Glob(filepath.Join(runbookDir, "*.md"))
	for _, p := range pages {
		if b := filepath.Base(p); b != "README.md" && !used[b] {
			t.Errorf("runbook %s is named by no alert", b)
		}
	}
}

// Design: the rules file "has one alert per row of the SLO table (its slo annotation
// repeats the row)"; check:monitoring fails on "an SLO row without an alert". The table
// is the one in docs/deployment.md.
func TestEverySLORowHasAnAlert(t *testing.T) {
	rows := sloRows(t)
	if len(rows) != 8 {
		t.Fatalf("docs/deployment.md SLO table has %d rows, want the design's 8: %q", len(rows), rows)
	}
	covered := map[string]bool{}
	for _, r := range alerts(t) {
		slo, ok := r.Annotations["slo"]
		if !ok {
			continue
		}
		if !slices.Contains(rows, slo) {
			t.Errorf("alert %s: slo annotation %q repeats no row of the SLO table %q", r.Alert, slo, rows)
		}
		covered[slo] = true
	}
	for _, row := range rows {
		if !covered[row] {
			t.Errorf("SLO row %q has no alert", row)
		}
	}
}

// sloRows reads the "| SLI | Target | Metric |" table of docs/deployment.md as "SLI: target".
func sloRows(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(deploymentDoc)
	if err != nil {
		t.Fatal(err)
	}
	ascii := strings.NewReplacer("≤", "<=", "≥", ">=")
	var rows []string
	in := false
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "| SLI | Target | Metric |"):
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), "|")
			if len(cells) < 2 {
				t.Fatalf("SLO row %q", line)
			}
			rows = append(rows, ascii.Replace(strings.TrimSpace(cells[0])+": "+strings.TrimSpace(cells[1])))
		case in:
			return rows
		}
	}
	return rows
}

// seriesName matches the names of the series the rules and panels read: Ankusa's own and
// the Go and process collectors' (all served by /metrics), and Prometheus's scrape_*.
var seriesName = regexp.MustCompile(`\b(?:ankusa|go|process|scrape)_[a-z0-9_]+\b`)

// madeByPrometheus are series the Prometheus server records about a scrape: no binary
// exports them.
var madeByPrometheus = map[string]bool{"scrape_samples_scraped": true, "scrape_duration_seconds": true}

// namedSeries is every series name the alert rules, their unit tests' input series and the
// dashboard's queries read, with where each was found.
func namedSeries(t *testing.T) map[string]string {
	t.Helper()
	found := map[string]string{}
	add := func(where, text string) {
		for _, n := range seriesName.FindAllString(text, -1) {
			if _, ok := found[n]; !ok {
				found[n] = where
			}
		}
	}
	for _, r := range alerts(t) {
		add(rulesFile+" "+r.Alert, r.Expr)
	}
	tests, _ := filepath.Glob("monitoring/tests/*.yaml")
	for _, p := range tests {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Tests []struct {
				InputSeries []struct {
					Series string `yaml:"series"`
				} `yaml:"input_series"`
			} `yaml:"tests"`
		}
		if err := yaml.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, tc := range f.Tests {
			for _, s := range tc.InputSeries {
				add(p, s.Series)
			}
		}
	}
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			add(dashboardFile+" panel "+p.Title, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			add(dashboardFile+" variable "+v.Name, q)
		}
	}
	return found
}

// descName reads a descriptor's name. client_golang has no accessor; its String() is
// `Desc{fqName: "…", …}` and has been since v0.9.
var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// exported starts an instance with every role that exports series (edge, dispatch,
// storage and backup to a LocalFS store), delivers one hook so that the vectors and
// histograms of the delivery path have a child, and returns the names its registry
// describes (whether or not they have a sample yet) and the families one scrape returns.
func exported(t *testing.T) (described map[string]bool, scraped map[string]*dto.MetricFamily) {
	t.Helper()
	backupRoot := t.TempDir()
	inst := fixture.Instance(t, "monitoring", func(c *config.Config) {
		c.Node.Roles = []string{config.RoleEdge, config.RoleDispatch, config.RoleStorage}
		c.Sources = map[string]config.Source{"s": fixture.LogSource("acme", 1)}
		c.Backup.Enabled = true
		c.Backup.IntervalMS = 3_600_000
		c.Backup.SigningKey = "deploy-test-signing-key"
		c.Backup.Store = &config.BlobStore{Type: config.BlobLocal, Root: backupRoot}
	}, nil)
	fixture.Post(t, inst.IngestAddr(), "s", []byte(`{"hello":"world"}`), nil)
	reg := inst.Telemetry().Metrics.Registry
	gather := func() map[string]*dto.MetricFamily {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*dto.MetricFamily{}
		for _, mf := range mfs {
			out[mf.GetName()] = mf
		}
		return out
	}
	poll.True(t, 10*time.Second, "the hook's delivery latency sampled", func() bool {
		_, ok := gather()["ankusa_delivery_latency_seconds"]
		return ok
	})
	described = map[string]bool{}
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	for d := range ch {
		m := descName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read a name from descriptor %s", d)
		}
		described[m[1]] = true
	}
	return described, gather()
}

// Design: "metrics_test.exs (the alert rules, their unit tests and the dashboard name only
// series /metrics can serve) fails when a rule or a panel names a series Ankusa.Metrics
// does not define", and "(slo series present) … fails if a metric it names is missing
// from a scrape".
func TestMonitoringNamesOnlyExportedSeries(t *testing.T) {
	named := namedSeries(t)
	if len(named) < 20 {
		t.Fatalf("found only %d series names in the rules and the dashboard: the scan is broken", len(named))
	}
	described, scraped := exported(t)
	histogram := func(base string) bool {
		mf, ok := scraped[base]
		return ok && mf.GetType() == dto.MetricType_HISTOGRAM
	}
	served := func(name string) bool {
		if described[name] {
			return !histogram(name) // a histogram's samples are _bucket, _sum and _count
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && histogram(base) {
				return true
			}
		}
		return false
	}
	for name, where := range named {
		if madeByPrometheus[name] {
			continue
		}
		if !served(name) {
			t.Errorf("%s names %s, which /metrics does not serve", where, name)
		}
	}
	// The SLO table's metrics are in a scrape of a node that has taken a hook.
	for _, name := range []string{"ankusa_ingest_duration_seconds", "ankusa_delivery_latency_seconds",
		"ankusa_queue_oldest_due_age_seconds", "ankusa_backup_age_seconds", "ankusa_disk_free_bytes"} {
		if _, ok := scraped[name]; !ok {
			t.Errorf("SLO series %s is missing from the scrape", name)
		}
	}
	t.Logf("%d series names in rules, unit tests and dashboard; %d names described by the registry", len(named), len(described))
}

// The check above must be able to fail: a made-up series in an expression is found, and
// a histogram's base name is not taken for one of its samples.
func TestSeriesScanFindsNames(t *testing.T) {
	got := seriesName.FindAllString(`sum by (le) (rate(ankusa_made_up_bucket{instance=~"$instance"}[5m])) / process_resident_memory_bytes > go_goroutines`, -1)
	want := []string{"ankusa_made_up_bucket", "process_resident_memory_bytes", "go_goroutines"}
	if !slices.Equal(got, want) {
		t.Fatalf("scan found %q, want %q", got, want)
	}
}
