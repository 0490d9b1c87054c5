package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ankusa-go/ankusa/admin"
	"github.com/ankusa-go/ankusa/config"
)

// Exit codes of the commands that speak to a node's admin API (docs/admin.md), for scripts:
// 0 done; 1 the node refused the request (400, 404, 409: it will refuse it again); 2 bad usage (a flag or
// argument); 3 not authenticated or not allowed (401, 403); 4 the node could not answer (no connection, a
// timeout, 5xx: retrying may succeed).
const (
	exitRefused     = 1
	exitUsage       = 2
	exitAuth        = 3
	exitUnavailable = 4
)

// adminClient holds the flags every admin command shares.
type adminClient struct {
	env       func(string) (string, bool)
	url       string
	tokenFile string
	// certFile and keyFile are a client certificate presented to an admin.tls listener; caFile the CA its
	// server certificate is checked against (default: the system's).
	certFile, keyFile, caFile string
	output                    string
	stdout                    io.Writer
}

func (c *adminClient) flags(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&c.url, "admin-url", "", "the node's admin API (default: http://<admin.ip>:<admin.port> of the config, else http://127.0.0.1:4002)")
	f.StringVar(&c.tokenFile, "token-file", "", "a file holding the bearer token (default: $ANKUSA_ADMIN_TOKEN, else <data_dir>/<instance>/admin.token of the config)")
	f.StringVar(&c.certFile, "cert", "", "a client certificate (PEM) for an admin listener with admin.tls (default: $ANKUSA_ADMIN_CERT); with it no token is needed")
	f.StringVar(&c.keyFile, "key", "", "the client certificate's key (PEM) (default: $ANKUSA_ADMIN_KEY)")
	f.StringVar(&c.caFile, "cacert", "", "the CA (PEM) the admin listener's certificate is checked against (default: $ANKUSA_ADMIN_CACERT, else the system's)")
	f.StringVarP(&c.output, "output", "o", "table", "table or json")
}

// token reads the bearer token: --token-file, else ANKUSA_ADMIN_TOKEN, else the local token file. With a
// client certificate the token is optional: "" when neither the flag nor the variable gives one.
func (c *adminClient) token() (string, error) {
	path := c.tokenFile
	if path == "" {
		if t, ok := c.env("ANKUSA_ADMIN_TOKEN"); ok && strings.TrimSpace(t) != "" {
			return strings.TrimSpace(t), nil
		}
		if c.flagOrEnv(c.certFile, "ANKUSA_ADMIN_CERT") != "" {
			return "", nil
		}
		cfg, err := config.Resolve(c.env)
		if err != nil {
			return "", &exitError{code: exitUsage, err: fmt.Errorf("no --token-file, no ANKUSA_ADMIN_TOKEN, and no config to find the local token: %w", err)}
		}
		path = filepath.Join(cfg.Node.DataDir, cfg.Instance, admin.LocalTokenFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", &exitError{code: exitAuth, err: fmt.Errorf("cannot read the token: %w", err)}
	}
	return strings.TrimSpace(string(b)), nil
}

// flagOrEnv is a flag's value, else the variable's.
func (c *adminClient) flagOrEnv(flag, name string) string {
	if flag != "" {
		return flag
	}
	v, _ := c.env(name)
	return strings.TrimSpace(v)
}

func (c *adminClient) base() string {
	if c.url != "" {
		return strings.TrimRight(c.url, "/")
	}
	scheme := "http://"
	if c.flagOrEnv(c.certFile, "ANKUSA_ADMIN_CERT") != "" || c.flagOrEnv(c.caFile, "ANKUSA_ADMIN_CACERT") != "" {
		scheme = "https://"
	}
	if cfg, err := config.Resolve(c.env); err == nil {
		if cfg.Admin.TLS.Enabled() {
			scheme = "https://"
		}
		return scheme + net.JoinHostPort(cfg.Admin.IP, strconv.Itoa(cfg.Admin.Port))
	}
	return scheme + "127.0.0.1:4002"
}

// tlsConfig is the client side of admin.tls: the CA of --cacert and the certificate of --cert/--key (nil
// when none is given: the system's roots, no certificate).
func (c *adminClient) tlsConfig() (*tls.Config, error) {
	certFile, keyFile := c.flagOrEnv(c.certFile, "ANKUSA_ADMIN_CERT"), c.flagOrEnv(c.keyFile, "ANKUSA_ADMIN_KEY")
	caFile := c.flagOrEnv(c.caFile, "ANKUSA_ADMIN_CACERT")
	if certFile == "" && keyFile == "" && caFile == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := config.LoadCertPool(caFile)
		if err != nil {
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("--cacert: %w", err)}
		}
		tc.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return nil, &exitError{code: exitUsage, err: errors.New("--cert and --key go together")}
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("--cert/--key: %w", err)}
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// call sends one request and decodes the JSON answer into out; an error answer becomes an exitError with
// the code its status maps to.
func (c *adminClient) call(method, path string, query url.Values, body any, out any) error {
	if c.output != "table" && c.output != "json" {
		return &exitError{code: exitUsage, err: fmt.Errorf("-o must be table or json, got %q", c.output)}
	}
	tok, err := c.token()
	if err != nil {
		return err
	}
	u := c.base() + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	tc, err := c.tlsConfig()
	if err != nil {
		return err
	}
	tr := &http.Transport{TLSClientConfig: tc}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return &exitError{code: exitUnavailable, err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return &exitError{code: exitUnavailable, err: err}
	}
	if resp.StatusCode >= 300 {
		var e map[string]any
		_ = json.Unmarshal(raw, &e)
		code := exitRefused
		switch {
		case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
			code = exitAuth
		case resp.StatusCode >= 500:
			code = exitUnavailable
		}
		detail := ""
		for _, k := range []string{"field", "message", "scope", "tenant", "role", "setting", "state", "method", "route_id", "limit", "pending", "inflight"} {
			if v, ok := e[k]; ok {
				detail += fmt.Sprintf(" %s=%v", k, v)
			}
		}
		return &exitError{code: code, err: fmt.Errorf("%s %s: %d %v%s", method, path, resp.StatusCode, e["error"], detail)}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil // 204: nothing to print or decode
	}
	if c.output == "json" {
		_, err := c.stdout.Write(append(bytes.TrimSpace(raw), '\n'))
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &exitError{code: exitUnavailable, err: fmt.Errorf("%s %s: cannot read the answer: %w", method, path, err)}
	}
	return nil
}

// table prints rows under header, tab-aligned.
func (c *adminClient) table(header []string, rows [][]any) error {
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, v := range r {
			cells[i] = fmt.Sprint(v)
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	return w.Flush()
}

// ms prints a unix-ms time as RFC 3339 (or - for 0).
func ms(v any) string {
	f, _ := v.(float64)
	if f == 0 {
		return "-"
	}
	return time.UnixMilli(int64(f)).UTC().Format(time.RFC3339)
}

// num prints a JSON number without a float's exponent.
func num(v any) string {
	f, _ := v.(float64)
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// setIf adds v to q under k when it is not the zero value.
func setIf(q url.Values, k, v string) {
	if v != "" && v != "0" {
		q.Set(k, v)
	}
}

func adminCommands(stdout io.Writer, env func(string) (string, bool)) []*cobra.Command {
	c := &adminClient{env: env, stdout: stdout}
	var source, tenant, cursor, id string
	var since, until, limit int64
	var rate float64
	var maxLag int64

	dlq := &cobra.Command{Use: "dlq", Short: "The node's dead-letter queue, through its admin API"}
	c.flags(dlq)
	dlqList := &cobra.Command{Use: "list", Short: "List dead-lettered deliveries, newest first", Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			q := url.Values{}
			setIf(q, "source_id", source)
			setIf(q, "tenant_id", tenant)
			setIf(q, "cursor", cursor)
			setIf(q, "since", strconv.FormatInt(since, 10))
			setIf(q, "limit", strconv.FormatInt(limit, 10))
			var out struct {
				Total      int64            `json:"total"`
				NextCursor string           `json:"next_cursor"`
				Entries    []map[string]any `json:"entries"`
			}
			if err := c.call("GET", "/v1/dlq", q, nil, &out); err != nil || c.output == "json" {
				return err
			}
			rows := make([][]any, 0, len(out.Entries))
			for _, e := range out.Entries {
				rows = append(rows, []any{e["id"], e["tenant_id"], e["source_id"], e["sink_type"], ms(e["dead_lettered_at"]), num(e["size"]), e["reason"]})
			}
			if err := c.table([]string{"ID", "TENANT", "SOURCE", "SINK", "DEAD AT", "SIZE", "REASON"}, rows); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "total %d", out.Total)
			if out.NextCursor != "" {
				fmt.Fprintf(stdout, "; next page: --cursor %s", out.NextCursor)
			}
			fmt.Fprintln(stdout)
			return nil
		}}
	dlqList.Flags().StringVar(&source, "source", "", "only this source")
	dlqList.Flags().StringVar(&tenant, "tenant", "", "only this tenant")
	dlqList.Flags().Int64Var(&since, "since", 0, "dead-lettered at or after (unix ms)")
	dlqList.Flags().Int64Var(&limit, "limit", 0, "entries per page (default 100, at most 1000)")
	dlqList.Flags().StringVar(&cursor, "cursor", "", "the next page's cursor a previous list printed")
	dlq.AddCommand(dlqList)

	jobRows := func(jobs []map[string]any) error {
		rows := make([][]any, 0, len(jobs))
		for _, j := range jobs {
			src := j["source_id"]
			if src == "" {
				src = "*"
			}
			rows = append(rows, []any{j["id"], j["kind"], j["state"], src, num(j["moved"]), num(j["rate"]), ms(j["created_at"])})
		}
		return c.table([]string{"ID", "KIND", "STATE", "SOURCE", "MOVED", "RATE", "CREATED"}, rows)
	}
	replay := &cobra.Command{Use: "replay", Short: "Replay jobs (dead-lettered deliveries back to due, archived hooks committed again, or lifecycle events published again), through the admin API"}
	c.flags(replay)
	kind, tenant := "dlq", ""
	create := &cobra.Command{Use: "create", Short: "Create a replay job", Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			body := map[string]any{"kind": kind, "source_id": source, "since": since, "until": until, "rate": rate, "max_lag_ms": maxLag}
			if tenant != "" {
				body["tenant_id"] = tenant
			}
			var j map[string]any
			if err := c.call("POST", "/v1/replays", nil, body, &j); err != nil || c.output == "json" {
				return err
			}
			return jobRows([]map[string]any{j})
		}}
	create.Flags().StringVar(&kind, "kind", "dlq", "the job's kind: dlq, archive (hooks received in [since, until), both required) or lifecycle (the events of the changes committed in [since, until), until by now or 0 for now)")
	create.Flags().StringVar(&source, "source", "", "only this source's rows")
	create.Flags().StringVar(&tenant, "tenant", "", "archive and lifecycle jobs: only this tenant's hooks or events")
	create.Flags().Int64Var(&since, "since", 0, "dlq: rows dead-lettered at or after; archive: hooks received at or after; lifecycle: changes committed at or after (unix ms)")
	create.Flags().Int64Var(&until, "until", 0, "dlq: rows dead-lettered at or before; archive: hooks received before; lifecycle: changes committed before (unix ms)")
	create.Flags().Float64Var(&rate, "rate", 0, "rows, hooks or events per second (default 1000)")
	create.Flags().Int64Var(&maxLag, "max-lag-ms", 0, "drip only while dispatch lags at most this (default 2000)")
	list := &cobra.Command{Use: "list", Short: "List replay jobs", Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			var out struct {
				Jobs []map[string]any `json:"jobs"`
			}
			if err := c.call("GET", "/v1/replays", nil, nil, &out); err != nil || c.output == "json" {
				return err
			}
			return jobRows(out.Jobs)
		}}
	replay.AddCommand(create, list)
	for _, action := range []string{"pause", "resume", "cancel"} {
		replay.AddCommand(&cobra.Command{Use: action + " <job id>", Short: strings.ToUpper(action[:1]) + action[1:] + " a replay job",
			Args: usageArgs(cobra.ExactArgs(1)), RunE: func(_ *cobra.Command, args []string) error {
				if _, err := parseJobID(args[0]); err != nil {
					return err
				}
				var j map[string]any
				if err := c.call("POST", "/v1/replays/"+args[0]+"/"+action, nil, nil, &j); err != nil || c.output == "json" {
					return err
				}
				return jobRows([]map[string]any{j})
			}})
	}

	quarantine := &cobra.Command{Use: "quarantine", Short: "The quarantine pen, through the admin API"}
	c.flags(quarantine)
	qList := &cobra.Command{Use: "list", Short: "List held hooks, newest first (no bodies)", Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			q := url.Values{}
			setIf(q, "source_id", source)
			setIf(q, "tenant_id", tenant)
			setIf(q, "limit", strconv.FormatInt(limit, 10))
			var out struct {
				Entries []map[string]any `json:"entries"`
			}
			if err := c.call("GET", "/v1/quarantine", q, nil, &out); err != nil || c.output == "json" {
				return err
			}
			rows := make([][]any, 0, len(out.Entries))
			for _, e := range out.Entries {
				rows = append(rows, []any{e["id"], e["tenant_id"], e["source_id"], ms(e["received_at"]), num(e["size"]), e["reason"]})
			}
			return c.table([]string{"ID", "TENANT", "SOURCE", "RECEIVED", "SIZE", "REASON"}, rows)
		}}
	qList.Flags().StringVar(&source, "source", "", "only this source")
	qList.Flags().StringVar(&tenant, "tenant", "", "only this tenant")
	qList.Flags().Int64Var(&limit, "limit", 0, "entries (default 100, at most 1000)")
	release := &cobra.Command{Use: "release", Short: "Re-verify held hooks with their source's current verifier; commit those that pass", Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			body := map[string]any{"source_id": source}
			if limit > 0 {
				body["limit"] = limit
			}
			var out map[string]any
			if err := c.call("POST", "/v1/quarantine/release", nil, body, &out); err != nil || c.output == "json" {
				return err
			}
			return c.table([]string{"RELEASED", "DUPLICATES", "HELD"}, [][]any{{num(out["released"]), num(out["duplicates"]), num(out["held"])}})
		}}
	release.Flags().StringVar(&source, "source", "", "only this source's hooks")
	release.Flags().Int64Var(&limit, "limit", 0, "hooks (default 100, at most 1000)")
	purge := &cobra.Command{Use: "purge", Short: "Delete held hooks, oldest first", Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			if id != "" {
				if _, err := parseJobID(id); err != nil {
					return err
				}
			}
			q := url.Values{}
			setIf(q, "source_id", source)
			setIf(q, "id", id)
			setIf(q, "since", strconv.FormatInt(since, 10))
			setIf(q, "until", strconv.FormatInt(until, 10))
			setIf(q, "limit", strconv.FormatInt(limit, 10))
			var out map[string]any
			if err := c.call("DELETE", "/v1/quarantine", q, nil, &out); err != nil || c.output == "json" {
				return err
			}
			return c.table([]string{"DELETED", "BYTES"}, [][]any{{num(out["deleted"]), num(out["bytes"])}})
		}}
	purge.Flags().StringVar(&source, "source", "", "only this source's hooks")
	purge.Flags().StringVar(&id, "id", "", "only this hook")
	purge.Flags().Int64Var(&since, "since", 0, "received at or after (unix ms)")
	purge.Flags().Int64Var(&until, "until", 0, "received at or before (unix ms)")
	purge.Flags().Int64Var(&limit, "limit", 0, "hooks (default 1000, at most 10000)")
	quarantine.AddCommand(qList, release, purge)
	cmds := []*cobra.Command{dlq, replay, quarantine, hooksCommand(c), tenantsCommand(c), sourcesCommand(c), auditCommand(c), rateLimitsCommand(c),
		routesCommand(c), ipRulesCommand(c)}
	for _, cmd := range cmds {
		cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: exitUsage, err: err} })
	}
	return cmds
}

// parseJobID checks an id argument before it becomes part of a URL path.
func parseJobID(s string) (string, error) {
	if len(s) != 36 || strings.Trim(s, "0123456789abcdefABCDEF-") != "" || strings.Count(s, "-") != 4 {
		return "", &exitError{code: exitUsage, err: errors.New("not an id (8-4-4-4-12 hex)")}
	}
	return s, nil
}

// usageArgs makes a wrong argument count exit with exitUsage.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		return nil
	}
}
