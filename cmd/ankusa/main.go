// Command ankusa runs an Ankusa node: `ankusa serve` starts the instance its config
// names; check-config, print-config and version inspect it; `archive get|list` read its
// archive and `archive replay` records an archive replay job in a stopped node's store.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ankusa-go/ankusa/config"
	"github.com/ankusa-go/ankusa/instance"
	"github.com/ankusa-go/ankusa/sinks/redissink"
	"github.com/ankusa-go/ankusa/telemetry"
	"github.com/ankusa-go/ankusa/telemetry/task"
)

// version is stamped at build time with -ldflags "-X main.version=…".
var version = "dev"

// exitError carries the process exit code up to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv))
}

func run(args []string, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	return runWith(args, stdout, stderr, env, nil)
}

// runWith is run with the signals serve stops on; nil means the process's SIGTERM and SIGINT.
func runWith(args []string, stdout, stderr io.Writer, env func(string) (string, bool), signals <-chan os.Signal) int {
	root := &cobra.Command{
		Use:           "ankusa",
		Short:         "Ankusa: a durable webhook-ingestion gateway",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.AddCommand(
		&cobra.Command{Use: "serve", Short: "Run the node", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error {
			if signals == nil {
				sig := make(chan os.Signal, 2)
				signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
				defer signal.Stop(sig)
				signals = sig
			}
			return serve(stderr, env, signals)
		}},
		&cobra.Command{Use: "check-config", Short: "Validate the config and print a summary", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error {
			cfg, err := loadConfig(env)
			if err != nil {
				return err
			}
			// What serve would refuse at boot is refused here too, with the same problems.
			if err := instance.Check(cfg); err != nil {
				return &exitError{code: config.ExitConfig, err: err}
			}
			ids := make([]string, 0, len(cfg.Sources))
			for id := range cfg.Sources {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			fmt.Fprintf(stdout, "config OK: roles=[%s] sources=%s wal=%s\n", strings.Join(cfg.EffectiveRoles(), ","), strings.Join(ids, ","), cfg.WAL.Type)
			return nil
		}},
		&cobra.Command{Use: "print-config", Short: "Print the effective config as JSON, secrets redacted", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error {
			cfg, err := loadConfig(env)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(cfg.Redacted())
		}},
		archiveCommand(stdout, env),
		&cobra.Command{Use: "version", Short: "Print the version", Args: cobra.NoArgs, Run: func(*cobra.Command, []string) {
			fmt.Fprintln(stdout, "ankusa", version)
		}},
	)
	if err := root.Execute(); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			fmt.Fprintln(stderr, "ankusa:", ee.err)
			return ee.code
		}
		fmt.Fprintln(stderr, "ankusa:", err)
		return 1
	}
	return 0
}

func loadConfig(env func(string) (string, bool)) (*config.Config, error) {
	cfg, err := config.Resolve(env)
	if err != nil {
		return nil, &exitError{code: config.ExitConfig, err: err}
	}
	return cfg, nil
}

// serve runs the instance until SIGTERM/SIGINT (drain, then exit 0) or until a core
// domain gives up (exit 1, so the platform restarts the process).
func serve(stderr io.Writer, env func(string) (string, bool), sig <-chan os.Signal) error {
	cfg, err := loadConfig(env)
	if err != nil {
		return err
	}
	log := telemetry.NewLogger(cfg.Log.Level, cfg.Log.Format, stderr)
	redissink.BridgeClientLog(log)
	for _, w := range cfg.Warnings {
		log.Warn().Msg(w)
	}
	if soft, hard, err := raiseFileLimit(); err != nil {
		log.Warn().Err(err).Uint64("nofile_soft", soft).Uint64("nofile_hard", hard).Msg("open-files limit")
	} else {
		log.Info().Uint64("nofile_soft", soft).Uint64("nofile_hard", hard).Msg("open-files limit")
	}
	inst, err := instance.New(cfg, instance.Options{Log: log, Version: version})
	if err != nil {
		return &exitError{code: config.ExitConfig, err: err}
	}
	if err := inst.Start(); err != nil {
		return &exitError{code: 1, err: err}
	}
	select {
	case s := <-sig:
		log.Info().Str("signal", s.String()).Msg("stopping")
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.Listener.DrainDelayMS)*time.Millisecond)
		defer cancel()
		// A second signal cuts the drain delay short; the in-flight requests are still waited for.
		var tasks task.Group
		defer tasks.Stop()
		tasks.Go(func(stop <-chan struct{}) {
			select {
			case <-sig:
				cancel()
			case <-stop:
			}
		})
		return inst.Drain(ctx)
	case err := <-inst.Fatal():
		_ = inst.Stop()
		return &exitError{code: 1, err: fmt.Errorf("core failure domain gave up: %w", err)}
	}
}
