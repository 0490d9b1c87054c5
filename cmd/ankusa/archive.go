package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/edge"
	"github.com/ankusa-go/ankusa/storage"
	"github.com/ankusa-go/ankusa/storage/blob"
	"github.com/ankusa-go/ankusa/store"
)

// archiveCommand is `ankusa archive get|list|replay`. get and list read the node's archive through a
// read-only open of its store (no lock taken, so it works while the node runs, and sees the catalogue as of
// the open) and the storage blob store its config names.
func archiveCommand(stdout io.Writer, env func(string) (string, bool)) *cobra.Command {
	cmd := &cobra.Command{Use: "archive", Short: "Read the archive: fetch a hook back by id, list segments, replay a window"}
	var asJSON bool
	get := &cobra.Command{
		Use:   "get <hook id>",
		Short: "Print an archived hook's body byte for byte (--json: the hook with its metadata)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			id, ok := edge.ParseID(args[0])
			if !ok {
				return &exitError{code: 2, err: fmt.Errorf("%q is not a hook id (8-4-4-4-12 hex)", args[0])}
			}
			return withArchive(env, func(ctx context.Context, cfg *config.Config, db *store.DB, bs blob.Store) error {
				var oldest time.Time
				if d := cfg.Storage.CatalogueRetentionDays; d > 0 {
					oldest = time.Now().Add(-time.Duration(d) * 24 * time.Hour)
				}
				h, err := storage.FetchVisible(ctx, db, bs, id, oldest)
				if errors.Is(err, storage.ErrNotFound) {
					return &exitError{code: 1, err: fmt.Errorf("hook %s is not in the archive (not compacted yet, or past retention)", args[0])}
				}
				if err != nil {
					return err
				}
				if !asJSON {
					_, err = stdout.Write(h.Body)
					return err
				}
				return json.NewEncoder(stdout).Encode(archivedJSON(&h))
			})
		},
	}
	get.Flags().BoolVar(&asJSON, "json", false, "print the hook as JSON: id, tenant, source, received_at, headers, body_base64")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the catalogued segments, one JSON object per line",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return withArchive(env, func(_ context.Context, _ *config.Config, db *store.DB, _ blob.Store) error {
				enc := json.NewEncoder(stdout)
				return db.Segments(0, 0, func(e store.SegmentEntry) error {
					return enc.Encode(map[string]any{
						"key": e.SegmentKey, "index": e.IndexKey, "first_seq": e.FirstSeq, "last_seq": e.LastSeq,
						"count": e.Count, "bytes": e.Bytes,
						"min_received_at": time.UnixMilli(e.MinReceivedAt).UTC().Format(time.RFC3339Nano),
						"max_received_at": time.UnixMilli(e.MaxReceivedAt).UTC().Format(time.RFC3339Nano),
					})
				})
			})
		},
	}
	cmd.AddCommand(get, list, archiveReplayCommand(stdout, env))
	return cmd
}

// archiveReplayCommand is `ankusa archive replay`: it records an archive replay job in the store of a stopped
// node, which runs it from its next boot. The running node holds its store's lock, so the command refuses
// then; there is no admin API for replays yet.
func archiveReplayCommand(stdout io.Writer, env func(string) (string, bool)) *cobra.Command {
	var fromText, toText, source, tenant string
	var rate float64
	cmd := &cobra.Command{
		Use:   "replay --from <RFC3339> --to <RFC3339> [--source id] [--tenant name]",
		Short: "Record a job, in a stopped node's store, that delivers again the archived hooks received in [from, to)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			from, err := time.Parse(time.RFC3339Nano, fromText)
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--from %q is not an RFC 3339 time", fromText)}
			}
			to, err := time.Parse(time.RFC3339Nano, toText)
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--to %q is not an RFC 3339 time", toText)}
			}
			cfg, err := loadConfig(env)
			if err != nil {
				return err
			}
			if _, ok := cfg.Sources[source]; source != "" && !ok {
				return &exitError{code: 2, err: fmt.Errorf("--source %q is not a configured source", source)}
			}
			j, err := store.NewReplayJob(store.ReplayJob{Kind: store.ReplayKindArchive, Source: source, Tenant: tenant,
				Since: from.UnixMilli(), Until: to.UnixMilli(), Rate: rate}, time.Now())
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			dir := cfg.StoreDir()
			if held, err := store.HoldsDatabase(dir); err != nil || !held {
				return fmt.Errorf("no store in %s (%v): nothing was archived by this node", dir, err)
			}
			db, err := store.Open(store.Options{Dir: dir, Log: zerolog.Nop()})
			if err != nil {
				return fmt.Errorf("cannot open the store (is the node running? stop it first): %w", err)
			}
			err = db.PutReplayJob(&j)
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("cannot record the replay job: %w", err)
			}
			if !cfg.HasRole(config.RoleDispatch) || !cfg.HasRole(config.RoleStorage) {
				fmt.Fprintln(c.ErrOrStderr(), "warning: this node's roles lack dispatch or storage: the job waits until it runs both")
			}
			return json.NewEncoder(stdout).Encode(map[string]any{
				"replay_id": uuid.UUID(j.ID).String(), "kind": j.Kind, "state": j.State,
				"from":   time.UnixMilli(j.Since).UTC().Format(time.RFC3339Nano),
				"to":     time.UnixMilli(j.Until).UTC().Format(time.RFC3339Nano),
				"source": j.Source, "tenant": j.Tenant, "rate": j.Rate,
			})
		},
	}
	cmd.Flags().StringVar(&fromText, "from", "", "start of the window (RFC 3339, inclusive; a hook's received_at)")
	cmd.Flags().StringVar(&toText, "to", "", "end of the window (RFC 3339, exclusive; not after now)")
	cmd.Flags().StringVar(&source, "source", "", "only hooks of this source id")
	cmd.Flags().StringVar(&tenant, "tenant", "", "only hooks of this tenant")
	cmd.Flags().Float64Var(&rate, "rate", 0, "hooks per second (default 1000, at most 100000)")
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

func withArchive(env func(string) (string, bool), fn func(context.Context, *config.Config, *store.DB, blob.Store) error) error {
	cfg, err := loadConfig(env)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := store.OpenReadOnly(cfg.StoreDir(), zerolog.Nop())
	if err != nil {
		return err
	}
	defer db.Close()
	bs, err := blob.Open(ctx, cfg.StorageBlobStore())
	if err != nil {
		return fmt.Errorf("cannot open the storage blob store: %w", err)
	}
	return fn(ctx, cfg, db, bs)
}

type headerJSON struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func archivedJSON(h *store.Hook) any {
	hs := make([]headerJSON, len(h.Headers))
	for i, x := range h.Headers {
		hs[i] = headerJSON{x.Name, x.Value}
	}
	return struct {
		ID           string       `json:"id"`
		Tenant       string       `json:"tenant"`
		Source       string       `json:"source"`
		ReceivedAt   string       `json:"received_at"`
		ContentType  string       `json:"content_type"`
		Headers      []headerJSON `json:"headers"`
		Verification string       `json:"verification,omitempty"`
		BodyBase64   []byte       `json:"body_base64"` // encoding/json writes []byte as base64: byte-exact
	}{uuid.UUID(h.ID).String(), h.Tenant, h.Source, time.UnixMilli(h.ReceivedAt).UTC().Format(time.RFC3339Nano),
		h.ContentType, hs, h.Verification.String(), h.Body}
}
