package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// routesCommand is `ankusa routes list|get|apply -f|delete|test`: the route guard's table, through the admin API.
func routesCommand(c *adminClient) *cobra.Command {
	rc := &cobra.Command{Use: "routes", Short: "The route guard's routes (routes.enabled), through the admin API"}
	c.flags(rc)
	header := []string{"ID", "PATH", "METHODS", "ENABLED", "TENANT", "IP RULES", "REVISION"}
	row := func(r map[string]any) []any {
		var methods []string
		for _, m := range asList(r["methods"]) {
			methods = append(methods, fmt.Sprint(m))
		}
		rules := "-"
		if ir, ok := r["ip_rules"].(map[string]any); ok {
			rules = fmt.Sprintf("%d, default %v", len(asList(ir["rules"])), ir["default"])
		}
		tenant := "-"
		if t, ok := r["tenant"].(string); ok && t != "" {
			tenant = t
		}
		return []any{r["id"], r["path"], strings.Join(methods, ","), r["enabled"], tenant, rules, num(r["revision"])}
	}
	var enabled, cursor string
	var limit int64
	list := &cobra.Command{Use: "list", Short: "List the routes, id-ordered", Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			q := url.Values{}
			setIf(q, "enabled", enabled)
			setIf(q, "cursor", cursor)
			setIf(q, "limit", strconv.FormatInt(limit, 10))
			var out struct {
				Routes     []map[string]any `json:"routes"`
				NextCursor string           `json:"next_cursor"`
			}
			if err := c.call("GET", "/v1/routes", q, nil, &out); err != nil || c.output == "json" {
				return err
			}
			rows := make([][]any, 0, len(out.Routes))
			for _, r := range out.Routes {
				rows = append(rows, row(r))
			}
			if err := c.table(header, rows); err != nil {
				return err
			}
			if out.NextCursor != "" {
				fmt.Fprintf(c.stdout, "next page: --cursor %s\n", out.NextCursor)
			}
			return nil
		}}
	list.Flags().StringVar(&enabled, "enabled", "", "only enabled (true) or disabled (false) routes")
	list.Flags().StringVar(&cursor, "cursor", "", "the next page's cursor a previous list printed")
	list.Flags().Int64Var(&limit, "limit", 0, "routes per page (default 100, at most 1000)")
	get := &cobra.Command{Use: "get <id>", Short: "Show one route", Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error {
			var out map[string]any
			if err := c.call("GET", "/v1/routes/"+url.PathEscape(args[0]), nil, nil, &out); err != nil || c.output == "json" {
				return err
			}
			if err := c.table(header, [][]any{row(out)}); err != nil {
				return err
			}
			if ir, ok := out["ip_rules"].(map[string]any); ok {
				printRules(c, ir)
			}
			return nil
		}}
	var file string
	apply := &cobra.Command{Use: "apply -f <file>", Short: "Create or replace the routes a YAML file lists (routes: [...], or routes.seed of a config file)",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			specs, err := readRouteSpecs(file)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			var rows [][]any
			for _, spec := range specs {
				id, _ := spec["id"].(string)
				if id == "" {
					return &exitError{code: exitUsage, err: fmt.Errorf("%s: a route without an id", file)}
				}
				body, err := json.Marshal(spec)
				if err != nil {
					return &exitError{code: exitUsage, err: fmt.Errorf("route %s: %w", id, err)}
				}
				var out map[string]any
				if err := c.call("PUT", "/v1/routes/"+url.PathEscape(id), nil, json.RawMessage(body), &out); err != nil {
					return err
				}
				result := "unchanged"
				if out["audit_seq"] != nil {
					result = "revision " + num(out["revision"])
				}
				rows = append(rows, []any{id, result})
			}
			if c.output == "json" {
				return nil
			}
			return c.table([]string{"ID", "RESULT"}, rows)
		}}
	apply.Flags().StringVarP(&file, "file", "f", "", "a YAML file: a routes: list of {id, path, methods, enabled, tenant, ip_rules, metadata}")
	del := &cobra.Command{Use: "delete <id>", Short: "Delete a route (audited; in force at once)", Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := c.call("DELETE", "/v1/routes/"+url.PathEscape(args[0]), nil, nil, nil); err != nil {
				return err
			}
			if c.output != "json" {
				fmt.Fprintf(c.stdout, "%s: deleted\n", args[0])
			}
			return nil
		}}
	var method, path, ip string
	test := &cobra.Command{Use: "test --path P --ip A [--method M]", Short: "Dry run: what the guard decides for a request now",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			if path == "" || ip == "" {
				return &exitError{code: exitUsage, err: fmt.Errorf("test needs --path and --ip")}
			}
			var out map[string]any
			body := map[string]any{"method": method, "path": path, "ip": ip}
			if err := c.call("POST", "/v1/routes/test", nil, body, &out); err != nil || c.output == "json" {
				return err
			}
			route, rule := "-", "-"
			if id, ok := out["route_id"].(string); ok {
				route = id
			}
			if r, ok := out["ip_rule"].(map[string]any); ok {
				cidr, _ := r["cidr"].(string)
				if cidr == "" {
					cidr = "default"
				}
				rule = fmt.Sprintf("%v %v %s", r["scope"], r["action"], cidr)
			}
			status := "-"
			if out["status"] != nil {
				status = num(out["status"])
			}
			return c.table([]string{"DECISION", "REASON", "STATUS", "ROUTE", "IP RULE"}, [][]any{{out["decision"], out["reason"], status, route, rule}})
		}}
	test.Flags().StringVar(&method, "method", "POST", "the request's method")
	test.Flags().StringVar(&path, "path", "", "the request's path")
	test.Flags().StringVar(&ip, "ip", "", "the client's address")
	rc.AddCommand(list, get, apply, del, test)
	return rc
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func printRules(c *adminClient, ir map[string]any) {
	fmt.Fprintf(c.stdout, "default: %v\n", ir["default"])
	var rows [][]any
	for i, r := range asList(ir["rules"]) {
		m, _ := r.(map[string]any)
		rows = append(rows, []any{i + 1, m["action"], m["cidr"]})
	}
	if len(rows) > 0 {
		_ = c.table([]string{"#", "ACTION", "CIDR"}, rows)
	}
}

// readRouteSpecs reads a routes: list (or a config file's routes.seed) from file.
func readRouteSpecs(file string) ([]map[string]any, error) {
	if file == "" {
		return nil, fmt.Errorf("apply needs -f <file>")
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Routes yaml.Node `yaml:"routes"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var specs []map[string]any
	switch doc.Routes.Kind {
	case yaml.SequenceNode:
		err = doc.Routes.Decode(&specs)
	case yaml.MappingNode:
		var cfg struct {
			Seed []map[string]any `yaml:"seed"`
		}
		err = doc.Routes.Decode(&cfg)
		specs = cfg.Seed
	}
	if err != nil || len(specs) == 0 {
		return nil, fmt.Errorf("%s: no routes: list (%v)", file, err)
	}
	return specs, nil
}

// ipRulesCommand is `ankusa ip-rules get|set`: the global IP rules the guard checks before any route.
func ipRulesCommand(c *adminClient) *cobra.Command {
	ir := &cobra.Command{Use: "ip-rules", Short: "The route guard's global IP rules, through the admin API"}
	c.flags(ir)
	get := &cobra.Command{Use: "get", Short: "Show the global IP rules", Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			var out map[string]any
			if err := c.call("GET", "/v1/ip-rules", nil, nil, &out); err != nil || c.output == "json" {
				return err
			}
			printRules(c, out)
			return nil
		}}
	var file, def string
	var rules []string
	set := &cobra.Command{Use: "set (-f <file> | --default allow|deny [--rule deny:CIDR ...])",
		Short: "Replace the global IP rules (audited, in force at once, kept across restarts); rules apply in the order given",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			body := map[string]any{}
			switch {
			case file != "":
				raw, err := os.ReadFile(file)
				if err != nil {
					return &exitError{code: exitUsage, err: err}
				}
				if err := yaml.Unmarshal(raw, &body); err != nil {
					return &exitError{code: exitUsage, err: fmt.Errorf("%s: %w", file, err)}
				}
			case def != "":
				list := make([]map[string]any, 0, len(rules))
				for _, r := range rules {
					action, cidr, ok := strings.Cut(r, ":")
					if !ok {
						return &exitError{code: exitUsage, err: fmt.Errorf("--rule %q: want action:cidr (deny:10.0.0.0/8)", r)}
					}
					list = append(list, map[string]any{"action": action, "cidr": cidr})
				}
				body["default"], body["rules"] = def, list
			default:
				return &exitError{code: exitUsage, err: fmt.Errorf("set needs -f <file> or --default")}
			}
			var out map[string]any
			if err := c.call("PUT", "/v1/ip-rules", nil, body, &out); err != nil || c.output == "json" {
				return err
			}
			if out["audit_seq"] == nil {
				fmt.Fprintln(c.stdout, "unchanged")
			}
			printRules(c, out)
			return nil
		}}
	set.Flags().StringVarP(&file, "file", "f", "", "a YAML or JSON file {default, rules: [{action, cidr}]}")
	set.Flags().StringVar(&def, "default", "", "allow or deny: the decision when no rule matches")
	set.Flags().StringArrayVar(&rules, "rule", nil, "action:cidr, repeated in order (the first that matches decides)")
	ir.AddCommand(get, set)
	return ir
}
