package config

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// problemsOf asserts err is a refusal (*Error, ErrInvalid) and returns its problems.
func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	if err == nil {
		t.Fatal("config accepted, want a refusal")
	}
	var ce *Error
	if !errors.As(err, &ce) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v (%T) is not a *config.Error", err, err)
	}
	if len(ce.Problems) == 0 {
		t.Fatal("*Error with no problem")
	}
	return ce.Problems
}

func mustParse(t *testing.T, yml string, env map[string]string) *Config {
	t.Helper()
	c, err := Parse([]byte(yml), envOf(env))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

const okSource = "sources: {gh: {sinks: [{type: http, url: 'https://example.com/h'}]}}\n"

// Inventory B.1: "strict schema walk (unknown key, wrong type, bad enum → error naming the dotted path)";
// "Range validation at boot: <dotted.key> must be <constraint>, got <value>". Every refusal rule is one case
// and must name the key (or the environment variable) that is wrong.
func TestEveryRefusalNamesItsKeyPath(t *testing.T) {
	cases := []struct {
		name, yml string
		env       map[string]string
		path, msg string
	}{
		// strict walk
		{"unknown top-level key", "nope: 1", nil, "nope", "unknown key"},
		{"unknown nested key", "batcher: {max_batchh: 1}", nil, "batcher.max_batchh", "unknown key"},
		{"unknown source key", "sources: {gh: {sinks: [{type: log}], tenat: x}}", nil, "sources.gh.tenat", "unknown key"},
		{"string where integer", "http: {port: abc}", nil, "http.port", `must be an integer, got "abc"`},
		{"float where integer", "batcher: {max_batch: 1.5}", nil, "batcher.max_batch", "must be an integer, got 1.5"},
		{"mapping where list", "node: {roles: {a: b}}", nil, "node.roles", "must be a list, got a mapping"},
		{"list where mapping", "http: [1]", nil, "http", "must be a mapping, got a list"},
		{"integer where string", "node: {data_dir: 12}", nil, "node.data_dir", "must be a string, got 12"},
		{"yes is not a boolean", "admin: {enabled: yes}", nil, "admin.enabled", `must be a boolean, got "yes"`},
		{"duplicate key", "http: {port: 1, port: 2}", nil, "http.port", "duplicate key"},
		{"sink entry not a mapping", "sources: {gh: {sinks: [log]}}", nil, "sources.gh.sinks[0]", "must be a mapping, got a string"},
		{"ordered not a boolean", "sources: {gh: {sinks: [{type: http, ordered: 1}]}}", nil, "sources.gh.sinks[0].ordered", "must be a boolean"},
		{"alias containing itself", "sources: {gh: {sinks: [{type: http, x: &a [*a]}]}}", nil, "sources.gh.sinks[0].x[0]", "refers to itself"},
		{"bad merge value", "http: {<<: 1}", nil, "http.<<", "merge value must be a mapping"},
		{"yaml syntax", "http: [", nil, "", "cannot parse YAML"},
		{"document not a mapping", "- a\n- b", nil, "", "must be a mapping of keys, got a list"},
		{"two documents", "instance: a\n---\ninstance: b\n", nil, "", "more than one YAML document"},
		{"kill_file without chaos", "debug: {kill_file: /tmp/k}", nil, "debug.kill_file", "requires debug.chaos: true"},
		// enums
		{"wal.type", "wal: {type: disk2}", nil, "wal.type", `must be one of disk|dual|none, got "disk2"`},
		{"log.level", "log: {level: warn}", nil, "log.level", `must be one of debug|info|warning|error, got "warn"`},
		{"log.format", "log: {format: text}", nil, "log.format", `must be one of auto|json|console, got "text"`},
		{"http.routing", "http: {routing: host}", nil, "http.routing", `must be one of path|tenant_path, got "host"`},
		{"sink type", "sources: {gh: {sinks: [{type: smtp}]}}", nil, "sources.gh.sinks[0].type", `must be one of log|http|kafka|rabbitmq|nats|redis|sqs|google_pubsub, got "smtp"`},
		{"sink type missing", "sources: {gh: {sinks: [{url: x}]}}", nil, "sources.gh.sinks[0].type", "is required"},
		{"lifecycle sink type", "lifecycle: {sinks: [{type: smtp}]}", nil, "lifecycle.sinks[0].type", `must be one of log|http|kafka|rabbitmq|nats|redis|sqs|google_pubsub, got "smtp"`},
		{"lifecycle sink type missing", "lifecycle: {sinks: [{url: x}]}", nil, "lifecycle.sinks[0].type", "is required"},
		{"lifecycle needs a store", "wal: {type: none}\nlifecycle: {sinks: [{type: http, url: x}]}\nsources: {gh: {sinks: [{type: http, url: x}]}}", nil, "lifecycle.sinks", "needs a store"},
		{"unknown role", "node: {roles: [edge, foo]}", nil, "node.roles[1]", `must be one of claim_check|dispatch|edge|storage, got "foo"`},
		// ranges
		{"instance", "instance: 'a b'", nil, "instance", `must match [A-Za-z0-9_-]{1,64}, got "a b"`},
		{"instance too long", "instance: " + strings.Repeat("a", 65), nil, "instance", "must match"},
		{"data_dir empty", "node: {data_dir: ''}", nil, "node.data_dir", "must be non-empty"},
		{"no roles", "node: {roles: []}", nil, "node.roles", "at least one"},
		{"duplicate role", "node: {roles: [edge, edge]}", nil, "node.roles[1]", "duplicate role"},
		{"http.port high", "http: {port: 70000}", nil, "http.port", "must be 0..65535, got 70000"},
		{"admin.port negative", "admin: {port: -1}", nil, "admin.port", "must be 0..65535, got -1"},
		{"http.ip hostname", "http: {ip: localhost}", nil, "http.ip", `got "localhost"`},
		{"admin.ip localhost", "admin: {ip: localhost}", nil, "admin.ip", `must be an IPv4 or IPv6 literal, got "localhost"`},
		{"admin.ip short form", "admin: {ip: '10'}", nil, "admin.ip", `got "10"`},
		{"http.prefix relative", "http: {prefix: webhooks}", nil, "http.prefix", `got "webhooks"`},
		{"http.prefix trailing slash", "http: {prefix: /webhooks/}", nil, "http.prefix", "without a trailing"},
		{"http.max_body_bytes", "http: {max_body_bytes: 0}", nil, "http.max_body_bytes", "must be > 0, got 0"},
		{"http.max_body_bytes over the queue", "http: {max_body_bytes: 2000000}\nbatcher: {max_queue_bytes: 1000000}", nil, "http.max_body_bytes", "<= batcher.max_queue_bytes"},
		{"http.max_body_bytes over uint32", "http: {max_body_bytes: 5000000000}\nbatcher: {max_queue_bytes: 9000000000}", nil, "http.max_body_bytes", "<= 4294967295"},
		{"http.max_reading_bytes_per_ip", "http: {max_reading_bytes_per_ip: 1000}", nil, "http.max_reading_bytes_per_ip", ">= http.max_body_bytes"},
		{"http.max_conns", "http: {max_conns: 0}", nil, "http.max_conns", "must be > 0, got 0"},
		{"http.max_conns_per_ip", "http: {max_conns_per_ip: -1}", nil, "http.max_conns_per_ip", "must be >= 0, got -1"},
		{"http.header_timeout_ms", "http: {header_timeout_ms: 0}", nil, "http.header_timeout_ms", "must be > 0, got 0"},
		{"max_body_bytes alias", "max_body_bytes: -1", nil, "max_body_bytes", "must be > 0, got -1"},
		{"wal.publish_timeout_ms", "wal: {publish_timeout_ms: 0}", nil, "wal.publish_timeout_ms", "must be > 0, got 0"},
		{"batcher.partitions 0", "batcher: {partitions: 0}", nil, "batcher.partitions", "must be 1..64, got 0"},
		{"batcher.partitions 65", "batcher: {partitions: 65}", nil, "batcher.partitions", "must be 1..64, got 65"},
		{"batcher.max_batch", "batcher: {max_batch: 0}", nil, "batcher.max_batch", "must be > 0, got 0"},
		{"batcher.max_delay_ms", "batcher: {max_delay_ms: -1}", nil, "batcher.max_delay_ms", "must be >= 0, got -1"},
		{"batcher.max_queue", "batcher: {max_queue: 0}", nil, "batcher.max_queue", "must be > 0"},
		{"batcher.max_queue_bytes", "batcher: {max_queue_bytes: -5}", nil, "batcher.max_queue_bytes", "must be > 0, got -5"},
		{"batcher.max_commits", "batcher: {max_commits: 0}", nil, "batcher.max_commits", "must be > 0"},
		{"batcher.group_commit_max_bytes", "batcher: {group_commit_max_bytes: 0}", nil, "batcher.group_commit_max_bytes", "must be > 0"},
		{"batcher.group_commit_max_records", "batcher: {group_commit_max_records: 0}", nil, "batcher.group_commit_max_records", "must be > 0"},
		{"batcher.record_deadline_ms", "batcher: {record_deadline_ms: 0}", nil, "batcher.record_deadline_ms", "must be > 0"},
		{"listener.drain_delay_ms", "listener: {drain_delay_ms: -1}", nil, "listener.drain_delay_ms", "must be >= 0"},
		{"listener.drain_timeout_ms", "listener: {drain_timeout_ms: 0}", nil, "listener.drain_timeout_ms", "must be > 0"},
		{"store.reopen_min_ms", "store: {reopen_min_ms: 0}", nil, "store.reopen_min_ms", "must be > 0"},
		{"store.reopen_max_ms", "store: {reopen_max_ms: 1000}", nil, "store.reopen_max_ms", ">= store.reopen_min_ms"},
		{"store.commit_stall_ms", "store: {commit_stall_ms: -1}", nil, "store.commit_stall_ms", "must be > 0"},
		{"store.background_write_mb_per_s", "store: {background_write_mb_per_s: -1}", nil, "store.background_write_mb_per_s", "must be >= 0"},
		{"store.delete_mb_per_s", "store: {delete_mb_per_s: -1}", nil, "store.delete_mb_per_s", "must be >= 0"},
		{"store.commit_thread_nice low", "store: {commit_thread_nice: -21}", nil, "store.commit_thread_nice", "in -20..19"},
		{"store.commit_thread_nice high", "store: {commit_thread_nice: 20}", nil, "store.commit_thread_nice", "in -20..19"},
		{"source id", "sources: {'bad id': {sinks: [{type: log}]}}", nil, "sources.bad id", "source id must match"},
		{"reserved lifecycle id", "sources: {'ankusa:lifecycle': {sinks: [{type: log}]}}", nil, "sources.ankusa:lifecycle", "source id must match"},
		{"source tenant", "sources: {gh: {tenant: 'x/y', sinks: [{type: log}]}}", nil, "sources.gh.tenant", "must match"},
		{"source without sinks", "sources: {gh: {tenant: t}}", nil, "sources.gh.sinks", "at least one sink"},
		// cross-key
		{"wal none needs a durable sink", "wal: {type: none}\nsources: {gh: {sinks: [{type: log}, {type: redis}]}}", nil,
			"sources.gh.sinks", "wal.type none needs at least one durable sink"},
		{"wal none leaves no role", "wal: {type: none}\nnode: {roles: [dispatch, storage]}", nil, "node.roles", "leaves no role"},
		{"admin port equals http port", "http: {port: 5000}\nadmin: {port: 5000}", nil, "admin.port", "different from http.port"},
		// environment overrides
		{"ANKUSA_HTTP_PORT", "", map[string]string{"ANKUSA_HTTP_PORT": "abc"}, "ANKUSA_HTTP_PORT", `must be a port 0..65535, got "abc"`},
		{"PORT", "", map[string]string{"PORT": "99999"}, "PORT", "must be a port 0..65535"},
		{"ANKUSA_ADMIN_PORT", "", map[string]string{"ANKUSA_ADMIN_PORT": "-1"}, "ANKUSA_ADMIN_PORT", "must be a port"},
		{"ANKUSA_ADMIN_IP", "", map[string]string{"ANKUSA_ADMIN_IP": "localhost"}, "ANKUSA_ADMIN_IP", "IPv4 or IPv6 literal"},
		{"ANKUSA_ROLES unknown", "", map[string]string{"ANKUSA_ROLES": "edge,ingest"}, "ANKUSA_ROLES", `unknown role "ingest"`},
		{"ANKUSA_ROLES blank", "", map[string]string{"ANKUSA_ROLES": " , "}, "ANKUSA_ROLES", "at least one role"},
		{"ANKUSA_WAL_TYPE", "", map[string]string{"ANKUSA_WAL_TYPE": "memory"}, "ANKUSA_WAL_TYPE", "must be one of disk|dual|none"},
		{"ANKUSA_LOG_LEVEL", "", map[string]string{"ANKUSA_LOG_LEVEL": "trace"}, "ANKUSA_LOG_LEVEL", "must be one of debug|info|warning|error"},
		{"ANKUSA_LOG_FORMAT", "", map[string]string{"ANKUSA_LOG_FORMAT": "pretty"}, "ANKUSA_LOG_FORMAT", "must be one of auto|json|console"},
		{"ANKUSA_INSTANCE", "", map[string]string{"ANKUSA_INSTANCE": "a/b"}, "ANKUSA_INSTANCE", "must match"},
		{"ANKUSA_BACKUP_ENABLED", "", map[string]string{"ANKUSA_BACKUP_ENABLED": "yes"}, "ANKUSA_BACKUP_ENABLED", "must be true or false"},
		{"ANKUSA_BACKUP_ENABLED without a key", "", map[string]string{"ANKUSA_BACKUP_ENABLED": "true"}, "backup.signing_key", "must be set"},
		// admin principals
		{"principal without a token", "admin: {principals: [{name: ops, scopes: [dlq:read], tenants: ['*']}]}", nil, "admin.principals[0]", "needs one of token_sha256"},
		{"principal with the token itself", "admin: {principals: [{name: ops, token_sha256: s3cr3t, scopes: [dlq:read], tenants: ['*']}]}", nil, "admin.principals[0].token_sha256", "64 hex digits"},
		{"principal with an unknown scope", "admin: {principals: [{name: ops, token_file: /t, scopes: [dlq:write], tenants: ['*']}]}", nil, "admin.principals[0].scopes[0]", "must be one of"},
		{"principal without tenants", "admin: {principals: [{name: ops, token_file: /t, scopes: [dlq:read]}]}", nil, "admin.principals[0].tenants", `must be ["*"]`},
		{"principal with a bad tenant", "admin: {principals: [{name: ops, token_file: /t, scopes: [dlq:read], tenants: [a/b]}]}", nil, "admin.principals[0].tenants[0]", "must match"},
		{"principals named twice", "admin: {principals: [{name: ops, token_file: /t, scopes: [dlq:read], tenants: ['*']}, {name: ops, token_file: /u, scopes: [dlq:read], tenants: ['*']}]}", nil, "admin.principals[1].name", "must be unique"},
		// interpolation
		{"unset variable", "node: {data_dir: '${DATA}'}", nil, "node.data_dir", "environment variable DATA is not set"},
		{"lower-case name", "node: {data_dir: '${data}'}", nil, "node.data_dir", "malformed interpolation"},
		{"unterminated", "node: {data_dir: '${DATA'}", nil, "node.data_dir", "unterminated"},
		{"nested reference", "node: {data_dir: '${A:-${B}}'}", nil, "node.data_dir", "malformed interpolation"},
		{"single-dash default", "node: {data_dir: '${A-b}'}", nil, "node.data_dir", "malformed interpolation"},
		{"unset variable in a sink option", "sources: {gh: {sinks: [{type: http, url: '${HOOK_URL}'}]}}", nil,
			"sources.gh.sinks[0].url", "environment variable HOOK_URL is not set"},
	}
	shared := make([]sharedCase, len(cases))
	for i, tc := range cases {
		shared[i] = sharedCase{Name: tc.name, YAML: tc.yml, Env: tc.env}
	}
	shareCases(t, "refusals", shared)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yml), envOf(tc.env))
			ps := problemsOf(t, err)
			for _, p := range ps {
				if p.Path == tc.path && strings.Contains(p.Msg, tc.msg) {
					want := p.String()
					if !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "invalid configuration: ") {
						t.Fatalf("Error() = %q, want it to contain %q", err, want)
					}
					return
				}
			}
			t.Fatalf("problems %v, want one at %q containing %q", ps, tc.path, tc.msg)
		})
	}
}

// Inventory B.1 / STYLE: "Validate() reports every problem with its key path" — all of them at once, sorted,
// not just the first, and without a second complaint about a value that already failed to decode.
func TestEveryProblemIsReportedAtOnceSortedByPath(t *testing.T) {
	yml := `
instance: "bad name"
nope: true
http: {port: "x", prefix: "webhooks"}
batcher: {max_batch: 0, partitions: 100}
wal: {type: none}
sources:
  gh: {sinks: [{type: log}, {type: ftp}]}
  t: {sinks: {type: http}}
`
	_, err := Parse([]byte(yml), envOf(map[string]string{"ANKUSA_ADMIN_PORT": "x"}))
	ps := problemsOf(t, err)
	var got []string
	for _, p := range ps {
		got = append(got, p.Path)
	}
	want := []string{
		"ANKUSA_ADMIN_PORT",
		"batcher.max_batch",
		"batcher.partitions",
		"http.port",
		"http.prefix",
		"instance",
		"nope",
		"sources.gh.sinks",
		"sources.gh.sinks[1].type",
		"sources.t.sinks", // "must be a list" only: no extra "at least one sink"
	}
	if !slices.Equal(got, want) {
		t.Fatalf("problem paths\n got %q\nwant %q\n(%v)", got, want, err)
	}
}

// Inventory B.1 interpolation: "${VAR} (unset = load error naming the key), ${VAR:-default}, ${VAR:-} = explicit
// empty; variable names [A-Z0-9_]+". Applied to parsed scalars, so YAML quoting is unaffected.
func TestInterpolationExpandsScalarValuesOnly(t *testing.T) {
	cases := []struct {
		name, yml string
		env       map[string]string
		check     func(*Config) any
		want      any
	}{
		{"plain reference", "instance: ${INST}", map[string]string{"INST": "blue"},
			func(c *Config) any { return c.Instance }, "blue"},
		{"unquoted number becomes an integer", "http:\n  port: ${P}", map[string]string{"P": "5000"},
			func(c *Config) any { return c.HTTP.Port }, 5000},
		{"unquoted boolean becomes a boolean", "admin:\n  enabled: ${ADMIN}", map[string]string{"ADMIN": "false"},
			func(c *Config) any { return c.Admin.Enabled }, false},
		{"default when unset", "node: {data_dir: '${D:-/srv/ankusa}'}", nil,
			func(c *Config) any { return c.Node.DataDir }, "/srv/ankusa"},
		{"default when empty", "node: {data_dir: '${D:-/srv/ankusa}'}", map[string]string{"D": ""},
			func(c *Config) any { return c.Node.DataDir }, "/srv/ankusa"},
		{"set value beats default", "node: {data_dir: '${D:-/srv/ankusa}'}", map[string]string{"D": "/x"},
			func(c *Config) any { return c.Node.DataDir }, "/x"},
		{"explicit empty keeps empty, not the default", "http:\n  ip: ${IP:-}", nil,
			func(c *Config) any { return c.HTTP.IP }, ""},
		{"several references in one value", "node: {data_dir: '/${A}/${B}/x'}", map[string]string{"A": "a", "B": "b"},
			func(c *Config) any { return c.Node.DataDir }, "/a/b/x"},
		{"expanded text is not parsed as YAML", "node:\n  data_dir: ${A}", map[string]string{"A": "[1, {x: y}]"},
			func(c *Config) any { return c.Node.DataDir }, "[1, {x: y}]"},
		{"expanded text is not re-scanned", "sources: {gh: {sinks: [{type: http, url: '${A}'}]}}", map[string]string{"A": "${B}"},
			func(c *Config) any { return c.Sources["gh"].Sinks[0].Options["url"] }, "${B}"},
		{"lone dollar is literal", "node: {data_dir: '$HOME/$x'}", nil,
			func(c *Config) any { return c.Node.DataDir }, "$HOME/$x"},
		{"sink options are interpolated", "sources: {gh: {sinks: [{type: http, secret: '${S}'}]}}", map[string]string{"S": "whsec_x"},
			func(c *Config) any { return c.Sources["gh"].Sinks[0].Options["secret"] }, "whsec_x"},
	}
	shared := make([]sharedCase, len(cases))
	for i, tc := range cases {
		shared[i] = sharedCase{Name: tc.name, YAML: tc.yml, Env: tc.env}
	}
	shareCases(t, "interpolation", shared)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustParse(t, tc.yml, tc.env)
			if got := tc.check(c); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}

	t.Run("quoted number stays a string", func(t *testing.T) {
		_, err := Parse([]byte(`http: {port: "${P}"}`), envOf(map[string]string{"P": "5000"}))
		ps := problemsOf(t, err)
		if ps[0].Path != "http.port" || !strings.Contains(ps[0].Msg, `must be an integer, got "5000"`) {
			t.Fatalf("problems %v", ps)
		}
	})
	t.Run("explicit empty is a value, not null", func(t *testing.T) {
		_, err := Parse([]byte("node:\n  data_dir: ${D:-}"), nil)
		ps := problemsOf(t, err)
		if ps[0].Path != "node.data_dir" || ps[0].Msg != "must be non-empty" {
			t.Fatalf("problems %v", ps)
		}
	})
	t.Run("keys are not interpolated", func(t *testing.T) {
		_, err := Parse([]byte(`${K}: 1`), envOf(map[string]string{"K": "instance"}))
		ps := problemsOf(t, err)
		if ps[0].Path != "${K}" || ps[0].Msg != "unknown key" {
			t.Fatalf("problems %v", ps)
		}
	})
	t.Run("every unset variable is reported", func(t *testing.T) {
		_, err := Parse([]byte(`node: {data_dir: '${A}${B}'}`), nil)
		ps := problemsOf(t, err)
		if len(ps) != 2 || !strings.Contains(ps[0].Msg, "A is not set") || !strings.Contains(ps[1].Msg, "B is not set") {
			t.Fatalf("problems %v", ps)
		}
	})
}

// Inventory B.2: "env beats file"; ANKUSA_HTTP_PORT, else PORT.
func TestEnvOverridesBeatTheFile(t *testing.T) {
	file := `
instance: fromfile
node: {data_dir: /file, roles: [edge]}
log: {level: debug}
http: {port: 1111}
admin: {ip: 127.0.0.1, port: 2222}
wal: {type: disk}
intake: {brokers: ["127.0.0.1:9092"]}
` + okSource
	env := map[string]string{
		"ANKUSA_INSTANCE":   "fromenv",
		"ANKUSA_DATA_DIR":   "/env",
		"ANKUSA_HTTP_PORT":  "3333",
		"PORT":              "9999",
		"ANKUSA_ADMIN_PORT": "4444",
		"ANKUSA_ADMIN_IP":   "::1",
		"ANKUSA_ROLES":      " storage, edge ,dispatch,edge",
		"ANKUSA_WAL_TYPE":   "dual",
		"ANKUSA_LOG_LEVEL":  "error",
		"ANKUSA_LOG_FORMAT": "console",
	}
	c := mustParse(t, file, env)
	got := []any{c.Instance, c.Node.DataDir, c.HTTP.Port, c.Admin.Port, c.Admin.IP, c.Node.Roles, c.WAL.Type, c.Log.Level, c.Log.Format}
	want := []any{"fromenv", "/env", 3333, 4444, "::1", []string{"storage", "edge", "dispatch"}, "dual", "error", "console"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}

	c = mustParse(t, file+"backup: {signing_key: 0123456789abcdef}\n", map[string]string{"ANKUSA_BACKUP_ENABLED": "true"})
	if !c.Backup.Enabled {
		t.Fatal("ANKUSA_BACKUP_ENABLED=true did not enable backups")
	}

	c = mustParse(t, file, map[string]string{"PORT": "9999"})
	if c.HTTP.Port != 9999 {
		t.Fatalf("PORT: http.port = %d, want 9999", c.HTTP.Port)
	}
	// An empty variable is unset: the file keeps its value.
	c = mustParse(t, file, map[string]string{"ANKUSA_HTTP_PORT": "", "ANKUSA_INSTANCE": "", "ANKUSA_ROLES": ""})
	if c.HTTP.Port != 1111 || c.Instance != "fromfile" || !slices.Equal(c.Node.Roles, []string{"edge"}) {
		t.Fatalf("empty env overrode the file: %d %q %v", c.HTTP.Port, c.Instance, c.Node.Roles)
	}
	// An env override can make a file valid (wal none would fail on the log-only sample; disk does not).
	if _, err := Parse(defaultYAML, envOf(map[string]string{"ANKUSA_WAL_TYPE": "none"})); err == nil {
		t.Fatal("wal none with only a log sink accepted")
	}
}

// Inventory B.3: the documented defaults, filled in one place; a key the file sets (even to zero/false)
// keeps the file's value.
func TestDefaultsAreFilledAndExplicitZeroesKept(t *testing.T) {
	d := Default()
	if err := d.Validate(); err != nil {
		t.Fatalf("Default() invalid: %v", err)
	}
	want := &Config{
		Instance: "default",
		Node:     Node{DataDir: "./data", Roles: []string{"edge", "dispatch", "storage"}},
		Log:      Log{Level: "info", Format: "auto"},
		HTTP: HTTP{Port: 4000, Prefix: "/webhooks", Routing: "path", MaxURLTenants: 1000, MaxBodyBytes: 8_000_000,
			MaxConns: 10_000, MaxConnsPerIP: 512, MaxReadingBytes: 256 << 20, MaxReadingBytesPerIP: 64 << 20, HeaderTimeoutMS: 10_000, ReadTimeoutMS: 30_000, IdleTimeoutMS: 60_000},
		MaxBodyBytes: 8_000_000,
		Admin:        Admin{Enabled: true, IP: "127.0.0.1", Port: 4002},
		WAL:          WAL{Type: "disk", PublishTimeoutMS: 8000},
		Intake: Intake{Topic: "ankusa-intake", BreakerFailures: 3, RetryAfterS: 2, PublishTimeoutMS: 5000,
			ReconcileIntervalMS: 1000, MaxInflight: 8, MaxRecordBytes: 900_000},
		Batcher: Batcher{Partitions: 2, MaxBatch: 256, MaxQueue: 10_000, MaxQueueBytes: 268_435_456,
			MaxCommits: 64, GroupCommitMaxBytes: 4 << 20, GroupCommitMaxRecords: 4096, RecordDeadlineMS: 15_000},
		Listener: Listener{DrainDelayMS: 5000, DrainTimeoutMS: 30_000},
		// Inventory B.3 dispatch rows.
		Dispatch: Dispatch{Batch: 128, Concurrency: 32, MaxInflight: 4096, MaxInflightBytes: 128 << 20,
			AttemptTimeoutMS: 30_000, BreakerFailures: 5, BreakerOpenMS: 30_000, BreakerMaxOpenMS: 300_000,
			Retry: Retry{BaseMS: 100, MaxMS: 300_000, MaxAttempts: 84, Jitter: true}, IdleLaneMS: 30_000,
			Tenants: map[string]TenantWindow{}},
		// Inventory B.3 quarantine row; dedupe bounds are unpublished (ours, trust.go).
		Quarantine: Quarantine{Burst: 100, Rate: 20, MaxBytes: 1 << 30, MaxPending: 1000, SourceShare: 0.1,
			TenantShare: 0.5, RetentionSeconds: 604_800, WriteTimeoutMS: 5000},
		Dedupe: Dedupe{MaxEntries: 10_000_000, MaxEntriesPerTenant: 1_000_000, MaxEntriesPerSource: 500_000,
			Scope: "node"},
		RateLimits: RateLimits{Scope: "node"},
		// Inventory B.3 fleet rows: fleet.timeout_ms is unpublished (ours: 50 ms), as is the breaker.
		Fleet: Fleet{Store: FleetStore{KeyPrefix: "ankusa:fleet:"}, TimeoutMS: 50, BreakerFailures: 3,
			BreakerOpenMS: 5000},
		// Inventory E.1: "reopen (≤ once / 5 s); … retries open after 5, 10, 20, 40, 60 s".
		// commit_thread_nice is ours (not in the inventory): docs/configuration.md has the measured reason.
		Store: Store{ReopenMinMS: 5000, ReopenMaxMS: 60_000, CommitStallMS: 5000, DeleteMBPerSec: 256,
			CommitThreadNice: -10},
		// Inventory B.3 storage, backup and claim_check rows; verify_interval_ms is unpublished (ours: hourly).
		Storage: Storage{Type: "local", S3: S3{Region: "us-east-1"}, RollBytes: 16 << 20, RollMS: 30_000,
			IntervalMS: 1000, PacePercent: 25, MaxLagSegments: 4, MaxLagMS: 60_000, Codec: "raw"},
		Backup:     Backup{IntervalMS: 60_000, Keep: 3, VerifyIntervalMS: 3_600_000},
		ClaimCheck: ClaimCheck{IP: "127.0.0.1", Port: 4001, PackMaxBytes: 16 << 20, SweepIntervalMS: 3_600_000},
		// Inventory B.3 health.sink_error_window_ms: "?", ours.
		Health: Health{SinkErrorWindowMS: 30_000},
		// Inventory G.6: audit.retention_days 365.
		Audit: Audit{RetentionDays: 365},
		// Inventory G.2: SourceStore.Persistent, ours as the default (the file's sources stay read-only).
		SourceStore: SourceStore{Type: "persistent", Redis: FleetStore{KeyPrefix: "ankusa:sources:"}},
		Routes:      Routes{MaxRoutes: 10_000, Store: RouteStore{Type: "local"}, IPDeniedStatus: 403, LogSample: 100},
		Sources:     map[string]Source{},
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("Default()\n got %+v\nwant %+v", d, want)
	}
	for _, empty := range []string{"", "# nothing\n", "---\n", "~"} {
		if c := mustParse(t, empty, nil); !reflect.DeepEqual(c, want) {
			t.Fatalf("Parse(%q)\n got %+v\nwant %+v", empty, c, want)
		}
	}

	c := mustParse(t, `
admin: {enabled: false}
http: {port: 0}
listener: {drain_delay_ms: 0}
batcher: {max_delay_ms: 0}
store: {delete_mb_per_s: 0, commit_thread_nice: 0}
node: {roles: [edge]}
sources: {gh: {sinks: [{type: log}]}}
`, nil)
	if c.Admin.Enabled || c.HTTP.Port != 0 || c.Listener.DrainDelayMS != 0 || c.Store.DeleteMBPerSec != 0 || c.Store.CommitThreadNice != 0 ||
		!slices.Equal(c.Node.Roles, []string{"edge"}) {
		t.Fatalf("explicit zero values replaced by defaults: %+v", c)
	}
	if s := c.Sources["gh"]; s.Tenant != "default" {
		t.Fatalf("source tenant default = %q, want default", s.Tenant)
	}
	// Keys not written keep their defaults next to the ones that are.
	if c.Batcher.MaxBatch != 256 || c.HTTP.Prefix != "/webhooks" {
		t.Fatalf("unwritten keys lost their defaults: %+v", c)
	}
}

// Inventory B.3: "http.max_body_bytes / max_body_bytes": the top-level alias wins when set, and after Load
// both hold the effective value.
func TestMaxBodyBytesAliasWinsAndBothHoldTheEffectiveValue(t *testing.T) {
	cases := []struct {
		yml  string
		want int64
	}{
		{"", 8_000_000},
		{"http: {max_body_bytes: 1000}", 1000},
		{"max_body_bytes: 2000", 2000},
		{"max_body_bytes: 2000\nhttp: {max_body_bytes: 1000}", 2000},
		{"max_body_bytes: 0\nhttp: {max_body_bytes: 1000}", 1000},
		{"http: {max_body_bytes: 1e6}", 1_000_000},
		{"http: {max_body_bytes: 8_000_000}", 8_000_000},
	}
	shared := make([]sharedCase, len(cases))
	for i, tc := range cases {
		shared[i] = sharedCase{Name: tc.yml, YAML: tc.yml}
	}
	shareCases(t, "max_body_bytes", shared)
	for _, tc := range cases {
		c := mustParse(t, tc.yml, nil)
		if c.MaxBodyBytes != tc.want || c.HTTP.MaxBodyBytes != tc.want {
			t.Errorf("%q: max_body_bytes=%d http.max_body_bytes=%d, want both %d", tc.yml, c.MaxBodyBytes, c.HTTP.MaxBodyBytes, tc.want)
		}
	}
	// On a Config built in code, http.max_body_bytes is the one consumers read; editing it alone is valid.
	d := Default()
	d.HTTP.MaxBodyBytes = 5
	if err := d.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

// Design: "Under wal: :none ... Ankusa.Config.new/1 drops :dispatch and :storage from the effective list —
// the admin API's GET /health reports what this node actually runs".
func TestWalNoneDropsDispatchAndStorageFromEffectiveRoles(t *testing.T) {
	c := mustParse(t, "node: {roles: [storage, edge, claim_check, dispatch]}\nclaim_check: {auth: {tokens: [{token: 0123456789abcdef, scopes: [claims:read], tenants: ['*']}]}}", nil)
	if got := c.EffectiveRoles(); !slices.Equal(got, []string{"claim_check", "dispatch", "edge", "storage"}) {
		t.Fatalf("EffectiveRoles() = %v, want sorted", got)
	}
	if len(c.Warnings) != 0 {
		t.Fatalf("warnings under disk: %v", c.Warnings)
	}
	c = mustParse(t, "wal: {type: none}\nsources: {gh: {sinks: [{type: log}, {type: kafka, topic: t}]}}", nil)
	if got := c.EffectiveRoles(); !slices.Equal(got, []string{"edge"}) {
		t.Fatalf("EffectiveRoles() under none = %v, want [edge]", got)
	}
	if c.HasRole("dispatch") || c.HasRole("storage") || !c.HasRole("edge") {
		t.Fatal("HasRole disagrees with EffectiveRoles")
	}
	if !slices.Contains(c.Node.Roles, "dispatch") {
		t.Fatal("configured roles were modified; only the effective list drops roles")
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "dispatch, storage dropped") {
		t.Fatalf("warnings = %v, want one naming the dropped roles", c.Warnings)
	}
}

// Design §5: "One RocksDB database per instance at <data_dir>/<instance>/store".
func TestStoreDirIsPerInstance(t *testing.T) {
	c := mustParse(t, "instance: blue\nnode: {data_dir: /var/lib/ankusa}", nil)
	if got := c.StoreDir(); got != filepath.Join("/var/lib/ankusa", "blue", "store") {
		t.Fatalf("StoreDir() = %q", got)
	}
}

// Inventory D.1/D.6: "durable?/1 (default true; Sink.Log and Sink.Redis false)".
func TestDurableIsFalseOnlyForLogAndRedis(t *testing.T) {
	for typ, want := range map[string]bool{
		"log": false, "redis": false, "http": true, "kafka": true, "rabbitmq": true, "nats": true,
		"sqs": true, "google_pubsub": true, "": false, "smtp": false,
	} {
		if got := (SinkSpec{Type: typ}).Durable(); got != want {
			t.Errorf("SinkSpec{Type: %q}.Durable() = %v, want %v", typ, got, want)
		}
	}
}

// Sink entries: `type` and `ordered` are typed; every other key reaches the sink package unchanged.
func TestSinkOptionsAreKeptForTheSinkPackage(t *testing.T) {
	c := mustParse(t, `
sources:
  gh:
    tenant: acme
    sinks:
      - type: kafka
        ordered: true
        topic: hooks
        brokers: [a:9092, b:9092]
        max_record_bytes: 1000000
        sasl: {mechanism: plain, username: u, password: p}
        jitter: 0.5
        tls: false
        empty:
`, nil)
	s := c.Sources["gh"]
	if s.Tenant != "acme" || len(s.Sinks) != 1 {
		t.Fatalf("source = %+v", s)
	}
	k := s.Sinks[0]
	want := map[string]any{
		"topic":            "hooks",
		"brokers":          []any{"a:9092", "b:9092"},
		"max_record_bytes": 1000000,
		"sasl":             map[string]any{"mechanism": "plain", "username": "u", "password": "p"},
		"jitter":           0.5,
		"tls":              false,
		"empty":            nil,
	}
	if k.Type != "kafka" || !k.Ordered || !reflect.DeepEqual(k.Options, want) {
		t.Fatalf("sink = %+v", k)
	}
}

// YAML anchors, aliases and merge keys work as in any YAML file (sinks shared between sources).
func TestAnchorsAliasesAndMergeKeys(t *testing.T) {
	c := mustParse(t, `
sources:
  a:
    sinks: &sinks
      - &h {type: http, url: "https://example.com/a", timeout_ms: 100}
  b:
    sinks: *sinks
  c:
    sinks:
      - <<: *h
        timeout_ms: 200
`, nil)
	if !reflect.DeepEqual(c.Sources["a"].Sinks, c.Sources["b"].Sinks) {
		t.Fatalf("alias: %+v vs %+v", c.Sources["a"].Sinks, c.Sources["b"].Sinks)
	}
	got := c.Sources["c"].Sinks[0]
	if got.Type != "http" || got.Options["url"] != "https://example.com/a" || got.Options["timeout_ms"] != 200 {
		t.Fatalf("merge: %+v", got)
	}
}

// Aliases let a few hundred bytes name billions of nodes; the walk is bounded and refuses instead.
func TestAliasExpansionIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("sources: {gh: {sinks: [{type: http, x: [")
	b.WriteString("&a0 [x,x,x,x,x,x,x,x,x,x]")
	for i := 1; i < 10; i++ {
		b.WriteString(", &a" + strconv.Itoa(i) + " [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(",")
			}
			b.WriteString("*a" + strconv.Itoa(i-1))
		}
		b.WriteString("]")
	}
	b.WriteString("]}]}}")
	// The same with merge keys, at the top level where every key is looked at.
	var m strings.Builder
	m.WriteString("a0: &a0 {")
	for j := 0; j < 50; j++ {
		m.WriteString("k" + strconv.Itoa(j) + ": 1, ")
	}
	m.WriteString("}\n")
	for i := 1; i < 10; i++ {
		m.WriteString("a" + strconv.Itoa(i) + ": &a" + strconv.Itoa(i) + " {<<: [")
		for j := 0; j < 10; j++ {
			m.WriteString("*a" + strconv.Itoa(i-1) + ",")
		}
		m.WriteString("]}\n")
	}
	m.WriteString("<<: *a9\n")
	for _, doc := range []string{b.String(), m.String()} {
		start := time.Now()
		_, err := Parse([]byte(doc), nil)
		ps := problemsOf(t, err)
		if !slices.ContainsFunc(ps, func(p Problem) bool { return strings.Contains(p.Msg, "document too large") }) {
			t.Fatalf("problems %v", ps)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("bounded walk took %v", d)
		}
	}
}

// STYLE Config: "secrets are never logged or printed". A wrong sink entry names the key, never the value.
func TestProblemsNeverEchoSinkOptionValues(t *testing.T) {
	const secret = "hunter2-s3cr3t"
	env := map[string]string{"S": secret}
	for _, yml := range []string{
		"sources: {gh: {sinks: [{type: smtp, secret: '${S}'}]}}",
		"sources: {gh: {sinks: [{type: http, ordered: '${S}', secret: '${S}'}]}}",
		"sources: {gh: {sinks: [{type: http, secret: {k: &a [*a]}, url: '${S}'}]}}",
		"sources:\n  gh:\n    sinks: ${S}",
		"sources: {gh: {sinks: ['${S}']}}",
		"sources:\n  gh: ${S}",
		"sources:\n  gh:\n    tenant: ['${S}']\n    sinks: [{type: http}]",
		"sources: {gh: {sinks: [{type: http, '${S}': 1, x: '${S}:${MISSING}'}]}}",
	} {
		_, err := Parse([]byte(yml), envOf(env))
		problemsOf(t, err)
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s\nechoes the secret: %v", yml, err)
		}
	}
}

// A field tagged config:"secret" is never echoed in a problem and prints as [REDACTED].
func TestSecretTaggedFieldsAreNeverEchoedOrPrinted(t *testing.T) {
	type section struct {
		Name  string `yaml:"name"`
		Token string `yaml:"token" config:"secret"`
		Keys  []int  `yaml:"keys" config:"secret"`
	}
	var ps problems
	var got section
	root, err := parseYAML([]byte("{name: 7, token: 12345678, keys: [sekrit]}"))
	if err != nil {
		t.Fatal(err)
	}
	newWalker(&ps).decode(root, reflect.ValueOf(&got).Elem(), "s", false, 0)
	msgs := ps.asError().Error()
	if strings.Contains(msgs, "12345678") || strings.Contains(msgs, "sekrit") || !strings.Contains(msgs, "s.name: must be a string, got 7") ||
		!strings.Contains(msgs, "s.token: must be a string, got an integer") || !strings.Contains(msgs, "s.keys[0]: must be an integer, got a string") {
		t.Fatalf("problems: %s", msgs)
	}
	red := redactValue(reflect.ValueOf(section{Name: "n", Token: "t0k"}), false)
	if want := map[string]any{"name": "n", "token": "[REDACTED]", "keys": []any{}}; !reflect.DeepEqual(red, want) {
		t.Fatalf("redacted = %#v, want %#v", red, want)
	}
}

// Inventory A.5 /v1/config: "allow-list of non-secret adapter keys ...; every other adapter value
// "[REDACTED]"; URLs keep host+path, lose user:pass@, query values redacted".
func TestRedactedHidesSecretsAndUserinfo(t *testing.T) {
	c := mustParse(t, `
sources:
  gh:
    tenant: acme
    sinks:
      - type: http
        url: "https://user:pa55@hooks.example.com/in/x?token=t0k3n&v=1#frag"
        secret: whsec_c2VjcmV0
        headers: {authorization: Bearer b34rer}
        timeout_ms: 5000
      - type: rabbitmq
        url: "amqp://guest:gu3st@localhost:5672/vhost"
        exchange: hooks
        routing_key: a.b
      - type: kafka
        brokers: ["k1:9092", "admin:k4fka@k2:9092"]
        topic: hooks
        sasl: {mechanism: plain, username: u, password: k4fka}
      - type: nats
        servers: ["nats://n:n4ts@nats1:4222"]
        subject: hooks.in
        auth: {token: n4ts}
      - type: sqs
        queue_url: "https://sqs.eu-west-1.amazonaws.com/1/q.fifo"
        region: eu-west-1
        access_key_id: AKIAXXXX
        secret_access_key: s3cr3tkey
        topic: {nested: leak}
`, nil)
	red := c.Redacted()
	out, err := json.Marshal(red)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"pa55", "t0k3n", "whsec_", "b34rer", "gu3st", "k4fka", "n4ts", "AKIAXXXX", "s3cr3tkey", "frag", "leak", "user"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("Redacted() leaks %q: %s", secret, out)
		}
	}
	sinks := red["sources"].(map[string]any)["gh"].(map[string]any)["sinks"].([]any)
	want := []map[string]any{
		{"type": "http", "ordered": false, "url": "https://hooks.example.com/in/x?token=[REDACTED]&v=[REDACTED]",
			"secret": "[REDACTED]", "headers": "[REDACTED]", "timeout_ms": 5000},
		{"type": "rabbitmq", "ordered": false, "url": "amqp://localhost:5672/vhost", "exchange": "hooks", "routing_key": "a.b"},
		{"type": "kafka", "ordered": false, "brokers": []any{"k1:9092", "k2:9092"}, "topic": "hooks", "sasl": "[REDACTED]"},
		{"type": "nats", "ordered": false, "servers": []any{"nats://nats1:4222"}, "subject": "hooks.in", "auth": "[REDACTED]"},
		{"type": "sqs", "ordered": false, "queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q.fifo", "region": "eu-west-1",
			"access_key_id": "[REDACTED]", "secret_access_key": "[REDACTED]", "topic": "[REDACTED]"},
	}
	for i := range want {
		if !reflect.DeepEqual(sinks[i], want[i]) {
			t.Errorf("sink %d\n got %#v\nwant %#v", i, sinks[i], want[i])
		}
	}
	if red["instance"] != "default" || red["batcher"].(map[string]any)["max_batch"] != 256 {
		t.Fatalf("non-secret keys missing: %v", red)
	}
	for _, k := range []string{"File", "Embedded", "Warnings", "-"} {
		if _, ok := red[k]; ok {
			t.Fatalf("Redacted() holds load metadata %q", k)
		}
	}
	// Redacted never shares memory with the config.
	sinks[0].(map[string]any)["url"] = "x"
	if c.Sources["gh"].Sinks[0].Options["url"] == "x" {
		t.Fatal("Redacted() aliases the config")
	}
}

// Inventory B.1: "Path ANKUSA_CONFIG, else ./ankusa.yml; none → start with defaults ... (warning)".
// The brief's embedded default carries one sample source; an explicit ANKUSA_CONFIG must exist.
func TestResolveFindsTheFileOrFallsBackToTheEmbeddedDefault(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)

	c, err := Resolve(envOf(nil))
	if err != nil {
		t.Fatalf("embedded default: %v", err)
	}
	if !c.Embedded || c.File != "" || len(c.Warnings) == 0 || !strings.Contains(c.Warnings[0], "embedded default") {
		t.Fatalf("embedded = %v, file = %q, warnings = %v", c.Embedded, c.File, c.Warnings)
	}
	s, ok := c.Sources["sample"]
	if !ok || s.Tenant != "default" || len(s.Sinks) != 1 || s.Sinks[0].Type != "log" {
		t.Fatalf("sample source = %+v", c.Sources)
	}
	if c.WAL.Type != "disk" || !c.Admin.Enabled || c.Admin.IP != "127.0.0.1" || c.Admin.Port != 4002 ||
		c.HTTP.Port != 4000 || c.Node.DataDir != "./data" || c.Instance != "default" {
		t.Fatalf("embedded default = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("embedded default does not validate: %v", err)
	}
	// The embedded default takes env overrides too.
	if c, err := Resolve(envOf(map[string]string{"ANKUSA_HTTP_PORT": "0"})); err != nil || c.HTTP.Port != 0 {
		t.Fatalf("env on embedded default: %v %+v", err, c)
	}

	if err := os.WriteFile("ankusa.yml", []byte("instance: local\n"+okSource), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = Resolve(envOf(nil))
	if err != nil || c.Instance != "local" || c.File != LocalFile || c.Embedded {
		t.Fatalf("./ankusa.yml: %v %+v", err, c)
	}

	other := filepath.Join(dir, "other.yml")
	if err := os.WriteFile(other, []byte("instance: other\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = Resolve(envOf(map[string]string{"ANKUSA_CONFIG": other}))
	if err != nil || c.Instance != "other" || c.File != other {
		t.Fatalf("ANKUSA_CONFIG: %v %+v", err, c)
	}

	_, err = Resolve(envOf(map[string]string{"ANKUSA_CONFIG": filepath.Join(dir, "missing.yml")}))
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrInvalid) {
		t.Fatalf("missing ANKUSA_CONFIG: %v", err)
	}

	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("batcher: {max_batch: 0}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad, nil)
	ps := problemsOf(t, err)
	if ps[0].Path != "batcher.max_batch" || !strings.HasPrefix(err.Error(), bad+": invalid configuration: ") {
		t.Fatalf("Load(bad) = %v", err)
	}
}

// The walk is generic over the types a later section may add: pointers (null = keep), floats, nested
// maps of structs with per-entry defaults.
func TestWalkDecodesAnySectionShape(t *testing.T) {
	type sub struct {
		N int `yaml:"n"`
	}
	type section struct {
		Limit *int              `yaml:"limit"`
		Keep  *int              `yaml:"keep"`
		Sub   *sub              `yaml:"sub"`
		Rate  float64           `yaml:"rate"`
		Per   map[string]sub    `yaml:"per"`
		Srcs  map[string]Source `yaml:"srcs"`
	}
	var ps problems
	got := section{Keep: new(int)}
	*got.Keep = 7
	root, err := parseYAML([]byte("{limit: 3, keep: ~, sub: {n: 2}, rate: 0.5, per: {a: {n: 1}}, srcs: {x: {sinks: [{type: log}]}}}"))
	if err != nil {
		t.Fatal(err)
	}
	newWalker(&ps).decode(root, reflect.ValueOf(&got).Elem(), "s", false, 0)
	if len(ps) != 0 {
		t.Fatalf("problems: %v", ps)
	}
	if *got.Limit != 3 || *got.Keep != 7 || got.Sub.N != 2 || got.Rate != 0.5 || got.Per["a"].N != 1 ||
		got.Srcs["x"].Tenant != "default" || got.Srcs["x"].Sinks[0].Type != "log" {
		t.Fatalf("decoded %+v", got)
	}
}

// Inventory B.1: "Any failure: stderr ankusa: invalid configuration …, exit 78 (EX_CONFIG)".
func TestErrorListsEveryProblemInOrder(t *testing.T) {
	err := &Error{Problems: []Problem{{"", "cannot parse YAML: x"}, {"a.b", "unknown key"}, {"c", "must be > 0, got 0"}}}
	want := "invalid configuration: cannot parse YAML: x; a.b: unknown key; c: must be > 0, got 0"
	if err.Error() != want || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Error() = %q", err.Error())
	}
	if ExitConfig != 78 {
		t.Fatal("ExitConfig must be EX_CONFIG (78)")
	}
	var ps problems
	if ps.asError() != nil {
		t.Fatal("no problems must be a nil error, not a typed nil")
	}
}

// Inventory B.1 range rules for the dispatch section: every refusal names its key path.
func TestDispatchRefusalsNameTheirKeyPath(t *testing.T) {
	cases := map[string]string{
		"dispatch:\n  concurrency: 0\n":                                            "dispatch.concurrency",
		"dispatch:\n  sink_concurrency: 64\n":                                      "dispatch.sink_concurrency",
		"dispatch:\n  breaker_open_ms: 10\n  breaker_max_open_ms: 5\n":             "dispatch.breaker_max_open_ms",
		"dispatch:\n  retry:\n    max_attempts: 0\n":                               "dispatch.retry.max_attempts",
		"dispatch:\n  tenants:\n    acme:\n      concurrency: -1\n":                "dispatch.tenants.acme.concurrency",
		"dispatch:\n  poll_ms: 5\n":                                                "dispatch.poll_ms",
		"sources:\n  s:\n    retry:\n      base_ms: 0\n    sinks: [{type: log}]\n": "sources.s.retry.base_ms",
	}
	var shared []sharedCase
	for yml, path := range cases {
		shared = append(shared, sharedCase{Name: path, YAML: yml})
	}
	shareCases(t, "dispatch_refusals", shared)
	for yml, path := range cases {
		_, err := Parse([]byte(yml), nil)
		var ce *Error
		if !errors.As(err, &ce) {
			t.Fatalf("%q: accepted", yml)
		}
		found := false
		for _, p := range ce.Problems {
			found = found || p.Path == path
		}
		if !found {
			t.Errorf("%q: problems %v do not name %s", yml, ce.Problems, path)
		}
	}
	c, err := Parse([]byte("sources:\n  s:\n    retry: {base_ms: 5, max_ms: 10, max_attempts: 3}\n    sinks: [{type: log}]\n  t:\n    sinks: [{type: log}]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := c.RetryOf("s"); r.BaseMS != 5 || r.MaxAttempts != 3 {
		t.Fatalf("source retry %+v", r)
	}
	if r := c.RetryOf("t"); r != c.Dispatch.Retry {
		t.Fatalf("default retry %+v", r)
	}
}
