package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions/agent"
)

// The cluster run: conversations × messages, sent alternately to two
// gateway processes sharing one redis-server.
const (
	clusterConvs    = 100
	clusterMessages = 5
	// clusterModelDelay makes each turn last long enough that two turns of
	// one conversation running at once would overlap at the model, and
	// the run long enough to kill a process in the middle of it.
	clusterModelDelay = 100 * time.Millisecond
	// clusterTimeout bounds a run. A run takes seconds; a killed process
	// can leave a reply claimed for delivery but not sent, which the
	// survivor sends once the killed process's heartbeat has run out.
	clusterTimeout = 100 * time.Second
	// killAfter is the share of model calls made before one process is
	// killed in the second run.
	killAfter = 0.4
)

func TestTwoGatewaysOnOneRedis(t *testing.T) {
	t.Parallel()
	t.Run("both run to the end", func(t *testing.T) { runCluster(t, false) })
	t.Run("one is killed mid-run", func(t *testing.T) { runCluster(t, true) })
}

func clusterConv(i int) string           { return fmt.Sprintf("c%03d", i) }
func clusterText(i, j int) string        { return fmt.Sprintf("%s m%d", clusterConv(i), j) }
func clusterKey(i, j int) string         { return fmt.Sprintf("%s-m%d", clusterConv(i), j) }
func clusterReply(i, j int) string       { return "echo: " + clusterText(i, j) }
func clusterModelKey(conv string) string { return agent.ModelUser("api:" + conv) }

// runCluster sends every message, collects every reply from the
// timelines and checks order, exactly-once and that no conversation ever
// had two turns at the model at once. With kill, the first process is
// SIGKILLed once killAfter of the model calls were made, and the second
// must finish everything, the killed one's in-flight conversations
// included (after the lease TTL).
func runCluster(t *testing.T, kill bool) {
	redis := testkit.StartRedis(t)
	model := testkit.NewModelServer(t)
	// Each process has its own model key, so the model server can tell
	// which one calls. The overlap count is keyed by the conversation,
	// which the gateway names in the request's user field.
	modelKeys := [2]string{"model-key-a", "model-key-b"}
	var lastCallOfA atomic.Int64 // unix nanoseconds
	model.Respond(func(req testkit.RecordedRequest) testkit.Step {
		if req.Header.Get("Authorization") == "Bearer "+modelKeys[0] {
			lastCallOfA.Store(time.Now().UnixNano())
		}
		return testkit.Echo().After(clusterModelDelay)
	})

	cfg := clusterConfig(redis, model) + `
  api_key: %s
`
	var gws [2]*child
	var apis [2]*apiClient
	for k, name := range []string{"gateway A", "gateway B"} {
		home := t.TempDir()
		writeConfig(t, home, fmt.Sprintf(cfg, modelKeys[k]))
		gws[k] = startChild(t, name, home)
		apis[k] = gws[k].api()
		t.Cleanup(apis[k].http.CloseIdleConnections)
	}
	started := time.Now()

	// Senders: each conversation posts its messages in order, message j
	// to gateway (i+j)%2, a model delay apart so that posting goes on
	// while turns run (and messages still queue up behind running turns).
	// In the kill run, a post the killed process did not take goes to the
	// survivor with the same Idempotency-Key, so a message the killed
	// process queued just before dying is not queued twice.
	var killed atomic.Bool
	var sendErrs sync.Map // conv → error
	var posted, failedOver atomic.Int64
	var senders sync.WaitGroup
	for i := range clusterConvs {
		senders.Add(1)
		go func() {
			defer senders.Done()
			for j := range clusterMessages {
				if j > 0 {
					time.Sleep(clusterModelDelay)
				}
				target := (i + j) % 2
				if killed.Load() {
					target = 1
				}
				_, err := apis[target].post(clusterConv(i), clusterText(i, j), clusterKey(i, j))
				if err != nil && kill && target == 0 {
					failedOver.Add(1)
					_, err = apis[1].post(clusterConv(i), clusterText(i, j), clusterKey(i, j))
				}
				if err != nil {
					sendErrs.Store(clusterConv(i), err)
					return
				}
				posted.Add(1)
			}
		}()
	}

	// The killer: once killAfter of the model calls were made, at a moment
	// when gateway A has turns at the model, A is killed. killed is set
	// first, so that from then on a failed request to A is expected.
	killDone := make(chan time.Time, 1)
	var postedAtKill int64
	stopKiller := make(chan struct{})
	defer func() {
		select {
		case <-stopKiller:
		default:
			close(stopKiller)
		}
	}()
	if kill {
		go func() {
			for {
				select {
				case <-stopKiller:
					killDone <- time.Time{}
					return
				case <-time.After(2 * time.Millisecond):
				}
				inFlight := time.Since(time.Unix(0, lastCallOfA.Load())) < clusterModelDelay/2
				if n := model.Count(); n >= int(killAfter*float64(clusterConvs*clusterMessages)) && inFlight {
					postedAtKill = posted.Load()
					killed.Store(true)
					gws[0].kill()
					killDone <- time.Now()
					return
				}
			}
		}()
	} else {
		killDone <- time.Time{}
	}

	// Collector: reads the timelines until every conversation has all its
	// replies. It reads from both processes in turn, from the survivor
	// once one is killed.
	total := clusterConvs * clusterMessages
	timelines := make([][]item, clusterConvs)
	finished := make([]bool, clusterConvs)
	deadline := time.Now().Add(clusterTimeout)
	for round := 0; ; round++ {
		replies, open := 0, 0
		for i := range clusterConvs {
			if finished[i] {
				replies += clusterMessages
				continue
			}
			reader := apis[(i+round)%2]
			if killed.Load() {
				reader = apis[1]
			}
			items, err := reader.timeline(clusterConv(i))
			if err != nil {
				if !killed.Load() || reader == apis[1] {
					t.Fatalf("reading the timeline of %s: %v", clusterConv(i), err)
				}
				continue
			}
			timelines[i] = items
			if len(items) > clusterMessages {
				t.Fatalf("%s has %d timeline items, more than the %d messages sent: %v", clusterConv(i), len(items), clusterMessages, items)
			}
			replies += len(items)
			if len(items) == clusterMessages {
				finished[i] = true
			} else {
				open++
			}
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			senders.Wait()
			t.Fatalf("after %s, %d of %d conversations lack replies (%d of %d replies in, %d of %d messages posted); %s",
				clusterTimeout, open, clusterConvs, replies, total, posted.Load(), total, unfinished(timelines, finished, &sendErrs))
		}
		time.Sleep(100 * time.Millisecond)
	}
	senders.Wait()
	took := time.Since(started)
	close(stopKiller)
	killedAt := <-killDone
	if kill && killedAt.IsZero() {
		t.Fatalf("the run ended before gateway A was killed")
	}
	sendErrs.Range(func(conv, err any) bool {
		t.Errorf("sending to %s: %v", conv, err)
		return true
	})

	// Every reply, once, in the order its messages were sent, a kill or
	// not: a reply the killed process had claimed for delivery holds the
	// conversation's later replies back until the survivor sent it.
	for i, items := range timelines {
		var want []string
		for j := range clusterMessages {
			want = append(want, clusterReply(i, j))
		}
		got := texts(items)
		switch {
		case len(ofKind(items, kindReply)) != len(items) || !slices.Equal(sorted(got), want):
			t.Errorf("%s: timeline %v, want the replies %q, each once", clusterConv(i), items, want)
		case !slices.Equal(got, want):
			t.Errorf("%s: timeline %v, want the replies %q in order", clusterConv(i), items, want)
		}
	}

	// Turns ran in the order the messages were sent; after a kill a turn
	// may run twice in a row (cut at the model, then run again).
	turns := map[string][]string{}
	for _, req := range model.Requests() {
		conv := req.Conversation()
		if seq := turns[conv]; len(seq) == 0 || seq[len(seq)-1] != req.LastUser() || !kill {
			turns[conv] = append(seq, req.LastUser())
		}
	}
	for i := range clusterConvs {
		var want []string
		for j := range clusterMessages {
			want = append(want, clusterText(i, j))
		}
		if got := turns[clusterModelKey(clusterConv(i))]; !slices.Equal(got, want) {
			t.Errorf("%s: the model saw the turns %q, want %q", clusterConv(i), got, want)
		}
	}

	// One turn at a time per conversation, at the model.
	overlaps := model.MaxOverlaps()
	for key, n := range overlaps {
		if n > 1 {
			t.Errorf("conversation %q had %d turns at the model at once", key, n)
		}
	}
	for i := range clusterConvs {
		if overlaps[clusterModelKey(clusterConv(i))] == 0 {
			t.Errorf("no model request named conversation %s, so overlaps cannot be told apart; the model saw the keys %v",
				clusterModelKey(clusterConv(i)), keys(overlaps))
			break
		}
	}

	calls := model.Count()
	if !kill {
		if calls != total {
			t.Errorf("the model got %d requests for %d messages", calls, total)
		}
		t.Logf("%d turns on two gateways in %s", total, took.Round(time.Millisecond))
		for _, g := range gws {
			g.stop()
		}
		return
	}
	// The survivor ran again what the killed process had at the model.
	b := gws[1].stderr.String()
	t.Logf("%d turns in %s; gateway A killed after %s with %d of %d messages posted; %d posts failed over to B; %d model calls (%d turns run again); B took over %d entries and resent %v replies",
		total, took.Round(time.Millisecond), killedAt.Sub(started).Round(time.Millisecond), postedAtKill, total,
		failedOver.Load(), calls, calls-total, strings.Count(b, "taking over an entry handed out before"),
		counter(t, gws[1], "herald_delivery_resends_total"))
	if calls <= total {
		t.Errorf("the model got %d requests for %d messages: the turns gateway A had at the model when it was killed were not run again", calls, total)
	}
	gws[1].stop()
}

// unfinished describes the conversations that lack replies, for a
// failure message.
func unfinished(timelines [][]item, finished []bool, sendErrs *sync.Map) string {
	var b strings.Builder
	shown := 0
	for i, items := range timelines {
		if finished[i] {
			continue
		}
		if shown == 5 {
			b.WriteString(" …")
			break
		}
		shown++
		fmt.Fprintf(&b, " %s has %v;", clusterConv(i), texts(items))
		if err, ok := sendErrs.Load(clusterConv(i)); ok {
			fmt.Fprintf(&b, " sending failed: %v;", err)
		}
	}
	return strings.TrimSpace(b.String())
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func keys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) > 10 {
		out = append(out[:10], "…")
	}
	return out
}

// clusterConfig is the herald.yaml of a gateway process sharing redis
// with others, in queue mode, with the test's short lease. The model
// section comes last, so a test can add keys to it.
func clusterConfig(redis *testkit.Redis, model *testkit.ModelServer) string {
	return sharedConfig(redisPlace{single: redis}, model)
}

// sharedConfig is clusterConfig on any redisPlace.
func sharedConfig(p redisPlace, model *testkit.ModelServer) string {
	return p.storeYAML() + fmt.Sprintf(`http:
  addr: 127.0.0.1:0
display:
  busy_input_mode: queue
model:
  base_url: %s
  name: %s
`, model.URL(), modelName)
}
