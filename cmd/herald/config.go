package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/errs"
)

func (m *Main) configCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Inspect herald's configuration",
		Args:  cobra.ArbitraryArgs,
		RunE:  runGroup,
	}
	cmd.AddCommand(m.configCheckCommand())
	return cmd
}

// checkResult is what `herald config check --json` prints.
type checkResult struct {
	OK       bool           `json:"ok"`
	File     string         `json:"file"` // "" when no file was read
	Config   map[string]any `json:"config"`
	Problems []checkProblem `json:"problems"`
}

type checkProblem struct {
	Key     string `json:"key"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
}

func (m *Main) configCheckCommand() *cobra.Command {
	var (
		path   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Validate the config and print it with secrets masked",
		Long: `Load the config the way 'herald gateway' does (--config, else
$HERALD_CONFIG, else $HERALD_HOME/herald.yaml if it exists, then the
environment over it), check it, and print the effective config with every
secret masked.

With problems, each is one line on stderr naming its key, and the exit
code is 1. Unknown keys in the file are problems too.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(path, m.lookupEnv)
			var problems config.Problems
			if err != nil && !errors.As(err, &problems) {
				return loadError(err)
			}
			if asJSON {
				if err := m.printConfigJSON(cfg, problems); err != nil {
					return err
				}
			} else if err := m.printConfigYAML(cfg); err != nil {
				return err
			}
			if len(problems) == 0 {
				return nil
			}
			for _, p := range problems {
				fmt.Fprintf(m.Stderr, "herald: config: %s\n", p)
			}
			return exitCode(exitFailure)
		},
	}
	f := cmd.Flags()
	configFlag(f, &path)
	f.BoolVar(&asJSON, "json", false, "print one JSON object: ok, file, config, problems")
	return cmd
}

func (m *Main) printConfigYAML(cfg config.Config) error {
	b, err := cfg.MaskedYAML()
	if err != nil {
		return err
	}
	source := "# no config file: defaults and environment\n"
	if cfg.File != "" {
		source = "# config file: " + cfg.File + ", with the environment over it\n"
	}
	_, err = fmt.Fprint(m.Stdout, source+string(b))
	return err
}

func (m *Main) printConfigJSON(cfg config.Config, problems config.Problems) error {
	// Through YAML, so the JSON has the config's own key names and
	// durations read as they are written ("30s").
	b, err := cfg.MaskedYAML()
	if err != nil {
		return err
	}
	res := checkResult{OK: len(problems) == 0, File: cfg.File, Problems: []checkProblem{}}
	if err := yaml.Unmarshal(b, &res.Config); err != nil {
		return err
	}
	for _, p := range problems {
		res.Problems = append(res.Problems, checkProblem{Key: p.Key, Message: p.Msg, Line: p.Line})
	}
	enc := json.NewEncoder(m.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// lookupEnv reads the environment through Getenv; config treats an empty
// variable as unset anyway.
func (m *Main) lookupEnv(name string) (string, bool) {
	v := m.Getenv(name)
	return v, v != ""
}

// configFlag defines --config on fs, the config file loadConfig reads.
func configFlag(fs *pflag.FlagSet, path *string) {
	fs.StringVar(path, "config", "", "config file (default $HERALD_CONFIG, else $HERALD_HOME/herald.yaml)")
}

// loadConfig loads the config for a command that runs on it. A config
// with problems is one error line naming each of them.
func (m *Main) loadConfig(path string) (config.Config, error) {
	cfg, err := config.Load(path, m.lookupEnv)
	if err == nil {
		return cfg, nil
	}
	var problems config.Problems
	if errors.As(err, &problems) {
		return cfg, fmt.Errorf("config: %s (see 'herald config check')", problems)
	}
	return cfg, loadError(err)
}

// withStore loads the config at path, opens the store it names (a
// running gateway may share it), runs f on both within timeout, and
// closes the store.
func (m *Main) withStore(cmd *cobra.Command, path string, timeout time.Duration, f func(context.Context, config.Config, gateway.Store) error) error {
	cfg, err := m.loadConfig(path)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	db, err := gateway.OpenStore(ctx, cfg.Store, cfg.SQLitePath(), nil)
	if err != nil {
		return fmt.Errorf("opening the store: %w", err)
	}
	defer db.Close()
	return f(ctx, cfg, db)
}

// loadError words a config that could not be read at all.
func loadError(err error) error {
	var e *errs.Error
	if errors.As(err, &e) && e.Msg != "" {
		return fmt.Errorf("config: %s", e.Msg)
	}
	return fmt.Errorf("config: %w", err)
}
