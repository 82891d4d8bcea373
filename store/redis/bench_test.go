package redis

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
)

// benchConvs is the concurrency of both loops: conversations in flight.
const benchConvs = 32

// BenchmarkQueue pushes entries through Append → Claim → Finish(Release)
// and, on the same server at the same concurrency, through bare XADD +
// XREADGROUP + XACK, and reports the ratio of the two rates. The target
// is a ratio of at least 0.5. `herald bench queue` reports the same
// figures with latencies; this one is for working on the scripts.
func BenchmarkQueue(b *testing.B) {
	r := testkit.StartRedis(b)
	ctx := context.Background()
	opt, err := goredis.ParseURL(r.URL())
	if err != nil {
		b.Fatal(err)
	}
	opt.PoolSize = 2 * benchConvs
	client := goredis.NewClient(opt)
	defer client.Close()
	db, err := Open(ctx, Options{Client: client, Prefix: r.Prefix()})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	s := db.Sessions()

	raw := func(conv, n int) error {
		stream := r.Prefix() + "raw:{" + strconv.Itoa(conv) + "}"
		if err := client.XGroupCreateMkStream(ctx, stream, "g", "$").Err(); err != nil {
			return err
		}
		for range n {
			id, err := client.XAdd(ctx, &goredis.XAddArgs{Stream: stream, Values: []any{"d", "hello"}}).Result()
			if err != nil {
				return err
			}
			if err := client.XReadGroup(ctx, &goredis.XReadGroupArgs{
				Group: "g", Consumer: "c", Streams: []string{stream, ">"}, Count: 1, Block: -1,
			}).Err(); err != nil {
				return err
			}
			if err := client.XAck(ctx, stream, "g", id).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	herald := func(conv, n int) error {
		name := "bench:" + strconv.Itoa(conv)
		for i := range n {
			if _, err := s.Append(ctx, sessions.Inbound{Conv: name, MessageID: strconv.Itoa(i), Text: "hello"}); err != nil {
				return err
			}
			// Another worker may have taken this conversation's entry; the
			// loop finishes whatever it claims, so the work is the same.
			for {
				turn, err := s.Claim(ctx, name, time.Minute)
				if err != nil {
					return err
				}
				if turn == nil {
					break
				}
				if err := s.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}); err != nil {
					return err
				}
				break
			}
		}
		return nil
	}
	drive := func(step func(conv, n int) error) float64 {
		n := max(b.N/benchConvs, 1)
		var wg sync.WaitGroup
		errc := make(chan error, benchConvs)
		start := time.Now()
		for c := range benchConvs {
			wg.Go(func() {
				if err := step(c, n); err != nil {
					errc <- err
				}
			})
		}
		wg.Wait()
		close(errc)
		for err := range errc {
			b.Fatal(err)
		}
		return float64(n*benchConvs) / time.Since(start).Seconds()
	}

	b.ResetTimer()
	rawRate := drive(raw)
	heraldRate := drive(herald)
	b.StopTimer()
	b.ReportMetric(rawRate, "raw_entries/s")
	b.ReportMetric(heraldRate, "entries/s")
	b.ReportMetric(heraldRate/rawRate, "ratio")
}
