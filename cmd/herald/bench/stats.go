package bench

import (
	"math"
	"slices"
	"time"
)

// percentile returns the p-th percentile (0 < p ≤ 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the
// samples at or below it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}

// run is what one measured loop produced.
type run struct {
	elapsed   time.Duration
	latencies []time.Duration
}

// add appends o's entries and time to r.
func (r *run) add(o run) {
	r.elapsed += o.elapsed
	r.latencies = append(r.latencies, o.latencies...)
}

func (r run) perSecond() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(len(r.latencies)) / r.elapsed.Seconds()
}

// quantiles returns p50 and p99 in milliseconds.
func (r run) quantiles() (p50, p99 float64) {
	s := slices.Clone(r.latencies)
	slices.Sort(s)
	return ms(percentile(s, 50)), ms(percentile(s, 99))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// merge joins the per-goroutine latency slices, each written by one
// goroutine only, so the hot loop takes no lock.
func merge(parts [][]time.Duration) []time.Duration {
	var out []time.Duration
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
