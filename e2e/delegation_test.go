package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
)

// The texts the scripted model and the tests share.
const (
	askDelegate   = "please delegate"
	dispatchedAck = "dispatched; I will report back"
	resultsHeader = "[Background results"
	gotResults    = "got the results"
)

// isChild reports whether req is a sub-agent's: its system prompt says
// so.
func isChild(req testkit.RecordedRequest) bool {
	return len(req.Messages) > 0 && req.Messages[0].Role == "system" && strings.Contains(req.Messages[0].Content, "You are a sub-agent")
}

// delegatingModel answers a parent asked to delegate with a
// delegate_task call of goals, the tool's result with dispatchedAck, a
// completion with gotResults, and each child with child(goal).
func delegatingModel(goals []string, child func(goal string) testkit.Step) testkit.Responder {
	return func(req testkit.RecordedRequest) testkit.Step {
		if isChild(req) {
			goal := strings.TrimPrefix(strings.SplitN(req.LastUser(), "\n", 2)[0], "Goal: ")
			return child(goal)
		}
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == "tool":
			return testkit.Step{Text: dispatchedAck + " " + last.Content}
		case strings.HasPrefix(req.LastUser(), resultsHeader):
			return testkit.Step{Text: gotResults}
		case strings.HasPrefix(req.LastUser(), "control "):
			// "control ACTION ID [MESSAGE]": a delegate_task control call.
			f := strings.SplitN(req.LastUser(), " ", 4)
			args := map[string]string{"action": f[1], "subagent_id": f[2]}
			if len(f) == 4 {
				args["message"] = f[3]
			}
			b, _ := json.Marshal(args)
			return testkit.Step{ToolCalls: []testkit.ModelToolCall{testkit.ToolCall("delegate_task", string(b))}}
		case req.LastUser() == askDelegate:
			tasks := make([]map[string]string, len(goals))
			for i, g := range goals {
				tasks[i] = map[string]string{"goal": g}
			}
			args, _ := json.Marshal(map[string]any{"tasks": tasks})
			return testkit.Step{ToolCalls: []testkit.ModelToolCall{testkit.ToolCall("delegate_task", string(args))}}
		}
		return testkit.Step{Text: "echo: " + req.LastUser()}
	}
}

// completionOf returns the completion message the parent's model saw,
// and how many requests carried one as their newest user message.
func completionOf(model *testkit.ModelServer) (string, int) {
	var text string
	n := 0
	for _, req := range model.Requests() {
		if !isChild(req) && strings.HasPrefix(req.LastUser(), resultsHeader) {
			text = req.LastUser()
			n++
		}
	}
	return text, n
}

func TestDelegationResultsComeBackAsATurn(t *testing.T) {
	t.Parallel()
	model := testkit.NewModelServer(t)
	model.Respond(delegatingModel([]string{"count the apples", "count the pears"}, func(goal string) testkit.Step {
		return testkit.Step{Text: "## What I found\n" + goal + ": 3"}
	}))
	cfg := baseConfig(t, model)
	cfg.Display.BusyInputMode = config.BusyInputQueue // each message its own turn
	gw := startInProcess(t, cfg)
	api := gw.api()

	api.mustPost(t, "d", "hello first")
	api.mustPost(t, "d", askDelegate)
	items := api.waitTimeline(t, "d", 3)
	replies := texts(ofKind(items, kindReply))
	if len(replies) < 3 || !strings.HasPrefix(replies[1], dispatchedAck) || replies[2] != gotResults {
		t.Fatalf("replies %q: want the echo, the dispatch's acknowledgement, then the answer to the results", replies)
	}
	var res struct {
		Status       string   `json:"status"`
		DelegationID string   `json:"delegation_id"`
		ChildIDs     []string `json:"subagent_ids"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(replies[1], dispatchedAck+" ")), &res); err != nil || res.Status != "dispatched" || len(res.ChildIDs) != 2 || !strings.HasPrefix(res.DelegationID, "deleg_") {
		t.Fatalf("the tool's result %q (%v): want dispatched with a delegation id and two sub-agents", replies[1], err)
	}
	text, n := completionOf(model)
	if n != 1 {
		t.Errorf("the completion reached the parent's model %d times, want once", n)
	}
	apples, pears := strings.Index(text, "count the apples: 3"), strings.Index(text, "count the pears: 3")
	if apples < 0 || pears < 0 || apples > pears || strings.Count(text, "status: completed") != 2 {
		t.Errorf("completion %q: want both summaries verbatim, completed, in task order", text)
	}
	for _, req := range model.Requests() {
		if !isChild(req) {
			continue
		}
		var tools []string
		for _, tl := range req.Tools {
			tools = append(tools, tl.Name)
		}
		for _, blocked := range []string{"delegate_task", "clarify", "memory", "send_message"} {
			if slices.Contains(tools, blocked) {
				t.Errorf("a child was offered %s (tools %v)", blocked, tools)
			}
		}
		for _, m := range req.Messages {
			if strings.Contains(m.Content, "hello first") || strings.Contains(m.Content, askDelegate) {
				t.Errorf("a child saw the parent's history: %s", describe(req))
			}
		}
	}
}

func TestDelegationBatchOverTheCapRunsNothing(t *testing.T) {
	t.Parallel()
	model := testkit.NewModelServer(t)
	goals := make([]string, 11)
	for i := range goals {
		goals[i] = fmt.Sprintf("task %d", i)
	}
	model.Respond(delegatingModel(goals, func(string) testkit.Step { return testkit.Step{Text: "done"} }))
	gw := startInProcess(t, baseConfig(t, model))
	api := gw.api()
	api.mustPost(t, "cap", askDelegate)
	items := api.waitTimeline(t, "cap", 1)
	reply := texts(ofKind(items, kindReply))[0]
	if !strings.Contains(reply, "max_concurrent_children") || !strings.Contains(reply, "nothing was started") {
		t.Errorf("reply %q: want the tool's refusal naming delegation.max_concurrent_children", reply)
	}
	for _, req := range model.Requests() {
		if isChild(req) {
			t.Fatalf("a child ran: %s", describe(req))
		}
	}
}

// TestKilledWhileChildrenRunDeliversOnce kills the gateway (SIGKILL)
// while one child has finished and the other still runs; the restarted
// gateway ends the running one unknown, once its owner's claim ran out,
// and the delegation's completion reaches the parent once, holding both.
func TestKilledWhileChildrenRunDeliversOnce(t *testing.T) {
	t.Parallel()
	model := testkit.NewModelServer(t)
	held := testkit.NewGate()
	t.Cleanup(held.Release)
	model.Respond(delegatingModel([]string{"quick", "slow"}, func(goal string) testkit.Step {
		if goal == "slow" {
			return testkit.Hang(held)
		}
		return testkit.Step{Text: "quick is done"}
	}))
	home := t.TempDir()
	writeConfig(t, home, fmt.Sprintf(`
store:
  lease_ttl: %s
http:
  addr: 127.0.0.1:0
model:
  base_url: %s
  name: %s
delegation:
  owner_ttl: 3s
`, leaseTTL, model.URL(), modelName))

	first := startChild(t, "gateway", home)
	first.api().mustPost(t, "k", askDelegate)
	first.api().waitTimeline(t, "k", 1)
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		return held.Waiting() == 1 && strings.Contains(first.stderr.String(), `"status":"completed"`),
			"the slow child never started, or the quick one never ended"
	})
	first.kill()
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		return held.Waiting() == 0, "the killed process's model request is still open"
	})

	restarted := startChild(t, "restarted gateway", home)
	items := restarted.api().settledTimeline(t, "k", 2)
	replies := texts(ofKind(items, kindReply))
	if len(replies) != 2 || replies[1] != gotResults {
		t.Fatalf("replies %q: want the dispatch's acknowledgement, then the answer to the results", replies)
	}
	text, n := completionOf(model)
	if n != 1 {
		t.Errorf("the completion reached the parent's model %d times, want once", n)
	}
	if !strings.Contains(text, "quick is done") || !strings.Contains(text, "status: unknown") || !strings.Contains(text, "owner exited before recording a result") {
		t.Errorf("completion %q: want the quick child's summary and the slow one unknown", text)
	}
	restarted.stop()
}

// TestTwoGatewaysOwnerKilledDeliversUnknownOnce runs two gateways on one
// redis-server; the one that owns the running child is SIGKILLed, and the
// other ends the child unknown and delivers the completion, once.
func TestTwoGatewaysOwnerKilledDeliversUnknownOnce(t *testing.T) {
	t.Parallel()
	redis := testkit.StartRedis(t)
	model := testkit.NewModelServer(t)
	held := testkit.NewGate()
	t.Cleanup(held.Release)
	model.Respond(delegatingModel([]string{"quick", "slow"}, func(goal string) testkit.Step {
		if goal == "slow" {
			return testkit.Hang(held)
		}
		return testkit.Step{Text: "quick is done"}
	}))
	cfg := clusterConfig(redis, model) + `
delegation:
  owner_ttl: 3s
`
	var gws [2]*child
	for k, name := range []string{"gateway A", "gateway B"} {
		home := t.TempDir()
		writeConfig(t, home, cfg)
		gws[k] = startChild(t, name, home)
	}
	gws[0].api().mustPost(t, "k", askDelegate)
	// Which process runs the slow child (task 1) is up to their claims.
	owner := -1
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		for k, gw := range gws {
			for _, line := range strings.Split(gw.stderr.String(), "\n") {
				if strings.Contains(line, "sub-agent started") && strings.Contains(line, `"index":1`) {
					owner = k
				}
			}
		}
		return owner >= 0 && held.Waiting() == 1, "the slow child never started"
	})
	survivor := gws[1-owner]
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		items, _ := survivor.api().timeline("k")
		return len(ofKind(items, kindReply)) == 1, "the dispatch was never acknowledged"
	})
	gws[owner].kill()

	items := survivor.api().settledTimeline(t, "k", 2)
	replies := texts(ofKind(items, kindReply))
	if len(replies) != 2 || replies[1] != gotResults {
		t.Fatalf("replies %q: want the dispatch's acknowledgement, then the answer to the results", replies)
	}
	text, n := completionOf(model)
	if n != 1 {
		t.Errorf("the completion reached the parent's model %d times, want once", n)
	}
	if !strings.Contains(text, "quick is done") || !strings.Contains(text, "status: unknown") {
		t.Errorf("completion %q: want the quick child's summary and the slow one unknown", text)
	}
	survivor.stop()
}

// dispatched reads the sub-agent ids from the acknowledgement of a
// dispatch (the tool's result, which the scripted model echoes).
func dispatched(t *testing.T, reply string) []string {
	t.Helper()
	var res struct {
		Status   string   `json:"status"`
		ChildIDs []string `json:"subagent_ids"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(reply, dispatchedAck+" ")), &res); err != nil || res.Status != "dispatched" {
		t.Fatalf("acknowledgement %q (%v): want a dispatch", reply, err)
	}
	return res.ChildIDs
}

// heldChildren is an in-process gateway whose children named "slow"
// hang until released (or stopped), the others answer at once.
func heldChildren(t *testing.T, goals []string, change func(*config.Config)) (*testkit.ModelServer, *testkit.Gate, *inProcess, *apiClient) {
	t.Helper()
	model := testkit.NewModelServer(t)
	held := testkit.NewGate()
	t.Cleanup(held.Release)
	model.Respond(delegatingModel(goals, func(goal string) testkit.Step {
		if strings.HasPrefix(goal, "slow") {
			return testkit.Hang(held)
		}
		return testkit.Step{Text: goal + " is done"}
	}))
	cfg := baseConfig(t, model)
	cfg.Display.BusyInputMode = config.BusyInputQueue // each message its own turn
	if change != nil {
		change(&cfg)
	}
	gw := startInProcess(t, cfg)
	return model, held, gw, gw.api()
}

func TestAgentsAndControl(t *testing.T) {
	t.Parallel()
	_, held, gw, api := heldChildren(t, []string{"slow one", "quick one"}, nil)
	api.mustPost(t, "ctl", askDelegate)
	ids := dispatched(t, texts(ofKind(api.waitTimeline(t, "ctl", 1), kindReply))[0])
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) { return held.Waiting() == 1, "the slow child never started" })
	// /agents answers from the store: ask once the quick child's end is
	// recorded.
	gw.waitLog(`"msg":"sub-agent ended","part":"delegation","subagent":"` + ids[1] + `","status":"completed"`)

	api.mustPost(t, "ctl", "/agents")
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		items, _ := api.timeline("ctl")
		cmds := ofKind(items, kindCommand)
		if len(cmds) == 0 {
			return false, "no answer to /agents"
		}
		a := cmds[len(cmds)-1].Text
		return strings.Contains(a, ids[0]+" running") && strings.Contains(a, ids[1]+" completed") && strings.Contains(a, "1 of 2 done"),
			"/agents answered " + a
	})

	api.mustPost(t, "ctl", "/status")
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		items, _ := api.timeline("ctl")
		cmds := ofKind(items, kindCommand)
		a := cmds[len(cmds)-1].Text
		return strings.Contains(a, "Background: 2 sub-agents (1 running)"), "/status answered " + a
	})

	// Another conversation cannot reach this one's sub-agent.
	api.mustPost(t, "other", "control stop "+ids[0])
	other := texts(ofKind(api.waitTimeline(t, "other", 1), kindReply))[0]
	if !strings.Contains(other, "no sub-agent") || !strings.Contains(other, "in this conversation") {
		t.Errorf("another conversation's stop answered %q: want not found", other)
	}
	if held.Waiting() != 1 {
		t.Fatalf("another conversation's stop reached the child")
	}

	// A steer reaches the running child; the stop ends it, its partial
	// result delivered as usual.
	api.mustPost(t, "ctl", "control steer "+ids[0]+" hurry up")
	api.mustPost(t, "ctl", "control stop "+ids[0])
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) { return held.Waiting() == 0, "the stopped child still runs" })
	items := api.waitTimeline(t, "ctl", 5)
	replies := texts(ofKind(items, kindReply))
	if !slices.ContainsFunc(replies, func(r string) bool { return strings.Contains(r, `"status":"steered"`) }) ||
		!slices.ContainsFunc(replies, func(r string) bool { return strings.Contains(r, `"status":"stopping"`) }) {
		t.Errorf("replies %q: want the steer and the stop acknowledged", replies)
	}
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		items, _ := api.timeline("ctl")
		r := texts(ofKind(items, kindReply))
		return len(r) > 0 && r[len(r)-1] == gotResults, "the stopped delegation's results never came back"
	})
	// After the end, control is rejected.
	api.mustPost(t, "ctl", "control stop "+ids[1])
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		items, _ := api.timeline("ctl")
		r := texts(ofKind(items, kindReply))
		return strings.Contains(r[len(r)-1], `"status":"rejected"`), "a stop after the end answered " + r[len(r)-1]
	})
}

func TestStopInterruptsChildrenAndGrandchildren(t *testing.T) {
	t.Parallel()
	model := testkit.NewModelServer(t)
	held := testkit.NewGate()
	t.Cleanup(held.Release)
	model.Respond(func(req testkit.RecordedRequest) testkit.Step {
		switch {
		case isChild(req) && strings.Contains(req.LastUser(), "Goal: orchestrate"):
			args := `{"tasks":[{"goal":"grandchild work"}]}`
			return testkit.Step{ToolCalls: []testkit.ModelToolCall{testkit.ToolCall("delegate_task", args)}}
		case isChild(req):
			return testkit.Hang(held)
		case req.Messages[len(req.Messages)-1].Role == "tool":
			return testkit.Step{Text: dispatchedAck}
		case strings.HasPrefix(req.LastUser(), resultsHeader):
			return testkit.Step{Text: gotResults}
		}
		return testkit.Step{ToolCalls: []testkit.ModelToolCall{testkit.ToolCall("delegate_task", `{"goal":"orchestrate","role":"orchestrator"}`)}}
	})
	cfg := baseConfig(t, model)
	cfg.Delegation.MaxSpawnDepth = 2
	cfg.Delegation.OwnerTTL = 3 * time.Second // progress recorded every second
	gw := startInProcess(t, cfg)
	api := gw.api()
	api.mustPost(t, "gc", "go")
	api.waitTimeline(t, "gc", 1)
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) { return held.Waiting() == 1, "the grandchild never started" })
	// The orchestrator's worker is seen through it.
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		api.mustPost(t, "gc", "/agents")
		items, _ := api.timeline("gc")
		cmds := texts(ofKind(items, kindCommand))
		return slices.ContainsFunc(cmds, func(a string) bool { return strings.Contains(a, "running — grandchild work") }),
			fmt.Sprintf("/agents answered %q", cmds)
	})
	api.mustPost(t, "gc", "/stop")
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) { return held.Waiting() == 0, "the grandchild still runs after /stop" })
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		text, n := completionOf(model)
		return n == 1 && strings.Contains(text, "status: interrupted"), "no interrupted completion: " + text
	})
}

func TestCompletionForAConversationStartedAnewIsANotice(t *testing.T) {
	t.Parallel()
	model, held, _, api := heldChildren(t, []string{"slow task"}, nil)
	api.mustPost(t, "anew", askDelegate)
	api.waitTimeline(t, "anew", 1)
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) { return held.Waiting() == 1, "the child never started" })
	api.mustPost(t, "anew", "/new")
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		items, _ := api.timeline("anew")
		for _, it := range items {
			if it.Kind == "completion" && strings.Contains(it.Text, "started anew") && strings.Contains(it.Text, "status: interrupted") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no completion notice in %v", items)
	})
	if _, n := completionOf(model); n != 0 {
		t.Errorf("the completion ran as a turn of the new session %d times, want none", n)
	}
}

func TestBackgroundAndReview(t *testing.T) {
	t.Parallel()
	model := testkit.NewModelServer(t)
	model.Respond(func(req testkit.RecordedRequest) testkit.Step {
		switch {
		case isChild(req) && strings.Contains(req.LastUser(), "Review the work"):
			return testkit.Step{Text: "the review: all good"}
		case isChild(req):
			return testkit.Step{Text: "the stars: 7"}
		case strings.HasPrefix(req.LastUser(), resultsHeader):
			return testkit.Step{Text: gotResults}
		}
		return testkit.Step{Text: "echo: " + req.LastUser()}
	})
	gw := startInProcess(t, baseConfig(t, model))
	api := gw.api()
	api.mustPost(t, "bg", "the plan is to count")
	api.waitTimeline(t, "bg", 1)
	api.mustPost(t, "bg", "/background count the stars")
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		text, n := completionOf(model)
		return n == 1 && strings.Contains(text, "the stars: 7"), "no completion of /background: " + text
	})
	api.mustPost(t, "bg", "/review the counting")
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		text, n := completionOf(model)
		return n == 2 && strings.Contains(text, "the review: all good"), "no completion of /review: " + text
	})
	var review testkit.RecordedRequest
	for _, req := range model.Requests() {
		if isChild(req) && strings.Contains(req.LastUser(), "Review the work") {
			review = req
		}
	}
	if !strings.Contains(review.LastUser(), "Focus on: the counting") || !strings.Contains(review.LastUser(), "the plan is to count") {
		t.Errorf("the reviewer's task %q: want the focus and the conversation's messages", review.LastUser())
	}
	items := api.waitTimeline(t, "bg", 5)
	cmds := texts(ofKind(items, kindCommand))
	if len(cmds) != 2 || !strings.HasPrefix(cmds[0], "Started in the background") || !strings.HasPrefix(cmds[1], "Review started") {
		t.Errorf("command answers %q: want both started at once", cmds)
	}
}

func TestDispatchAtCapacityIsRejected(t *testing.T) {
	t.Parallel()
	_, held, _, api := heldChildren(t, []string{"slow a", "slow b"}, func(c *config.Config) { c.Delegation.MaxConcurrentChildren = 3 })
	api.mustPost(t, "full", askDelegate)
	api.waitTimeline(t, "full", 1)
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) { return held.Waiting() == 2, "the children never started" })
	api.mustPost(t, "full", askDelegate)
	items := api.waitTimeline(t, "full", 2)
	second := texts(ofKind(items, kindReply))[1]
	if !strings.Contains(second, `"status":"rejected"`) || !strings.Contains(second, `"free_slots":1`) {
		t.Errorf("second dispatch answered %q: want rejected with 1 free slot", second)
	}
}

func TestTranscriptsAreWrittenAndRedacted(t *testing.T) {
	t.Parallel()
	const secret = "sk-transcript-secret-123456"
	model := testkit.NewModelServer(t)
	model.Respond(delegatingModel([]string{"leak"}, func(string) testkit.Step {
		return testkit.Step{Text: "the key is " + secret}
	}))
	cfg := baseConfig(t, model)
	cfg.Model.APIKey = secret
	gw := startInProcess(t, cfg)
	api := gw.api()
	api.mustPost(t, "tr", askDelegate)
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) { _, n := completionOf(model); return n == 1, "no completion" })
	dirs, err := filepath.Glob(filepath.Join(cfg.Home, "cache", "delegation", "live", "deleg_*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("transcript directories %v (%v): want one", dirs, err)
	}
	log, err := os.ReadFile(filepath.Join(dirs[0], "task-0.log"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], "manifest.json")); err != nil {
		t.Errorf("no manifest: %v", err)
	}
	if strings.Contains(string(log), secret) || !strings.Contains(string(log), "ended completed") || !strings.Contains(string(log), "the key is") {
		t.Errorf("transcript:\n%s\nwant the child's text with the secret masked and its end", log)
	}
}

// TestStoppedTurnsDispatchIsStopped stops a turn after it dispatched:
// its children, committed with the stopped turn, are stopped too, and
// their completion still comes back.
func TestStoppedTurnsDispatchIsStopped(t *testing.T) {
	t.Parallel()
	model := testkit.NewModelServer(t)
	held := testkit.NewGate()
	t.Cleanup(held.Release)
	model.Respond(func(req testkit.RecordedRequest) testkit.Step {
		switch {
		case isChild(req):
			// Should the runner's poll claim it before the stop, it is
			// stopped running.
			return testkit.Hang(held)
		case strings.HasPrefix(req.LastUser(), resultsHeader):
			return testkit.Step{Text: gotResults}
		case req.Messages[len(req.Messages)-1].Role == "tool":
			return testkit.Hang(held)
		}
		return testkit.Step{ToolCalls: []testkit.ModelToolCall{testkit.ToolCall("delegate_task", `{"goal":"never run"}`)}}
	})
	gw := startInProcess(t, baseConfig(t, model))
	api := gw.api()
	api.mustPost(t, "st", "go")
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) { return held.Waiting() >= 1, "the turn never got past its dispatch" })
	api.mustPost(t, "st", "/stop")
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		text, n := completionOf(model)
		return n == 1 && strings.Contains(text, "status: interrupted"), "no interrupted completion: " + text
	})
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) { return held.Waiting() == 0, "something still runs after /stop" })
}

// TestStopSaysWhatItStops: /stop in a conversation whose turn has
// ended but whose sub-agent runs says it stops the sub-agent (not that
// nothing runs), and it does.
func TestStopSaysWhatItStops(t *testing.T) {
	t.Parallel()
	model, held, _, api := heldChildren(t, []string{"slow one"}, nil)
	api.mustPost(t, "sw", askDelegate)
	ids := dispatched(t, texts(ofKind(api.waitTimeline(t, "sw", 1), kindReply))[0])
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) { return held.Waiting() == 1, "the slow child never started" })
	api.mustPost(t, "sw", "/stop")
	want := "No turn is running; stopping 1 background sub-agent (" + ids[0] + ")."
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		items, _ := api.timeline("sw")
		cmds := texts(ofKind(items, kindCommand))
		return slices.Contains(cmds, want), fmt.Sprintf("/stop answered %q, want %q", cmds, want)
	})
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		text, n := completionOf(model)
		return n == 1 && strings.Contains(text, "status: interrupted"), "no interrupted completion: " + text
	})
}
