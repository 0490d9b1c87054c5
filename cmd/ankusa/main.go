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
	var serveFiles, checkFiles []string
	serveCmd := &cobra.Command{Use: "serve", Short: "Run the node: one instance per config", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error {
		if signals == nil {
			sig := make(chan os.Signal, 2)
			signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
			defer signal.Stop(sig)
			signals = sig
		}
		return serve(stderr, env, signals, serveFiles)
	}}
	serveCmd.Flags().StringArrayVarP(&serveFiles, "config", "c", nil, configFlagUsage)
	checkCmd := &cobra.Command{Use: "check-config", Short: "Validate the configs and print a summary", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error {
		cfgs, err := loadConfigs(checkFiles, env)
		if err != nil {
			return err
		}
		for _, cfg := range cfgs {
			// What serve would refuse at boot is refused here too, with the same problems.
			if err := instance.Check(cfg); err != nil {
				if len(cfgs) > 1 {
					err = fmt.Errorf("%s: %w", cfg.File, err)
				}
				return &exitError{code: config.ExitConfig, err: err}
			}
		}
		for _, cfg := range cfgs {
			ids := make([]string, 0, len(cfg.Sources))
			for id := range cfg.Sources {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			name := ""
			if len(cfgs) > 1 {
				name = " instance=" + cfg.Instance
			}
			fmt.Fprintf(stdout, "config OK:%s roles=[%s] sources=%s wal=%s\n", name, strings.Join(cfg.EffectiveRoles(), ","), strings.Join(ids, ","), cfg.WAL.Type)
		}
		return nil
	}}
	checkCmd.Flags().StringArrayVarP(&checkFiles, "config", "c", nil, configFlagUsage)
	root.AddCommand(
		serveCmd,
		checkCmd,
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
	root.AddCommand(adminCommands(stdout, env)...)
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

// configFlagUsage documents serve's and check-config's -c.
const configFlagUsage = "an instance's config file, or a directory of *.yml (repeatable: one instance per file; " +
	"default ANKUSA_CONFIG, else ./ankusa.yml)"

// serve runs one instance per config until SIGTERM/SIGINT (every instance drains at
// once, then exit 0) or until the last one is gone: an instance whose core domain gives
// up is stopped alone (its ports close, the others serve on), and when none is left the
// process exits 1, so the platform restarts it.
func serve(stderr io.Writer, env func(string) (string, bool), sig <-chan os.Signal, files []string) error {
	cfgs, err := loadConfigs(files, env)
	if err != nil {
		return err
	}
	log := telemetry.NewLogger(cfgs[0].Log.Level, cfgs[0].Log.Format, stderr)
	redissink.BridgeClientLog(log)
	for _, cfg := range cfgs {
		for _, w := range cfg.Warnings {
			log.Warn().Str("instance", cfg.Instance).Msg(w)
		}
	}
	if soft, hard, err := raiseFileLimit(); err != nil {
		log.Warn().Err(err).Uint64("nofile_soft", soft).Uint64("nofile_hard", hard).Msg("open-files limit")
	} else {
		log.Info().Uint64("nofile_soft", soft).Uint64("nofile_hard", hard).Msg("open-files limit")
	}
	if n := mallocArenaMax(); n > 0 {
		log.Info().Int("malloc_arena_max", n).Msg("malloc arenas limited (MALLOC_ARENA_MAX unset)")
	} else {
		log.Info().Str("MALLOC_ARENA_MAX", os.Getenv("MALLOC_ARENA_MAX")).Msg("malloc arenas as the environment sets them")
	}
	if err := tuneMonitor(log, env); err != nil {
		return &exitError{code: config.ExitConfig, err: err}
	}
	insts := make([]*instance.Instance, 0, len(cfgs))
	for _, cfg := range cfgs {
		// Each instance logs at its own level; New adds the instance field.
		ilog := telemetry.NewLogger(cfg.Log.Level, cfg.Log.Format, stderr)
		inst, err := instance.New(cfg, instance.Options{Log: ilog, Version: version})
		if err != nil {
			stopAll(insts)
			return &exitError{code: config.ExitConfig, err: err}
		}
		if err := inst.Start(); err != nil {
			stopAll(insts)
			return &exitError{code: 1, err: err}
		}
		insts = append(insts, inst)
	}

	// One watcher per instance turns its Fatal into a note for the loop below.
	type fatal struct {
		k   int
		err error
	}
	fatals := make(chan fatal, len(insts))
	var watchers task.Group
	defer watchers.Stop()
	for k, inst := range insts {
		watchers.Go(func(stop <-chan struct{}) {
			select {
			case err, ok := <-inst.Fatal():
				if ok {
					fatals <- fatal{k: k, err: err}
				}
			case <-stop:
			}
		})
	}
	watchers.Every(mallocTrimEvery, mallocTrim)
	live := len(insts)
	for {
		select {
		case s := <-sig:
			log.Info().Str("signal", s.String()).Int("instances", live).Msg("stopping")
			return drainAll(insts, sig)
		case f := <-fatals:
			inst := insts[f.k]
			insts[f.k] = nil
			live--
			_ = inst.Stop()
			err := fmt.Errorf("instance %s: core failure domain gave up: %w", inst.Config().Instance, f.err)
			if live == 0 {
				return &exitError{code: 1, err: err}
			}
			log.Error().Err(err).Str("instance", inst.Config().Instance).Int("instances_left", live).
				Msg("instance stopped; the others serve on")
		}
	}
}

// drainAll drains every running instance at once (each on its own
// listener.drain_delay_ms); a second signal cuts the delays short, the requests in flight
// are still waited for.
func drainAll(insts []*instance.Instance, sig <-chan os.Signal) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var tasks task.Group
	defer tasks.Stop()
	tasks.Go(func(stop <-chan struct{}) {
		select {
		case <-sig:
			cancel()
		case <-stop:
		}
	})
	errs := make([]error, len(insts))
	var drains task.Group
	for k, inst := range insts {
		if inst == nil {
			continue
		}
		drains.Go(func(<-chan struct{}) { errs[k] = inst.Drain(ctx) })
	}
	drains.Wait()
	return errors.Join(errs...)
}

// stopAll stops the instances that started before one could not.
func stopAll(insts []*instance.Instance) {
	for _, inst := range insts {
		_ = inst.Stop()
	}
}
