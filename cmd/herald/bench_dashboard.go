package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/cmd/herald/bench"
)

func (m *Main) benchDashboardCommand() *cobra.Command {
	var (
		opt    bench.DashboardOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Measure the dashboard in a headless Chromium: its first load, and a card's time to the open board",
		Long: `Start the gateway with the dashboard and no API key, and a headless
Chromium (--chromium, else chromium on PATH; it is required).

First loads: --loads times, /ui/ is opened in a browser context of its own
(an empty cache): the bytes the network carried, headers included, the
requests, and the time from the navigation's start to the overview's five
counts in the DOM. Beside it, taking turns, the reference: a minimal
static page from net/http's file server, to its one element.

Changes: with the Kanban page open, --changes cards are made through the
API one after another, each after a random pause within the event
stream's read interval: the time from the create call returning to the
card's element in the page's DOM (noted in the page by a MutationObserver,
on the browser's wall clock, corrected by its offset from this process's).
Beside it, the reference: the same card's event read from the board's
event stream over HTTP, without a browser.

The SQLite run works in a temporary directory; the Redis run works under a
key prefix of its own. Both remove what they made, the browser's profile
too.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := m.benchStore(opt.Store, &opt.RedisURL); err != nil {
				return err
			}
			if opt.Loads < 1 || opt.Changes < 1 {
				return usagef("--loads and --changes must be at least 1")
			}
			res, err := bench.Dashboard(cmd.Context(), opt)
			return printBench(m, asJSON, res, err, printBenchDashboard)
		},
	}
	f := cmd.Flags()
	benchStoreFlags(f, &opt.Store, &opt.RedisURL, &asJSON)
	f.IntVar(&opt.Loads, "loads", bench.DefaultDashboardLoads, "first loads of /ui/, each with an empty cache")
	f.IntVar(&opt.Changes, "changes", bench.DefaultDashboardChanges, "cards made with the board open")
	f.StringVar(&opt.Chromium, "chromium", "", "the browser's executable (default chromium on PATH)")
	f.StringVar(&opt.TempDir, "temp-dir", "", "where the gateway's home and the browser's profile are made, and removed (default the system's)")
	return cmd
}

func printBenchDashboard(m *Main, r bench.DashboardResult) error {
	l, rl, c, rc := r.Load, r.RefLoad, r.Change, r.RefChange
	_, err := fmt.Fprintf(m.Stdout,
		"store %s, %s; the browser's clock is %+.2f ms off\n"+
			"first load, %d each, empty cache: bytes (bodies), requests, time to content p50 / max\n"+
			"  /ui/       %7d (%d) B   %2d requests   %7.1f / %7.1f ms\n"+
			"  reference  %7d (%d) B   %2d requests   %7.1f / %7.1f ms   (a minimal static page)\n"+
			"  /ui/ p50: document %.1f ms, style and script %.1f ms, the API's reads %.1f ms\n"+
			"a card made through the API, %d, to: p50 / p99\n"+
			"  the board in the browser      %7.1f / %7.1f ms\n"+
			"  reference, the event stream   %7.1f / %7.1f ms   (read over HTTP, no browser)\n",
		r.Store, r.Browser, r.ClockOffsetMs,
		r.Loads,
		l.Bytes, l.BodyBytes, l.Requests, l.P50Ms, l.MaxMs,
		rl.Bytes, rl.BodyBytes, rl.Requests, rl.P50Ms, rl.MaxMs,
		l.DocumentP50Ms, l.AssetsP50Ms, l.FetchesP50Ms,
		c.Changes,
		c.P50Ms, c.P99Ms,
		rc.P50Ms, rc.P99Ms)
	return err
}
