package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// BenchmarkRedisTurnCalls makes the store calls of a turn the way the
// gateway makes them when nothing else waits (AppendClaim, then a
// FinishAndClaim that hands its reply to a delivery worker, then a share
// of an AckAll of 32), from 32 goroutines at once as from as many
// conversations in flight, and reports the Redis server's CPU time a
// turn (server-µs/op, from INFO cpu). It measures what the scripts cost
// the server without the rest of the pipeline (herald bench pipeline);
// point it at a server of your own with HERALD_TEST_REDIS_URL to see the
// effect of its settings (the test server fsyncs every write).
func BenchmarkRedisTurnCalls(b *testing.B) {
	ctx := context.Background()
	be, err := newRedisBackend(ctx, redisTarget{URL: testkit.StartRedis(b).URL()}, 32)
	if err != nil {
		b.Fatal(err)
	}
	defer be.cleanup(ctx)
	st, err := be.open(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	s, o := st.Sessions(), st.(interface{ Outbox() outbox.Store }).Outbox()
	var next atomic.Int64
	// turns runs n turns, or b.N between all callers when pb is set, on
	// conversations of its own, 32 of them in turn.
	turns := func(n int, pb *testing.PB) {
		var handed []outbox.Claimed
		handoff := &sessions.Handoff{Worker: "d1", TTL: time.Minute, Claimed: func(cs []outbox.Claimed) { handed = append(handed, cs...) }}
		base := next.Add(1) * 1000
		for i := 0; pb != nil && pb.Next() || pb == nil && i < n; i++ {
			conv := "bench:" + strconv.FormatInt(base+int64(i%32), 10)
			in := sessions.Inbound{Conv: conv, Sender: "u", MessageID: fmt.Sprint("m", base, "-", i), Text: payload}
			_, t, err := s.AppendClaim(ctx, in, "w1", time.Minute)
			if err != nil || t == nil {
				b.Errorf("AppendClaim = %v, %v; want a turn", t, err)
				return
			}
			now := time.Now()
			f := sessions.Finish{
				EntryID: t.Entry.ID, Release: true, ClaimIfLeft: true, Handoff: handoff,
				History: []chat.Message{{Role: "user", Content: payload, At: now}, {Role: "assistant", Content: "Noted.", At: now}},
				Outbox:  []outbox.Message{{Target: outbox.Target{Platform: "telegram", Chat: "100"}, Conv: conv, Text: "Noted.", Kind: "reply"}},
			}
			if claimed, err := s.FinishAndClaim(ctx, t.Lease, f, "w1", time.Minute); err != nil || claimed != nil {
				b.Errorf("FinishAndClaim = %v, %v; want nothing claimed", claimed, err)
				return
			}
			if len(handed) >= 32 {
				if _, err := o.AckAll(ctx, handed); err != nil {
					b.Error(err)
					return
				}
				handed = handed[:0]
			}
		}
	}
	turns(64, nil)       // the library loaded, the first keys made
	b.SetParallelism(16) // 32 callers on 2 cores
	before, ok := be.serverCPU(ctx)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) { turns(0, pb) })
	b.StopTimer()
	after, ok2 := be.serverCPU(ctx)
	if !ok || !ok2 {
		b.Fatal("INFO cpu has no used_cpu_user and used_cpu_sys")
	}
	b.ReportMetric(float64((after-before).Microseconds())/float64(b.N), "server-µs/op")
}
