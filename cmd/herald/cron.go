package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/errs"
)

// cronTimeout bounds one cron command's store calls.
const cronTimeout = 30 * time.Second

func (m *Main) cronCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "cron",
		Short: "Add, list and manage scheduled jobs",
		Long: `A cron job runs a prompt (or a script) on a schedule, each time in a
fresh session, and delivers its report to the targets it names. Jobs
live in the store the config names, so these commands work while a
gateway runs: it sees a change within a second, and 'run' fires a job
through the same once-only claim as its schedule, on whichever gateway
instance claims it.

Schedules: 30m, 2h, 1d (once, from now); every 30m; a 5-field cron
expression ("0 9 * * 1-5") or @daily, @hourly…; an ISO time
(2026-12-03T09:00, in --timezone or cron.timezone when it has no zone).
Targets (--deliver): local (saved only, the default here), telegram /
slack / discord (that platform's home channel), platform:chat[:thread],
or a comma list.`,
		Args: cobra.ArbitraryArgs,
		RunE: runGroup,
	}
	configFlag(cmd.PersistentFlags(), &path)
	withManager := func(cmd *cobra.Command, f func(context.Context, cronjobs.Manager) error) error {
		return m.withStore(cmd, path, cronTimeout, func(ctx context.Context, cfg config.Config, db gateway.Store) error {
			return f(ctx, cronjobs.ManagerFor(cfg, db.Cron(), gateway.ConfiguredPlatforms(cfg.Platforms)))
		})
	}
	oneID := func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
			return usagef("want one job's id (see 'herald cron list')")
		}
		return nil
	}
	jsonFlag := func(c *cobra.Command, p *bool) {
		c.Flags().BoolVar(p, "json", false, "print JSON")
	}

	var (
		spec    cronjobs.Spec
		addJSON bool
	)
	add := &cobra.Command{
		Use:   "add --name N --schedule S (--prompt P | --script FILE --no-agent)",
		Short: "Add a job",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if spec.Schedule == "" {
				return usagef("--schedule is required")
			}
			if spec.Script != "" {
				abs, err := filepath.Abs(spec.Script)
				if err != nil {
					return err
				}
				spec.Script = abs
			}
			spec.CreatedBy = "cli"
			return withManager(cmd, func(ctx context.Context, mg cronjobs.Manager) error {
				j, err := mg.Create(ctx, spec)
				if err != nil {
					return cronError(err)
				}
				if addJSON {
					return m.printJSON(j)
				}
				_, err = fmt.Fprintf(m.Stdout, "added %s (%s): %s, next run %s\n", j.ID, j.Name, j.Schedule.String(), timeOrNone(j.NextRunAt))
				return err
			})
		},
	}
	add.Flags().StringVar(&spec.Name, "name", "", "the job's name; reports are headed by it")
	add.Flags().StringVar(&spec.Schedule, "schedule", "", "when it runs (see 'herald cron --help')")
	add.Flags().StringVar(&spec.Prompt, "prompt", "", "what the agent is asked at each run")
	add.Flags().StringVar(&spec.Script, "script", "", "a script run at each run: its output is given to the agent, or is the report with --no-agent")
	add.Flags().BoolVar(&spec.NoAgent, "no-agent", false, "deliver the script's output itself, with no agent")
	add.Flags().StringVar(&spec.Deliver, "deliver", "", "where reports go (default local)")
	add.Flags().IntVar(&spec.Repeat, "repeat", 0, "run this many times, then stop (0: forever)")
	add.Flags().StringVar(&spec.Timezone, "timezone", "", "the schedule's IANA zone (default cron.timezone)")
	add.Flags().StringVar(&spec.Model, "model", "", "the model to run it with (default the gateway's)")
	add.Flags().StringSliceVar(&spec.Toolsets, "toolsets", nil, "the tool sets its agent runs with, comma-separated (default the gateway's: core, delegation, cron, kanban, workspace when set, mcp when mcp_servers names a server)")
	add.Flags().StringVar(&spec.Workdir, "workdir", "", "where its script runs (default the script's directory)")
	jsonFlag(add, &addJSON)

	var listJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the jobs",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withManager(cmd, func(ctx context.Context, mg cronjobs.Manager) error {
				jobs, err := mg.List(ctx)
				if err != nil {
					return err
				}
				if listJSON {
					if jobs == nil {
						jobs = []cronjobs.Job{}
					}
					return m.printJSON(jobs)
				}
				return printJobs(m.Stdout, jobs)
			})
		},
	}
	jsonFlag(list, &listJSON)

	var showJSON bool
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a job and its recent runs",
		Args:  oneID,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withManager(cmd, func(ctx context.Context, mg cronjobs.Manager) error {
				j, runs, err := mg.Show(ctx, args[0])
				if err != nil {
					return cronError(err)
				}
				if showJSON {
					return m.printJSON(struct {
						cronjobs.Job
						Runs []cronjobs.Run `json:"runs"`
					}{j, nonNil(runs)})
				}
				if err := printJob(m.Stdout, j); err != nil {
					return err
				}
				return printRuns(m.Stdout, runs)
			})
		},
	}
	jsonFlag(show, &showJSON)

	var runsJSON bool
	runs := &cobra.Command{
		Use:   "runs ID",
		Short: "List a job's runs, newest first: start, end, run status, delivery status, output",
		Args:  oneID,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withManager(cmd, func(ctx context.Context, mg cronjobs.Manager) error {
				rs, err := mg.Runs(ctx, args[0])
				if err != nil {
					return cronError(err)
				}
				if runsJSON {
					return m.printJSON(nonNil(rs))
				}
				return printRuns(m.Stdout, rs)
			})
		},
	}
	jsonFlag(runs, &runsJSON)

	// pause, resume, remove and run act on one job and print it.
	act := func(use, short, done string, fn func(cronjobs.Manager, context.Context, string) (cronjobs.Job, error)) *cobra.Command {
		var asJSON bool
		c := &cobra.Command{
			Use:   use + " ID",
			Short: short,
			Args:  oneID,
			RunE: func(cmd *cobra.Command, args []string) error {
				return withManager(cmd, func(ctx context.Context, mg cronjobs.Manager) error {
					j, err := fn(mg, ctx, args[0])
					if err != nil {
						return cronError(err)
					}
					if asJSON {
						return m.printJSON(j)
					}
					_, err = fmt.Fprintf(m.Stdout, "%s %s (%s)\n", done, j.ID, j.Name)
					return err
				})
			},
		}
		jsonFlag(c, &asJSON)
		return c
	}
	cmd.AddCommand(add, list, show, runs,
		act("pause", "Stop a job firing until it is resumed", "paused", cronjobs.Manager.Pause),
		act("resume", "Let a paused job fire again, from now", "resumed", cronjobs.Manager.Resume),
		act("remove", "Remove a job", "removed", cronjobs.Manager.Remove),
		act("run", "Fire a job now, once, on whichever gateway instance claims it", "run requested for", cronjobs.Manager.RunNow),
	)
	return cmd
}

// cronError is err as a person reads it: a bad input's reason alone.
func cronError(err error) error {
	switch errs.CodeOf(err) {
	case errs.Invalid, errs.NotFound, errs.Conflict:
		return fmt.Errorf("%s", errs.Reason(err))
	}
	return err
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func timeOrNone(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.UTC().Format(time.RFC3339)
}

// printJobs prints one line a job.
func printJobs(w io.Writer, jobs []cronjobs.Job) error {
	if len(jobs) == 0 {
		_, err := fmt.Fprintln(w, "no cron jobs")
		return err
	}
	for _, j := range jobs {
		line := fmt.Sprintf("%s  %-10s  %s  next %s", j.ID, j.State, j.Schedule.String(), timeOrNone(j.NextRunAt))
		if j.LastStatus != "" {
			line += "  last " + j.LastStatus
		}
		line += "  " + j.Name
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

// printJob prints a job's fields, one a line.
func printJob(w io.Writer, j cronjobs.Job) error {
	b := cronjobs.Brief(j)
	fields := []struct{ k, v string }{
		{"id", j.ID}, {"name", j.Name}, {"schedule", j.Schedule.String()}, {"state", j.State},
		{"deliver", fmt.Sprint(b["deliver"])}, {"next run", timeOrNone(j.NextRunAt)}, {"last run", timeOrNone(j.LastRunAt)},
		{"last status", j.LastStatus}, {"last error", j.LastError}, {"last delivery error", j.LastDeliveryError},
		{"prompt", j.Prompt}, {"script", j.Script},
	}
	for _, f := range fields {
		if f.v == "" {
			continue
		}
		if _, err := fmt.Fprintf(w, "%-20s %s\n", f.k+":", f.v); err != nil {
			return err
		}
	}
	return nil
}

// printRuns prints one line a run.
func printRuns(w io.Writer, runs []cronjobs.Run) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(w, "no runs")
		return err
	}
	for _, r := range runs {
		line := fmt.Sprintf("%s  start %s  end %s  %-8s  delivery %s", r.ID, timeOrNone(r.StartedAt), timeOrNone(r.EndedAt), r.Status, cmp.Or(r.Delivery, "-"))
		if r.Error != "" {
			line += "  error: " + r.Error
		}
		if r.DeliveryError != "" {
			line += "  delivery error: " + r.DeliveryError
		}
		if r.Output != "" {
			line += "  output " + r.Output
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
