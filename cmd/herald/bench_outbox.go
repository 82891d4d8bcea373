package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/cmd/herald/bench"
)

func (m *Main) benchOutboxCommand() *cobra.Command {
	var (
		opt    bench.OutboxOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "Measure how long one chat's backlog delays another chat's reply",
		Long: `Queue --backlog messages to one chat, whose platform takes --send-time a
send (the outbox sends a chat's messages in order, one at a time), and
while they are sent, deliver a user's message in another chat through
the gateway, built as 'herald gateway' builds it with a model that
answers at once. It reports the reply's time from the delivery to its
send, p50 and p99 over --rounds rounds, beside the same with no backlog
in the same run (the two alternate), and how many sends of the backlog
started after the reply was committed and before it was sent: at most
the one under way when the outbox is fair.

The SQLite run works in a temporary directory; the Redis run works under a
key prefix of its own. Both remove what they made.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := m.benchStore(opt.Store, &opt.RedisURL); err != nil {
				return err
			}
			if opt.Backlog < 1 || opt.Rounds < 1 || opt.SendTime < 0 {
				return usagef("--backlog and --rounds must be positive, --send-time not negative")
			}
			res, err := bench.Outbox(cmd.Context(), opt)
			return printBench(m, asJSON, res, err, printBenchOutbox)
		},
	}
	f := cmd.Flags()
	benchStoreFlags(f, &opt.Store, &opt.RedisURL, &asJSON)
	f.IntVar(&opt.Backlog, "backlog", bench.DefaultOutboxBacklog, "messages waiting for the busy chat")
	f.IntVar(&opt.Rounds, "rounds", bench.DefaultOutboxRounds, "replies measured on each side")
	f.DurationVar(&opt.SendTime, "send-time", bench.DefaultOutboxSendTime, "what the platform takes per send")
	f.StringVar(&opt.TempDir, "temp-dir", "", "where the gateway's home is made, and removed (default the system's)")
	return cmd
}

func printBenchOutbox(m *Main, r bench.OutboxResult) error {
	_, err := fmt.Fprintf(m.Stdout,
		"store %s, a backlog of %d to one chat, %.1f ms a send, %d rounds\n"+
			"reply to another chat   p50 %8.2f ms   p99 %8.2f ms   (delivery to send, the backlog being sent)\n"+
			"same, no backlog        p50 %8.2f ms   p99 %8.2f ms\n"+
			"backlog sends ahead of it: at most %d, median %.0f\n",
		r.Store, r.Backlog, r.SendTimeMs, r.Rounds, r.P50Ms, r.P99Ms, r.BareP50Ms, r.BareP99Ms, r.AheadMax, r.AheadP50)
	return err
}
