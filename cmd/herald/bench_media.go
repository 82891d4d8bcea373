package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/heraldgw/herald/cmd/herald/bench"
)

func (m *Main) benchMediaCommand() *cobra.Command {
	var (
		opt    bench.MediaOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "media",
		Short: "Measure the time a photo adds to a turn before its model call",
		Long: `Send --photos photos of about --bytes bytes (a 4000x3000 JPEG) through
the media runner the gateway puts around its turns, one turn each, as a
model that is shown pictures gets them: the photo is downloaded through
the Telegram adapter's Fetch (getFile, then the file) from a Bot API on
loopback, kept on the disk, checked, scaled to 1568 pixels on its long
edge and encoded, then loaded for the model request as the agent loads
it. It reports, p50 and p99,
the time from the turn's start to its model request being ready, beside
the raw ceiling: the bare download of the same bytes from the same
server. The two take turns. Beside each it reports the CPU time the
process used a photo, which is what the times come to on an idle core.

It works in a temporary directory, and removes what it made.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opt.Photos < 1 || opt.Bytes < 1 {
				return usagef("--photos and --bytes must be positive")
			}
			res, err := bench.Media(cmd.Context(), opt)
			return printBench(m, asJSON, res, err, printBenchMedia)
		},
	}
	f := cmd.Flags()
	f.IntVar(&opt.Photos, "photos", bench.DefaultMediaPhotos, "photos measured, one turn each")
	f.IntVar(&opt.Bytes, "bytes", bench.DefaultMediaBytes, "the photo's size, about")
	f.StringVar(&opt.TempDir, "temp-dir", "", "where the photos are kept, and removed (default the system's)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func printBenchMedia(m *Main, r bench.MediaResult) error {
	_, err := fmt.Fprintf(m.Stdout,
		"a %.1f MiB JPEG, %dx%d, %d photos; a model request carries %.0f KiB of it\n"+
			"herald   p50 %7.1f ms   p99 %7.1f ms   cpu %6.1f ms a photo   (getFile, download, keep, check, scale, encode)\n"+
			"raw      p50 %7.1f ms   p99 %7.1f ms   cpu %6.1f ms a photo   (the bare download)\n",
		float64(r.Bytes)/(1<<20), r.Width, r.Height, r.Photos, float64(r.SentBytes)/(1<<10),
		r.P50Ms, r.P99Ms, r.CPUMsPerPhoto, r.RawP50Ms, r.RawP99Ms, r.RawCPUMsPerPhoto)
	return err
}
