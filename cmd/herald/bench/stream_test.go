package bench

import (
	"context"
	"testing"
	"time"
)

// A short run on SQLite measures every piece of every stream, on both
// sides, and the figures are times.
func TestStreamMeasuresEveryPiece(t *testing.T) {
	res, err := Stream(context.Background(), StreamOptions{Store: "sqlite", Streams: 3, Pieces: 4, Interval: time.Millisecond, Rounds: 2, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Samples != 3*4*2 {
		t.Errorf("samples = %d, want every piece", res.Samples)
	}
	if res.P50Ms <= 0 || res.P99Ms < res.P50Ms || res.RawP50Ms <= 0 {
		t.Errorf("figures = %+v", res)
	}
}
