package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
)

// The chaos run on Redis Cluster: three gateway processes on a real
// cluster of three primaries and three replicas; every few seconds one
// gateway is SIGKILLed and started again, and once, mid-run, the primary
// of a shard is SIGKILLed (its replica takes over; the dead node is
// started again and rejoins as a replica). With store.redis_wait_replicas
// 1, nothing a platform (here the API) was told was accepted may be lost.
const (
	chaosConvs    = 1000
	chaosMessages = 5
	// chaosModelDelay keeps turns at the model long enough to overlap
	// with kills.
	chaosModelDelay = 100 * time.Millisecond
	// chaosKillEvery is how often a gateway is killed.
	chaosKillEvery = 2 * time.Second
	// chaosTimeout bounds the run.
	chaosTimeout = 6 * time.Minute
	// chaosSettle is how long, acting at once, the run waits for a reply
	// before it counts what is missing as lost.
	chaosSettle = 20 * time.Second
)

func TestGatewaysOnRedisClusterUnderKills(t *testing.T) {
	t.Run("waiting for a replica", func(t *testing.T) { chaosRun(t, true) })
	// With store.redis_wait_replicas 0 herald acts on a write its primary
	// has not passed on yet: the run counts what the primary's loss took.
	t.Run("acting at once", func(t *testing.T) { chaosRun(t, false) })
}

func chaosRun(t *testing.T, wait bool) {
	place := aRedisCluster(t)
	place.noWait = !wait
	model := testkit.NewModelServer(t)
	model.Respond(func(testkit.RecordedRequest) testkit.Step { return testkit.Echo().After(chaosModelDelay) })
	cfg := sharedConfig(place, model)

	// The gateways: slot k runs in home k; a kill starts a new process in
	// the same home. apis holds the live ones' clients.
	homes := make([]string, 3)
	gws := make([]*child, 3)
	var apis atomic.Pointer[[]*apiClient]
	publish := func() {
		var live []*apiClient
		for _, g := range gws {
			if g != nil {
				live = append(live, g.api())
			}
		}
		apis.Store(&live)
	}
	for k := range gws {
		homes[k] = t.TempDir()
		writeConfig(t, homes[k], cfg)
		gws[k] = startChild(t, fmt.Sprintf("gateway %d", k), homes[k])
	}
	publish()
	pick := func(n int) *apiClient {
		live := *apis.Load()
		return live[n%len(live)]
	}
	allInFlight := func() int {
		n := 0
		for i := range chaosConvs {
			n += model.InFlight(clusterModelKey(chaosConv(i)))
		}
		return n
	}

	// Senders: each conversation posts its messages in order, each to a
	// live gateway, with an Idempotency-Key, again and again until one
	// takes it: a gateway killed mid-request, or a shard without its
	// primary for a moment, may refuse or drop a post, never lose one it
	// accepted.
	started := time.Now()
	var posted, retried atomic.Int64
	var senders sync.WaitGroup
	for i := range chaosConvs {
		senders.Go(func() {
			for j := range chaosMessages {
				if j > 0 {
					time.Sleep(chaosModelDelay)
				}
				for try := 0; ; try++ {
					_, err := pick(i+j+try).post(chaosConv(i), chaosText(i, j), chaosKey(i, j))
					if err == nil {
						break
					}
					retried.Add(1)
					if time.Since(started) > chaosTimeout {
						t.Errorf("%s: message %d not accepted within %s: %v", chaosConv(i), j, chaosTimeout, err)
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
				posted.Add(1)
			}
		})
	}

	// The kills, made from the collector's loop below: every
	// chaosKillEvery a gateway is SIGKILLed and started again; once 2/5 of
	// the turns reached the model, the primary serving a shard. Each kill
	// records the model calls in flight then: the turns it may make run
	// again.
	var inFlightAtKills int64
	gatewayKills := 0
	nextKill := time.Now().Add(chaosKillEvery / 2)
	killGateway := func() {
		nextKill = time.Now().Add(chaosKillEvery)
		k := rand.IntN(len(gws))
		inFlightAtKills += int64(allInFlight())
		gws[k].kill()
		gws[k] = nil
		publish()
		gws[k] = startChild(t, fmt.Sprintf("gateway %d", k), homes[k])
		publish()
		gatewayKills++
	}
	primaryKilled := false
	var failover time.Duration
	killPrimary := func() {
		inFlightAtKills += int64(allInFlight())
		failover = place.killPrimary(t)
		primaryKilled = true
	}

	lastReplies, lastProgress := 0, time.Now()
	// Collector: every conversation's timeline, read through any live
	// gateway, until each has all its replies.
	timelines := make([][]item, chaosConvs)
	finished := make([]bool, chaosConvs)
	deadline := started.Add(chaosTimeout)
	for round := 0; ; round++ {
		// The round's reads run 32 at a time, so that a round is short and
		// the kills below keep their pace.
		var open atomic.Int64
		var reads sync.WaitGroup
		slots := make(chan struct{}, 32)
		for i := range chaosConvs {
			if finished[i] {
				continue
			}
			slots <- struct{}{}
			reads.Go(func() {
				defer func() { <-slots }()
				items, err := pick(i + round).timeline(chaosConv(i))
				if err != nil {
					open.Add(1)
					return // a gateway killed under the read
				}
				timelines[i] = items
				if len(items) >= chaosMessages {
					finished[i] = true
				} else {
					open.Add(1)
				}
			})
		}
		reads.Wait()
		for i, items := range timelines {
			if len(items) > chaosMessages {
				t.Fatalf("%s has %d timeline items, more than the %d messages sent: %v", chaosConv(i), len(items), chaosMessages, items)
			}
		}
		if open.Load() == 0 {
			break
		}
		// Acting at once, a message the primary's loss took is never
		// answered: once every post was taken and no reply came for a
		// while, what is missing is lost.
		if n := replies(timelines); n > lastReplies {
			lastReplies, lastProgress = n, time.Now()
		}
		if !wait && posted.Load() == chaosConvs*chaosMessages && time.Since(lastProgress) > chaosSettle {
			break
		}
		switch {
		case !primaryKilled && model.Count() >= chaosConvs*chaosMessages*2/5:
			killPrimary()
		case time.Now().After(nextKill):
			killGateway()
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d of %d conversations lack replies (%d of %d messages posted)",
				chaosTimeout, open.Load(), chaosConvs, posted.Load(), chaosConvs*chaosMessages)
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(started)
	senders.Wait()
	if !primaryKilled {
		t.Fatalf("the run ended before a primary was killed")
	}

	// Nothing lost (waiting for a replica), nothing twice, nothing out of
	// order.
	lost := 0
	for i, items := range timelines {
		var want []string
		for j := range chaosMessages {
			want = append(want, "echo: "+chaosText(i, j))
		}
		got := texts(items)
		switch {
		case wait && !slices.Equal(got, want):
			t.Errorf("%s: timeline %q, want the replies %q, each once, in order", chaosConv(i), got, want)
		case !wait && !inOrderOnce(got, want):
			t.Errorf("%s: timeline %q, want some of the replies %q, each at most once, in order", chaosConv(i), got, want)
		}
		lost += len(want) - len(got)
	}
	if !wait {
		t.Logf("acting at once: %d of %d messages taken were lost with the primary", lost, chaosConvs*chaosMessages)
	}
	// Turns in the order sent, a turn cut by a kill run again right after.
	turns := map[string][]string{}
	for _, req := range model.Requests() {
		conv := req.Conversation()
		if seq := turns[conv]; len(seq) == 0 || seq[len(seq)-1] != req.LastUser() {
			turns[conv] = append(seq, req.LastUser())
		}
	}
	// Acting at once, a gateway whose lease the primary took with it may
	// run a turn again after the conversation's new holder went past it
	// (its commit is fenced off): the model sees an earlier turn after a
	// later one. One such step back a conversation, and only in the
	// killed primary's third.
	rewound := 0
	for i := range chaosConvs {
		var want []string
		for j := range chaosMessages {
			want = append(want, chaosText(i, j))
		}
		got := turns[clusterModelKey(chaosConv(i))]
		if wait {
			if !slices.Equal(got, want) {
				t.Errorf("%s: the model saw the turns %q, want %q", chaosConv(i), got, want)
			}
			continue
		}
		before, after := got, []string(nil)
		if back := stepBack(got, want); back > 0 {
			before, after = got[:back], got[back:]
			rewound++
		}
		if !inOrderOnce(before, want) || !inOrderOnce(after, want) {
			t.Errorf("%s: the model saw the turns %q, want some of %q in order, going back at most once", chaosConv(i), got, want)
		}
	}
	if !wait {
		t.Logf("acting at once: the model saw %d conversations go back to an earlier turn", rewound)
		if rewound > chaosConvs/3 {
			t.Errorf("%d conversations went back to an earlier turn, more than the %d of the killed primary's shards", rewound, chaosConvs/3)
		}
	}
	// Waiting for a replica, a conversation's lease is never lost, so its
	// turns never overlap. Acting at once, a lease the dead primary had
	// not passed on is gone with it, and another gateway may start the
	// conversation's turn while the first still runs (its commit is then
	// fenced off): counted, and only for the killed primary's third.
	overlapping := 0
	for key, n := range model.MaxOverlaps() {
		if n <= 1 {
			continue
		}
		overlapping++
		if wait {
			t.Errorf("conversation %q had %d turns at the model at once", key, n)
		}
	}
	if !wait {
		t.Logf("acting at once: %d conversations had two turns at the model at once", overlapping)
		if overlapping > chaosConvs/3 {
			t.Errorf("%d conversations had overlapping turns, more than the %d of the killed primary's shards", overlapping, chaosConvs/3)
		}
	}
	total := chaosConvs * chaosMessages
	again := model.Count() - total
	t.Logf("%d turns on 3 gateways and a 3-primary cluster in %s: %d gateway kills, a primary killed (failover %s), %d posts retried, %d turns run again (%d at the model when a kill came)",
		total, took.Round(time.Millisecond), gatewayKills, failover.Round(time.Millisecond), retried.Load(), again, inFlightAtKills)
	// A turn runs again when a kill cut it at the model, or when its
	// commit was refused while its shard had no primary: at most one per
	// conversation of that primary's shards (a third of them).
	if bound := inFlightAtKills + chaosConvs/3; int64(again) > bound {
		t.Errorf("%d turns ran again, more than the %d a kill or the failover could cut", again, bound)
	}
}

// replies counts the replies in timelines.
func replies(timelines [][]item) int {
	n := 0
	for _, items := range timelines {
		n += len(items)
	}
	return n
}

// stepBack is the index of the first of got that comes no later in want
// than the one before it, or 0 when got goes only forward.
func stepBack(got, want []string) int {
	last := -1
	for i, g := range got {
		at := slices.Index(want, g)
		if i > 0 && at <= last {
			return i
		}
		last = at
	}
	return 0
}

// inOrderOnce reports whether got is want with some left out: each at
// most once, in want's order.
func inOrderOnce(got, want []string) bool {
	j := 0
	for _, g := range got {
		for j < len(want) && want[j] != g {
			j++
		}
		if j == len(want) {
			return false
		}
		j++
	}
	return true
}

func chaosConv(i int) string    { return fmt.Sprintf("k%04d", i) }
func chaosText(i, j int) string { return fmt.Sprintf("%s m%d", chaosConv(i), j) }
func chaosKey(i, j int) string  { return fmt.Sprintf("%s-m%d", chaosConv(i), j) }
