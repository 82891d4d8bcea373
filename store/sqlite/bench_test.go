package sqlite

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/sessions"
)

// BenchmarkPipeline pushes entries through Append → Claim → Finish with
// release, the path of every turn, with 1 and 32 conversations in flight.
func BenchmarkPipeline(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		for _, convs := range []int{1, 32} {
			b.Run(sync+"/convs="+strconv.Itoa(convs), func(b *testing.B) {
				benchPipeline(b, sync, convs)
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
	text := "herald bench herald bench herald bench herald bench herald bench herald bench"
	var wg sync.WaitGroup
	per := b.N/convs + 1
	b.ResetTimer()
	for c := range convs {
		wg.Go(func() {
			conv := "bench:" + strconv.Itoa(c)
			worker := "w" + strconv.Itoa(c)
			for i := range per {
				if _, err := s.Append(ctx, sessions.Inbound{Conv: conv, MessageID: strconv.Itoa(i), Text: text}); err != nil {
					b.Error(err)
					return
				}
				var turn *sessions.Turn
				for turn == nil {
					if turn, err = s.Claim(ctx, worker, time.Minute); err != nil {
						b.Error(err)
						return
					}
				}
				if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(per*convs)/b.Elapsed().Seconds(), "entries/s")
}
