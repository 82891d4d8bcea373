package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/cmd/herald/bench"
)

// The targets of the stream benchmark: a piece's p99 from the model to
// the client, at one stream and at many.
const (
	streamTargetOneMs  = 5
	streamTargetManyMs = 50
)

func (m *Main) benchStreamCommand() *cobra.Command {
	var (
		opt    bench.StreamOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "stream",
		Short: "Measure streamed completions: a piece's time from the model to the client",
		Long: `Run --streams streamed chat completions at once through the local API,
each its own conversation, on the gateway's own parts: the router, the
turn worker running the agent, the store, the delivery worker and the
API's server on a loopback port. The model is in process: it writes each
reply in --pieces pieces, --interval apart, and notes when it hands each
one on. The client, also in process, reads the chunks and notes when each
piece arrives.

It reports, p50 and p99, the time from the model handing a piece to
herald to the client reading it, beside the same for a bare server that
writes each piece to its stream the moment it is made (the ceiling: the
client, loopback HTTP and SSE), the two taking turns for --rounds replies
a stream. Targets: p99 ≤ 5 ms at 1 stream, ≤ 50 ms at 500.

The SQLite run works in a temporary directory; the Redis run works under a
key prefix of its own. Both remove what they made.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := m.benchStore(opt.Store, &opt.RedisURL); err != nil {
				return err
			}
			if opt.Streams < 1 || opt.Pieces < 1 || opt.Rounds < 1 || opt.Interval <= 0 {
				return usagef("--streams, --pieces, --rounds and --interval must be positive")
			}
			res, err := bench.Stream(cmd.Context(), opt)
			return printBench(m, asJSON, res, err, printBenchStream)
		},
	}
	f := cmd.Flags()
	benchStoreFlags(f, &opt.Store, &opt.RedisURL, &asJSON)
	f.IntVar(&opt.Streams, "streams", bench.DefaultStreams, "completions streaming at once")
	f.IntVar(&opt.Pieces, "pieces", bench.DefaultStreamPieces, "pieces the model writes each reply in")
	f.DurationVar(&opt.Interval, "interval", bench.DefaultStreamInterval, "time between a reply's pieces")
	f.IntVar(&opt.Rounds, "rounds", bench.DefaultStreamRounds, "replies each stream takes, herald's and the raw server's in turn")
	f.StringVar(&opt.TempDir, "temp-dir", "", "where the SQLite files are made, and removed (default the system's)")
	return cmd
}

func printBenchStream(m *Main, r bench.StreamResult) error {
	target := float64(streamTargetManyMs)
	if r.Streams == 1 {
		target = streamTargetOneMs
	}
	_, err := fmt.Fprintf(m.Stdout,
		"store %s, %d streams at once, %d pieces a reply, %d pieces measured\n"+
			"herald   p50 %7.3f ms   p99 %7.3f ms   target p99 ≤ %g ms%s\n"+
			"raw      p50 %7.3f ms   p99 %7.3f ms   (a bare SSE server)\n",
		r.Store, r.Streams, r.Pieces, r.Samples,
		r.P50Ms, r.P99Ms, target, missedMark(r.P99Ms, target),
		r.RawP50Ms, r.RawP99Ms)
	return err
}
