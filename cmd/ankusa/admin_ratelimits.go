package main

import (
	"fmt"
	"net/url"

	"github.com/spf13/cobra"
)

// rateLimitsCommand is `ankusa rate-limits list|set|delete`: the tenants' hooks/s limits and their runtime
// overrides, through the admin API.
func rateLimitsCommand(c *adminClient) *cobra.Command {
	rl := &cobra.Command{Use: "rate-limits", Short: "Tenant rate limits and their runtime overrides, through the admin API"}
	c.flags(rl)
	row := func(m map[string]any) []any {
		rate, burst := "-", "-"
		if m["rate"] != nil {
			rate, burst = num(m["rate"]), num(m["burst"])
		}
		return []any{m["tenant"], m["source"], rate, burst}
	}
	header := []string{"TENANT", "SOURCE", "RATE", "BURST"}
	list := &cobra.Command{Use: "list", Short: "List the configured default and every tenant's effective limit", Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			var out struct {
				Default map[string]any   `json:"default"`
				Tenants []map[string]any `json:"tenants"`
			}
			if err := c.call("GET", "/v1/rate-limits", nil, nil, &out); err != nil || c.output == "json" {
				return err
			}
			rows := make([][]any, 0, len(out.Tenants)+1)
			if out.Default != nil {
				rows = append(rows, []any{"*", "default", num(out.Default["rate"]), num(out.Default["burst"])})
			}
			for _, t := range out.Tenants {
				rows = append(rows, row(t))
			}
			return c.table(header, rows)
		}}
	var rate, burst float64
	set := &cobra.Command{Use: "set <tenant> --rate R --burst B", Short: "Set a tenant's runtime override (audited, applied at once, kept across restarts)",
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error {
			var out map[string]any
			body := map[string]any{"rate": rate, "burst": burst}
			if err := c.call("PUT", "/v1/tenants/"+url.PathEscape(args[0])+"/rate-limit", nil, body, &out); err != nil || c.output == "json" {
				return err
			}
			if out["audit_seq"] == nil {
				fmt.Fprintf(c.stdout, "%s: unchanged\n", args[0])
				return nil
			}
			fmt.Fprintf(c.stdout, "%s: rate %s burst %s (revision %s)\n", args[0], num(out["rate"]), num(out["burst"]), num(out["revision"]))
			return nil
		}}
	set.Flags().Float64Var(&rate, "rate", 0, "hooks per second (fractions allowed); required")
	set.Flags().Float64Var(&burst, "burst", 0, "bucket size in hooks, at least 1; required")
	del := &cobra.Command{Use: "delete <tenant>", Short: "Remove a tenant's runtime override (the config's limit applies again)",
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := c.call("DELETE", "/v1/tenants/"+url.PathEscape(args[0])+"/rate-limit", nil, nil, nil); err != nil {
				return err
			}
			if c.output != "json" {
				fmt.Fprintf(c.stdout, "%s: override removed\n", args[0])
			}
			return nil
		}}
	rl.AddCommand(list, set, del)
	return rl
}
