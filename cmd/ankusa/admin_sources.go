package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strconv"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// sourcesCommand is `ankusa sources list|apply -f`: the tenant sources of the admin API.
func sourcesCommand(c *adminClient) *cobra.Command {
	sources := &cobra.Command{Use: "sources", Short: "Tenant sources (the file's and the API-managed ones), through the admin API"}
	c.flags(sources)
	tenant := "default"
	list := &cobra.Command{Use: "list", Short: "List a tenant's sources (redacted)", Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			var out struct {
				Sources []map[string]any `json:"sources"`
			}
			if err := c.call("GET", "/v1/tenants/"+url.PathEscape(tenant)+"/sources", nil, nil, &out); err != nil || c.output == "json" {
				return err
			}
			rows := make([][]any, 0, len(out.Sources))
			for _, s := range out.Sources {
				spec, _ := s["spec"].(map[string]any)
				sinks, _ := spec["sinks"].([]any)
				rows = append(rows, []any{s["tenant"], s["name"], s["store"], s["ingest_path"], len(sinks)})
			}
			return c.table([]string{"TENANT", "NAME", "STORE", "INGEST PATH", "SINKS"}, rows)
		}}
	list.Flags().StringVar(&tenant, "tenant", "default", "the tenant")
	var file string
	apply := &cobra.Command{Use: "apply -f <file>", Short: "Create or replace the sources a YAML file lists under sources: (each in its tenant, else --tenant)",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			if file == "" {
				return &exitError{code: exitUsage, err: fmt.Errorf("apply needs -f <file>")}
			}
			raw, err := os.ReadFile(file)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			var doc struct {
				Sources map[string]map[string]any `yaml:"sources"`
			}
			if err := yaml.Unmarshal(raw, &doc); err != nil || len(doc.Sources) == 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("%s: no sources: mapping (%v)", file, err)}
			}
			names := make([]string, 0, len(doc.Sources))
			for n := range doc.Sources {
				names = append(names, n)
			}
			sort.Strings(names)
			var rows [][]any
			for _, n := range names {
				spec := doc.Sources[n]
				t := tenant
				if st, ok := spec["tenant"].(string); ok && st != "" {
					t = st
				}
				body, err := json.Marshal(spec)
				if err != nil {
					return &exitError{code: exitUsage, err: fmt.Errorf("source %s: %w", n, err)}
				}
				var out map[string]any
				if err := c.call("PUT", "/v1/tenants/"+url.PathEscape(t)+"/sources/"+url.PathEscape(n), nil, json.RawMessage(body), &out); err != nil {
					return err
				}
				result := "unchanged"
				if rev, ok := out["revision"].(float64); ok {
					result = "revision " + strconv.FormatFloat(rev, 'f', -1, 64)
				}
				rows = append(rows, []any{t, n, result})
			}
			if c.output == "json" {
				return nil
			}
			return c.table([]string{"TENANT", "NAME", "RESULT"}, rows)
		}}
	apply.Flags().StringVarP(&file, "file", "f", "", "a YAML file with a sources: mapping, as the config file writes it")
	apply.Flags().StringVar(&tenant, "tenant", "default", "the tenant of a source that names none")
	var deadLetter bool
	del := &cobra.Command{Use: "delete <tenant> <name>", Short: "Delete an API-managed source; refused (exit 1, with the counts) while it has deliveries to make, unless --dead-letter",
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(_ *cobra.Command, args []string) error {
			var q url.Values
			if deadLetter {
				q = url.Values{"deliveries": {"dead_letter"}}
			}
			if err := c.call("DELETE", "/v1/tenants/"+url.PathEscape(args[0])+"/sources/"+url.PathEscape(args[1]), q, nil, nil); err != nil {
				return err
			}
			if c.output == "json" {
				return nil
			}
			return c.table([]string{"TENANT", "NAME", "RESULT"}, [][]any{{args[0], args[1], "deleted"}})
		}}
	del.Flags().BoolVar(&deadLetter, "dead-letter", false, "dead-letter the source's deliveries still to make ({source_gone, <name>}) and delete it")
	sources.AddCommand(list, apply, del)
	return sources
}

// auditCommand is `ankusa audit list`: the audit trail in commit order.
func auditCommand(c *adminClient) *cobra.Command {
	audit := &cobra.Command{Use: "audit", Short: "The audit trail of operator changes, through the admin API"}
	c.flags(audit)
	var tenant, subject, cursor string
	var limit int64
	list := &cobra.Command{Use: "list", Short: "List audit rows in commit order", Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			q := url.Values{}
			setIf(q, "tenant_id", tenant)
			setIf(q, "subject", subject)
			setIf(q, "cursor", cursor)
			setIf(q, "limit", strconv.FormatInt(limit, 10))
			var out struct {
				NextCursor string           `json:"next_cursor"`
				Entries    []map[string]any `json:"entries"`
			}
			if err := c.call("GET", "/v1/audit", q, nil, &out); err != nil || c.output == "json" {
				return err
			}
			rows := make([][]any, 0, len(out.Entries))
			for _, e := range out.Entries {
				t := e["tenant_id"]
				if t == nil {
					t = "-"
				}
				rows = append(rows, []any{num(e["seq"]), ms(e["at"]), e["actor"], e["action"], e["subject"], t, num(e["revision"]), e["status"]})
			}
			if err := c.table([]string{"SEQ", "AT", "ACTOR", "ACTION", "SUBJECT", "TENANT", "REVISION", "STATUS"}, rows); err != nil {
				return err
			}
			if out.NextCursor != "" {
				fmt.Fprintf(c.stdout, "next page: --cursor %s\n", out.NextCursor)
			}
			return nil
		}}
	list.Flags().StringVar(&tenant, "tenant", "", "only this tenant's rows")
	list.Flags().StringVar(&subject, "subject", "", "only this subject's rows (e.g. source:acme/github)")
	list.Flags().StringVar(&cursor, "cursor", "", "the next page's cursor a previous list printed")
	list.Flags().Int64Var(&limit, "limit", 0, "rows per page (default 100, at most 1000)")
	audit.AddCommand(list)
	return audit
}
