package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/store/redis"
)

// The loop run: loopConvs conversations, each with a /loop of loopTimes
// ticks every loopEvery, on three gateways sharing one redis-server.
const (
	loopConvs = 3
	loopTimes = 6
	loopEvery = 5 * time.Second // loop.min_interval's floor
	// loopKillTick is the tick a gateway is killed under: every loop
	// has ticks before it and after it.
	loopKillTick = 3
	// loopSlack is how much sooner than loopEvery the test may see a
	// tick after the one before: the store's clock counts milliseconds.
	loopSlack = 10 * time.Millisecond
	// loopSettle bounds each wait of the run: for a gateway to hold a
	// tick at the model, and for every loop to be done. A run takes
	// loopTimes intervals and a lease TTL; a reply the killed gateway
	// had claimed to deliver waits for its outbox claim (10 s) besides.
	loopSettle = 2 * time.Minute
)

func loopConv(i int) string               { return fmt.Sprintf("loop%d", i) }
func loopPrompt(conv string) string       { return "tick " + conv }
func loopReply(conv string, n int) string { return fmt.Sprintf("tock %s #%d", conv, n) }

// loopTick is one tick of a conversation's loop, numbered as the model
// sees it: the nth time the loop's prompt is in the history it is sent.
type loopTick struct {
	conv string
	n    int
}

func (k loopTick) String() string { return fmt.Sprintf("%s #%d", k.conv, k.n) }

// tickOf reads which tick req is the turn of: its last user message is
// a loop's prompt (prompts maps each to its conversation), and the tick
// is how many times the prompt is in the request. A turn run again after
// its process died starts from the same history, so it has the same
// number; a tick's entry run twice would have the next.
func tickOf(req testkit.RecordedRequest, prompts map[string]string) (loopTick, bool) {
	conv, ok := prompts[req.LastUser()]
	if !ok {
		return loopTick{}, false
	}
	return loopTick{conv, countMessages(req, "user", req.LastUser())}, true
}

// TestControllersTickOnceAcrossThreeGatewaysOneKilled runs loopConvs
// loops (`/loop 5s tick <conv> --times 6`, posted to the local API) on
// three gateway processes sharing one redis-server, and SIGKILLs one of
// them while it runs a tick's turn at the model. Every loop runs its
// loopTimes ticks, an interval apart, each committed once: none is fired
// twice among the three (a second entry of one tick), and none is lost
// with the killed one, whose turn a survivor runs again once its lease
// runs out.
//
// The killed gateway's turn had called the model, so the model sees
// that tick twice: a turn is at least once. What must be exactly once
// is what a tick commits: its reply, the loop's count.
func TestControllersTickOnceAcrossThreeGatewaysOneKilled(t *testing.T) {
	t.Parallel()
	redisServer := testkit.StartRedis(t)
	model := testkit.NewModelServer(t)

	prompts := map[string]string{}
	for i := range loopConvs {
		prompts[loopPrompt(loopConv(i))] = loopConv(i)
	}
	// Each gateway has its own model key, so the model server can tell
	// which one calls. The gateway that first runs a tick from
	// loopKillTick on is the doomed one: its turns of those ticks hang at
	// the model until it is killed under them. Every other tick is
	// answered with a reply naming it. Which gateway runs a tick is the
	// cluster's choice, so the doomed one is the first to run one rather
	// than one named in advance, which might run none.
	names := [3]string{"A", "B", "C"}
	modelKeys := [3]string{"model-key-a", "model-key-b", "model-key-c"}
	gatewayOf := func(req testkit.RecordedRequest) int {
		return slices.Index(modelKeys[:], strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer "))
	}
	held := testkit.NewGate()
	t.Cleanup(held.Release)
	var mu sync.Mutex
	doomed := -1
	arrived := map[loopTick][]time.Time{} // when each tick's turns came to the model, for their pace
	model.Respond(func(req testkit.RecordedRequest) testkit.Step {
		k, ok := tickOf(req, prompts)
		if !ok {
			return testkit.Echo()
		}
		g := gatewayOf(req)
		mu.Lock()
		arrived[k] = append(arrived[k], time.Now())
		if doomed < 0 && k.n >= loopKillTick {
			doomed = g
		}
		hold := k.n >= loopKillTick && g == doomed
		mu.Unlock()
		if hold {
			return testkit.Hang(held)
		}
		return testkit.Reply(loopReply(k.conv, k.n))
	})

	cfg := clusterConfig(redisServer, model) + `  api_key: %s
loop:
  min_interval: ` + loopEvery.String() + "\n"
	var gws [3]*child
	var apis [3]*apiClient
	for k, name := range names {
		home := t.TempDir()
		writeConfig(t, home, fmt.Sprintf(cfg, modelKeys[k]))
		gws[k] = startChild(t, "gateway "+name, home)
		apis[k] = gws[k].api()
		t.Cleanup(apis[k].http.CloseIdleConnections)
	}
	db, err := redis.Open(context.Background(), redis.Options{URL: redisServer.URL(), Prefix: redisServer.Prefix()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	started := time.Now()

	// Each loop is started through a gateway of its own; the answer
	// comes out of band, before any tick.
	for i := range loopConvs {
		conv := loopConv(i)
		apis[i%3].mustPost(t, conv, fmt.Sprintf("/loop %s %s --times %d", loopEvery, loopPrompt(conv), loopTimes))
	}
	for i := range loopConvs {
		items := apis[i%3].waitTimeline(t, loopConv(i), 1)
		if cmds := ofKind(items, kindCommand); len(cmds) == 0 || !strings.HasPrefix(cmds[0].Text, "Started. Loop lp_") {
			t.Fatalf("%s: timeline %v; want /loop's answer, Started.", loopConv(i), items)
		}
	}

	// Once the doomed gateway holds a tick at the model, it is killed.
	testkit.EventuallyWithin(t, loopSettle, func() (bool, string) {
		return held.Waiting() > 0, fmt.Sprintf("no gateway is running tick #%d of a loop", loopKillTick)
	})
	mu.Lock()
	killed := doomed
	mu.Unlock()
	gws[killed].kill()
	killedAt := time.Since(started)
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		return held.Waiting() == 0, "the killed gateway's model requests are still open"
	})
	var survivors []int
	for k := range gws {
		if k != killed {
			survivors = append(survivors, k)
		}
	}
	api := apis[survivors[0]]
	// What the killed gateway had at the model: the ticks a survivor
	// must run again.
	var cut []loopTick
	for _, req := range model.Requests() {
		if k, ok := tickOf(req, prompts); ok && gatewayOf(req) == killed && k.n >= loopKillTick {
			cut = append(cut, k)
		}
	}

	// Every loop done, its end told, every reply delivered.
	testkit.EventuallyWithin(t, loopSettle, func() (bool, string) {
		var open []string
		for i := range loopConvs {
			conv := loopConv(i)
			_, l, err := loopOf(db, conv)
			if err != nil {
				return false, err.Error()
			}
			items, err := api.timeline(conv)
			if err != nil {
				return false, err.Error()
			}
			if l.Status != controllers.LoopDone || !slices.ContainsFunc(ofKind(items, controllers.KindNotice), endsLoop) {
				open = append(open, fmt.Sprintf("%s: %s, %d ticks; %d replies", conv, l.Status, l.Ticks, len(ofKind(items, kindReply))))
			}
		}
		msgs, err := db.Outbox().Pending(context.Background(), 100)
		if err != nil {
			return false, err.Error()
		}
		return len(open) == 0 && len(msgs) == 0,
			fmt.Sprintf("loops not done: %q; %d messages pending in the outbox", open, len(msgs))
	})
	done := time.Since(started)

	// The survivors are stopped, so that what follows is read from the
	// store at rest: nothing runs that could add a tick after it is read.
	for _, k := range survivors {
		gws[k].stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Each loop is done having counted loopTimes ticks: a tick lost
	// would leave it short and waiting (and the wait above fails).
	for i := range loopConvs {
		conv := loopConv(i)
		st, l, err := loopOf(db, conv)
		if err != nil {
			t.Errorf("%s: %v", conv, err)
			continue
		}
		if l.Status != controllers.LoopDone || l.Ticks != loopTimes || !st.DueAt.IsZero() {
			t.Errorf("%s: the loop is %s with %d ticks, due at %s; want done after %d ticks, due never", conv, l.Status, l.Ticks, st.DueAt, loopTimes)
		}
	}

	// Each tick's reply is in its timeline once, and nothing else is but
	// /loop's answer and the loop's end: a tick committed twice from one
	// history would show its reply twice, and one past the last a reply
	// too many.
	for i := range loopConvs {
		conv := loopConv(i)
		items, err := db.Timeline().ReadTimeline(ctx, "api:"+conv, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		var replies, notices, other []string
		for _, it := range items {
			switch it.Kind {
			case kindReply:
				replies = append(replies, it.Text)
			case controllers.KindNotice:
				notices = append(notices, it.Text)
			case kindCommand:
			default:
				other = append(other, it.Kind+" "+it.Text)
			}
		}
		var want []string
		for n := 1; n <= loopTimes; n++ {
			want = append(want, loopReply(conv, n))
		}
		// After the kill, a reply the killed gateway had claimed to send
		// goes out when that claim runs out, after later ones: the order
		// is not the point.
		if !slices.Equal(sorted(replies), sorted(want)) {
			t.Errorf("%s: the timeline has the replies %q; want %q, each once", conv, replies, want)
		}
		if len(notices) != 1 || !endsLoop(item{Text: notices[0]}) {
			t.Errorf("%s: the timeline has the notices %q; want the loop's end, once", conv, notices)
		}
		if len(other) > 0 {
			t.Errorf("%s: the timeline has items that are no reply, notice or answer: %q", conv, other)
		}
	}

	// Nothing is left to run or to send.
	if turn, err := db.Sessions().Claim(ctx, "inspector", time.Second); err != nil || turn != nil {
		t.Errorf("the turn queue still holds work: %+v (%v)", turn, err)
	}
	if dead, err := db.Outbox().DeadLetters(ctx, 10); err != nil || len(dead) != 0 {
		t.Errorf("outbox dead letters: %v (%v), want none", dead, err)
	}

	// At the model: each tick ran once, or, when a gateway was killed
	// under it, there and then once on a survivor. Ticks ran in order,
	// one at a time per conversation.
	calls := map[loopTick][]string{}
	seq := map[string][]int{}
	for _, req := range model.Requests() {
		k, ok := tickOf(req, prompts)
		if !ok {
			t.Errorf("the model got a request that is no tick's turn: %s", describe(req))
			continue
		}
		calls[k] = append(calls[k], names[gatewayOf(req)])
		if s := seq[k.conv]; len(s) == 0 || s[len(s)-1] != k.n {
			seq[k.conv] = append(s, k.n)
		}
	}
	for i := range loopConvs {
		conv := loopConv(i)
		var want []int
		for n := 1; n <= loopTimes; n++ {
			want = append(want, n)
			k := loopTick{conv, n}
			switch on := calls[k]; {
			case len(on) == 1:
			case len(on) == 2 && on[0] == names[killed] && on[1] != names[killed] && slices.Contains(cut, k):
			default:
				t.Errorf("%s ran on the gateways %q; want one, or %s (killed under it) and then a survivor", k, on, names[killed])
			}
		}
		if !slices.Equal(seq[conv], want) {
			t.Errorf("%s: the model saw the ticks %v, want %v", conv, seq[conv], want)
		}
	}
	for _, k := range cut {
		if on := calls[k]; len(on) != 2 {
			t.Errorf("%s, which gateway %s had at the model when it was killed, ran on the gateways %q; want it and a survivor", k, names[killed], on)
		}
	}
	for key, n := range model.MaxOverlaps() {
		if n > 1 {
			t.Errorf("conversation %q had %d turns at the model at once", key, n)
		}
	}

	// Each tick came an interval or more after the turn of the one
	// before ended, as a loop is paced: a fire whose entry ran twice
	// would count two ticks, the second at once after the first. A turn
	// ends after its last model call, so that call is an interval or
	// more before the next tick's first.
	mu.Lock()
	for i := range loopConvs {
		conv := loopConv(i)
		for n := 2; n <= loopTimes; n++ {
			before, at := arrived[loopTick{conv, n - 1}], arrived[loopTick{conv, n}]
			if len(before) == 0 || len(at) == 0 {
				continue // told above
			}
			if gap := at[0].Sub(before[len(before)-1]); gap < loopEvery-loopSlack {
				t.Errorf("%s came %s after the last model call of the tick before; want %s or more", loopTick{conv, n}, gap.Round(time.Millisecond), loopEvery)
			}
		}
	}
	mu.Unlock()

	// No gateway dropped a tick's entry as stale: each fire queued its
	// entry once, a fire run again after its claimer died included (its
	// entry is keyed by the fire). The runner drops a second entry of a
	// tick so, unrun, which no count above would show.
	stale, took := 0, 0
	for k, g := range gws {
		stale += strings.Count(g.stderr.String(), "a controller's entry went stale before its turn")
		if k != killed {
			took += strings.Count(g.stderr.String(), "taking over an entry handed out before")
		}
	}
	if stale > 0 {
		t.Errorf("the gateways dropped %d controllers' entries as stale; want none: a tick's entry was queued twice", stale)
	}
	if took < len(cut) {
		t.Errorf("the survivors took over %d entries; gateway %s had %d ticks at the model", took, names[killed], len(cut))
	}
	t.Logf("%d loops of %d ticks on three gateways; gateway %s killed at %s with %v at the model (%d entries taken over); done at %s",
		loopConvs, loopTimes, names[killed], killedAt.Round(time.Millisecond), cut, took, done.Round(time.Millisecond))
}

// loopOf reads conv's one loop from the store.
func loopOf(db *redis.DB, conv string) (controllers.State, controllers.Loop, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	states, err := db.Controllers().Controllers(ctx, "api:"+conv)
	if err != nil {
		return controllers.State{}, controllers.Loop{}, fmt.Errorf("reading the controllers of %s: %w", conv, err)
	}
	var loops []controllers.State
	for _, st := range states {
		if st.Kind == controllers.KindLoop {
			loops = append(loops, st)
		}
	}
	if len(loops) != 1 {
		return controllers.State{}, controllers.Loop{}, fmt.Errorf("%s has %d loops, want one: %+v", conv, len(loops), states)
	}
	var l controllers.Loop
	if err := json.Unmarshal(loops[0].Data, &l); err != nil {
		return controllers.State{}, controllers.Loop{}, fmt.Errorf("the loop of %s: %w", conv, err)
	}
	return loops[0], l, nil
}

// endsLoop reports whether it is the notice of a loop that ran its
// loopTimes.
func endsLoop(it item) bool {
	return strings.HasPrefix(it.Text, "Loop lp_") && strings.HasSuffix(it.Text, fmt.Sprintf("The loop ran its %d times.", loopTimes))
}
