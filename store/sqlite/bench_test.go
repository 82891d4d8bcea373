package sqlite

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/sessions"
)

// BenchmarkPipeline pushes entries through Append → Claim → Finish with
// release, the path of every turn: one producer and one worker per
// conversation, convs conversations at once. herald's bench command
// compares the same path to bare SQLite transactions; this one is for
// profiling the store alone.
func BenchmarkPipeline(b *testing.B) {
	for _, syncMode := range []string{"FULL", "NORMAL"} {
		for _, convs := range []int{1, 32} {
			b.Run(syncMode+"/convs="+strconv.Itoa(convs), func(b *testing.B) {
				benchPipeline(b, syncMode, convs)
			})
		}
	}
}

func benchPipeline(b *testing.B, syncMode string, convs int) {
	d, err := Open(filepath.Join(b.TempDir(), "herald.db"), Options{Synchronous: syncMode})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	s, ctx := d.Sessions(), context.Background()
	const text = "herald bench herald bench herald bench herald bench herald bench herald bench"
	per := b.N/convs + 1
	total := int64(per * convs)
	var finished atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for c := range convs {
		wg.Go(func() {
			conv := "bench:" + strconv.Itoa(c)
			for i := range per {
				if _, err := s.Append(ctx, sessions.Inbound{Conv: conv, MessageID: strconv.Itoa(i), Text: text}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		wg.Go(func() {
			worker := "w" + strconv.Itoa(c)
			for finished.Load() < total {
				turn, err := s.Claim(ctx, worker, time.Minute)
				if err != nil {
					b.Error(err)
					return
				}
				if turn == nil {
					time.Sleep(100 * time.Microsecond)
					continue
				}
				if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}); err != nil {
					b.Error(err)
					return
				}
				finished.Add(1)
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "entries/s")
}
