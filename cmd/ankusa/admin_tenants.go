package main

import (
	"fmt"
	"net/url"

	"github.com/spf13/cobra"
)

// tenantsCommand is `ankusa tenants erase <tenant> --confirm <tenant>`: DELETE /v1/tenants/{tenant}.
func tenantsCommand(c *adminClient) *cobra.Command {
	tenants := &cobra.Command{Use: "tenants", Short: "Tenants, through the admin API"}
	c.flags(tenants)
	var confirm string
	erase := &cobra.Command{Use: "erase <tenant>", Short: "Erase every trace of a tenant (irreversible; --confirm names the tenant again)",
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error {
			t := args[0]
			if confirm != t {
				return &exitError{code: exitUsage, err: fmt.Errorf("erase is irreversible: pass --confirm %s", t)}
			}
			var job map[string]any
			q := url.Values{"confirm": {t}}
			if err := c.call("DELETE", "/v1/tenants/"+url.PathEscape(t), q, nil, &job); err != nil || c.output == "json" {
				return err
			}
			return c.table([]string{"TENANT", "STATE", "STAGE", "STARTED"},
				[][]any{{job["tenant"], job["state"], job["stage"], ms(job["started_at"])}})
		}}
	erase.Flags().StringVar(&confirm, "confirm", "", "the tenant's name again")
	tenants.AddCommand(erase)
	return tenants
}
