package main

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// hooksCommand is `ankusa hooks get <id>`: one hook through GET /v1/hooks/{id}.
func hooksCommand(c *adminClient) *cobra.Command {
	hooks := &cobra.Command{Use: "hooks", Short: "Stored hooks, through the admin API"}
	c.flags(hooks)
	var bodyOnly bool
	get := &cobra.Command{Use: "get <id>", Short: "One hook: metadata, headers as stored, body, deliveries, archive location",
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error {
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			var h map[string]any
			if err := c.call("GET", "/v1/hooks/"+url.PathEscape(id), nil, nil, &h); err != nil || c.output == "json" {
				return err
			}
			body, err := base64.StdEncoding.DecodeString(fmt.Sprint(h["body_base64"]))
			if err != nil {
				return &exitError{code: exitUnavailable, err: fmt.Errorf("the answer's body is not base64: %w", err)}
			}
			if bodyOnly {
				_, err := c.stdout.Write(body)
				return err
			}
			return printHook(c, h, body)
		}}
	get.Flags().BoolVar(&bodyOnly, "body", false, "print only the body, byte for byte")
	hooks.AddCommand(get)
	return hooks
}

func printHook(c *adminClient, h map[string]any, body []byte) error {
	archive := "-"
	if a, ok := h["archive"].(map[string]any); ok {
		archive = fmt.Sprintf("%v @%s+%s", a["segment_key"], num(a["offset"]), num(a["length"]))
	}
	if err := c.table([]string{"FIELD", "VALUE"}, [][]any{
		{"id", h["id"]}, {"where", h["where"]}, {"tenant", h["tenant_id"]}, {"source", h["source_id"]},
		{"received_at", ms(h["received_at"])}, {"content_type", h["content_type"]}, {"size", num(h["size"])},
		{"verification", h["verification"]}, {"flagged", h["flagged"]}, {"dedupe_key", h["dedupe_key"]},
		{"archive", archive},
	}); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout)
	var rows [][]any
	if hs, ok := h["headers"].([]any); ok {
		for _, x := range hs {
			m, _ := x.(map[string]any)
			rows = append(rows, []any{m["name"], m["value"]})
		}
	}
	if err := c.table([]string{"HEADER", "VALUE"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout)
	rows = rows[:0]
	if ds, ok := h["deliveries"].([]any); ok {
		for _, x := range ds {
			m, _ := x.(map[string]any)
			last := m["last_error"]
			if last == nil {
				last = "-"
			}
			rows = append(rows, []any{num(m["sink_index"]), m["sink_type"], m["state"], num(m["attempts"]), ms(m["due_at"]), last})
		}
	}
	if err := c.table([]string{"SINK", "TYPE", "STATE", "ATTEMPTS", "DUE", "LAST ERROR"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout)
	if utf8.Valid(body) {
		fmt.Fprintf(c.stdout, "body (%d bytes):\n%s\n", len(body), body)
	} else {
		fmt.Fprintf(c.stdout, "body: %d bytes, not UTF-8 (--body prints it raw, -o json in base64)\n", len(body))
	}
	return nil
}
