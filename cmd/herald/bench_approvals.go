package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/cmd/herald/bench"
)

func (m *Main) benchApprovalsCommand() *cobra.Command {
	var (
		opt    bench.ApprovalsOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "Measure the time from an approval's press to its command starting",
		Long: `Run --rounds rounds of turns on the gateway herald builds, its model a
server on loopback speaking the Chat Completions API, each turn a
conversation of its own: the model calls the terminal with a command
that writes bash's clock ($EPOCHREALTIME) to a file as it starts. A
dangerous command (it says mkfs.ext4) waits for its question; once the
question reaches the chat, Allow once is pressed and the time runs from
the press to the command's own record of its start.

It reports p50 and p99 of the press delivered to the router as a
platform's adapter delivers a button's press, and of the answer through
POST /api/v1/approvals/{id}, both on the gateway whose turn waits; on
Redis a second gateway shares the store, and the press delivered to its
router reaches the turn through the store's signals. Beside them, the
reference: a command without the dangerous pattern, from the model
handing herald its tool call to the command's start. The kinds take
turns, round by round.

The SQLite run works in a temporary directory; the Redis run works under a
key prefix of its own. Both remove what they made. It needs bash 5.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := m.benchStore(opt.Store, &opt.RedisURL); err != nil {
				return err
			}
			if opt.Rounds < 1 {
				return usagef("--rounds must be positive")
			}
			res, err := bench.Approvals(cmd.Context(), opt)
			return printBench(m, asJSON, res, err, printBenchApprovals)
		},
	}
	f := cmd.Flags()
	benchStoreFlags(f, &opt.Store, &opt.RedisURL, &asJSON)
	f.IntVar(&opt.Rounds, "rounds", bench.DefaultApprovalRounds, "rounds, each a turn of every kind")
	f.StringVar(&opt.TempDir, "temp-dir", "", "where the home, workspace and SQLite files are made, and removed (default the system's)")
	return cmd
}

func printBenchApprovals(m *Main, r bench.ApprovalsResult) error {
	line := "%-10s p50 %8.2f ms   p99 %8.2f ms   (%s)\n"
	out := fmt.Sprintf("store %s, %d rounds, %d commands started\n", r.Store, r.Rounds, r.Started) +
		fmt.Sprintf(line, "press", r.PressP50Ms, r.PressP99Ms, "/approve once, the router of the gateway whose turn waits") +
		fmt.Sprintf(line, "api", r.APIP50Ms, r.APIP99Ms, "POST /api/v1/approvals/{id}, the same gateway")
	if r.Store == "redis" {
		out += fmt.Sprintf(line, "other", r.OtherP50Ms, r.OtherP99Ms, "/approve once, another gateway's router: the store's signals")
	}
	out += fmt.Sprintf(line, "reference", r.RefP50Ms, r.RefP99Ms, "no approval: the model's tool call to the command's start")
	_, err := fmt.Fprint(m.Stdout, out)
	return err
}
