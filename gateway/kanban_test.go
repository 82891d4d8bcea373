package gateway

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/kanban"
)

// The gateway's dispatcher runs a card made ready in it at once, on the
// lane the config names, and its herald lane runs the worker agent.
func TestGatewayDispatchesCards(t *testing.T) {
	model := testkit.NewModelServer(t)
	var (
		mu     sync.Mutex
		models = map[string]string{} // card title → the model its worker ran on
	)
	model.Respond(func(req testkit.RecordedRequest) testkit.Step {
		if afterTool(req) {
			return testkit.Reply("reported")
		}
		if strings.Contains(req.LastUser(), "kanban board") {
			mu.Lock()
			models[strings.SplitN(req.LastUser(), "\n", 2)[0]] = req.Model
			mu.Unlock()
			return testkit.CallTools(testkit.ToolCall("kanban_complete", `{"summary":"## What I did\nwrote the notes"}`))
		}
		return testkit.Reply("echo")
	})
	cfg := testConfig(t, model)
	script := filepath.Join(t.TempDir(), "lane.sh")
	if err := os.WriteFile(script, []byte("#!/bin/bash\necho \"worked $HERALD_KANBAN_TASK\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.Kanban.Lanes = map[string]config.KanbanLane{"shell": {Command: script, ExitZeroCompletes: true}, "writer": {Model: "writer-model"}}
	h := startGateway(t, cfg, Options{})
	svc := h.g.boards
	ctx := context.Background()
	shell, _, err := svc.Create(ctx, kanban.CreateSpec{Title: "run the script", Assignee: "shell"})
	if err != nil {
		t.Fatal(err)
	}
	agent, _, err := svc.Create(ctx, kanban.CreateSpec{Title: "write the notes", Assignee: "herald"})
	if err != nil {
		t.Fatal(err)
	}
	writer, _, err := svc.Create(ctx, kanban.CreateSpec{Title: "write the docs", Assignee: "writer"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ id, want string }{{shell.ID, "worked " + shell.ID}, {agent.ID, "wrote the notes"}, {writer.ID, "wrote the notes"}} {
		var k kanban.Card
		testkit.Eventually(t, "card "+tc.id+" done", func() bool {
			k, err = svc.Store.Card(ctx, tc.id)
			return err == nil && k.Status == kanban.StatusDone
		})
		if k.Result == nil || !strings.Contains(k.Result.Summary, tc.want) {
			t.Errorf("card %s result = %+v, want %q", tc.id, k.Result, tc.want)
		}
	}
	// A lane's model is the one its worker agent runs on.
	mu.Lock()
	defer mu.Unlock()
	if m := models["Goal: write the docs"]; m != "writer-model" {
		t.Errorf("the writer lane's agent ran on %q, want writer-model (all: %v)", m, models)
	}
	if m := models["Goal: write the notes"]; m != "test-model" {
		t.Errorf("the herald lane's agent ran on %q, want the main model (all: %v)", m, models)
	}
}

// afterTool reports whether req's last message is a tool's result.
func afterTool(req testkit.RecordedRequest) bool {
	return len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Role == "tool"
}

// goalOf is the goal of a worker agent's request: its task message's
// first line.
func goalOf(req testkit.RecordedRequest) string {
	for _, m := range req.Messages {
		if m.Role == "user" && strings.HasPrefix(m.Content, "Goal: ") {
			return strings.SplitN(m.Content, "\n", 2)[0]
		}
	}
	return ""
}

// The herald lane holds its agent to the completion contract: a final
// reply that neither completes nor blocks its card is answered with one
// reminder, and an agent that then reports completes the card; one that
// still does not fails the run as a protocol violation, as a command
// lane's silent exit 0 does.
func TestGatewayHeraldLaneFollowsTheContract(t *testing.T) {
	model := testkit.NewModelServer(t)
	var (
		mu     sync.Mutex
		calls  = map[string]int{} // goal → model calls
		nudges = map[string]int{} // goal → reminders seen
	)
	model.Respond(func(req testkit.RecordedRequest) testkit.Step {
		goal := goalOf(req)
		nudged := strings.Contains(req.LastUser(), "without calling kanban_complete or kanban_block")
		mu.Lock()
		calls[goal]++
		if nudged && !afterTool(req) {
			nudges[goal]++
		}
		mu.Unlock()
		switch {
		case goal == "":
			return testkit.Reply("echo")
		case afterTool(req):
			return testkit.Reply("reported")
		case goal == "Goal: write the notes" && nudged:
			return testkit.CallTools(testkit.ToolCall("kanban_complete", `{"summary":"wrote the notes, reported"}`))
		}
		return testkit.Reply("I am done, trust me")
	})
	cfg := testConfig(t, model)
	h := startGateway(t, cfg, Options{})
	svc := h.g.boards
	ctx := context.Background()
	reminded, _, err := svc.Create(ctx, kanban.CreateSpec{Title: "write the notes", Assignee: "herald"})
	if err != nil {
		t.Fatal(err)
	}
	silent, _, err := svc.Create(ctx, kanban.CreateSpec{Title: "say nothing", Assignee: "herald", MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	var k kanban.Card
	testkit.Eventually(t, "the reminded card done", func() bool {
		k, err = svc.Store.Card(ctx, reminded.ID)
		return err == nil && k.Status == kanban.StatusDone
	})
	if k.Result == nil || k.Result.Summary != "wrote the notes, reported" {
		t.Errorf("the reminded card's result = %+v, want the one it reported", k.Result)
	}
	testkit.Eventually(t, "the silent card given up", func() bool {
		k, err = svc.Store.Card(ctx, silent.ID)
		return err == nil && k.Status == kanban.StatusBlocked
	})
	const violation = "protocol violation: the worker agent ended without calling kanban_complete or kanban_block, also after it was reminded; its last reply: I am done, trust me"
	if k.Result != nil || !strings.Contains(k.BlockReason, violation) {
		t.Errorf("the silent card = %+v; want it blocked, its reason %q", k, violation)
	}
	runs, err := svc.Store.Runs(ctx, silent.ID)
	if err != nil || len(runs) != 1 || runs[0].Outcome != kanban.OutcomeGaveUp || runs[0].Error != "crashed: "+violation {
		t.Errorf("the silent card's runs = %+v, %v; want one, given up on the violation", runs, err)
	}
	mu.Lock()
	defer mu.Unlock()
	// The reminded agent may answer its tool's result once more, unless
	// its dispatcher, finding the claim ended, stopped it first.
	if n := calls["Goal: write the notes"]; n < 2 || n > 3 || nudges["Goal: write the notes"] != 1 {
		t.Errorf("the reminded agent: %d model calls, %d reminders; want 2 or 3 calls, one reminder", n, nudges["Goal: write the notes"])
	}
	if calls["Goal: say nothing"] != 2 || nudges["Goal: say nothing"] != 1 {
		t.Errorf("the silent agent: %d model calls, %d reminders; want 2 calls, one reminder", calls["Goal: say nothing"], nudges["Goal: say nothing"])
	}
}

// /kanban in a chat creates, lists, shows and assigns cards; a chat
// subscribes with /kanban subscribe (the default set, or the kinds it
// names, checked), hears of a card that is done, approved or archived,
// and stops with /kanban unsubscribe.
func TestGatewayKanbanCommandAndNotifications(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Kanban.Enabled = false // cards stay where the commands put them
	h := startGateway(t, cfg, Options{})
	ctx := context.Background()
	h.post("kb", "/kanban subscribe done, archived")
	h.waitItem("kb", `"done" is not an event kind; the kinds are created, moved,`)
	h.post("kb", "/kanban subscribe")
	h.waitItem("kb", "This chat now hears of board default's cards: completed, blocked, gave_up, crashed, timed_out, review_requested, approved, unblocked (the default set)")
	h.post("kb", "/kanban subscribe archived")
	h.waitItem("kb", "board default's cards: archived")
	h.post("ops", "/kanban subscribe")
	h.waitItem("ops", "(the default set)")
	h.post("kb", "/kanban create write the release notes")
	created := h.waitItem("kb", "Created t_")
	id := strings.Fields(strings.TrimPrefix(created[0].Text, "Created "))[0]
	h.post("kb", "/kanban list")
	h.waitItem("kb", id+"  ready")
	h.post("kb", "/kanban assign "+id+" Writer")
	h.waitItem("kb", "is writer's now")
	h.post("kb", "/kanban show t_nothere")
	h.waitItem("kb", "no card t_nothere")
	svc := h.g.boards
	subs, err := svc.Store.Subscriptions(ctx, kanban.DefaultBoard)
	if err != nil || len(subs) != 2 {
		t.Fatalf("subscriptions = %+v, %v; want one a chat", subs, err)
	}
	k, err := svc.Claim(ctx, id, kanban.ClaimSpec{Owner: "cli", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RequestReview(ctx, id, k.Claim.Token, kanban.Result{Summary: "notes written"}, "cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Approve(ctx, id, 0, "fine", "ann"); err != nil {
		t.Fatal(err)
	}
	if got := h.waitItem("ops", "was approved: fine"); len(got) != 1 {
		t.Errorf("notifications = %+v, want one", got)
	}
	if _, err := svc.Archive(ctx, id, "ann"); err != nil {
		t.Fatal(err)
	}
	h.waitItem("kb", id+` "write the release notes" was archived`)
	h.post("kb", "/kanban unsubscribe")
	h.waitItem("kb", "This chat hears no more of board default.")
	h.post("kb", "/kanban unsubscribe")
	h.waitItem("kb", "This chat has no subscription to board default.")
	subs, err = svc.Store.Subscriptions(ctx, kanban.DefaultBoard)
	if err != nil || len(subs) != 1 || subs[0].Target != "api:ops" {
		t.Errorf("subscriptions after the unsubscribe = %+v, %v; want the other chat's", subs, err)
	}
	// The chat that asked for archived only heard of nothing else.
	for _, it := range h.waitItem("kb", id) {
		if strings.Contains(it.Text, "approved") || strings.Contains(it.Text, "waits for review") {
			t.Errorf("the archived-only chat was told %q", it.Text)
		}
	}
}

// A CLI worker is given the API's address and a token good for its
// card's claim: it reports with it, and the token does nothing for
// another card.
func TestGatewayWorkerReportsOverTheAPI(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.HTTP.APIKey = "k-board"
	dir := t.TempDir()
	script := filepath.Join(dir, "lane.sh")
	body := "#!/bin/bash\necho made here > report.md\necho \"$HERALD_KANBAN_API_URL $HERALD_KANBAN_TOKEN\" > \"" + dir + "/$HERALD_KANBAN_TASK.env\"\nwhile [ ! -e \"" + dir + "/go\" ]; do sleep 0.05; done\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.Kanban.Lanes = map[string]config.KanbanLane{"remote": {Command: script}}
	h := startGateway(t, cfg, Options{})
	svc := h.g.boards
	ctx := context.Background()
	k, _, err := svc.Create(ctx, kanban.CreateSpec{Title: "report over http", Assignee: "remote"})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := svc.Create(ctx, kanban.CreateSpec{Title: "not yours", Status: kanban.StatusTriage})
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	testkit.Eventually(t, "the worker's environment", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, k.ID+".env"))
		env = strings.Fields(string(b))
		return err == nil && len(env) == 2
	})
	if env[0] != "http://"+h.g.Addr() {
		t.Errorf("HERALD_KANBAN_API_URL = %s, want the gateway's API", env[0])
	}
	h.key = env[1]
	if code, body := h.do("POST", "/api/v1/kanban/cards/"+other.ID+"/complete", `{"summary":"x"}`); code != 403 {
		t.Errorf("another card's complete with the token: %d %s, want 403", code, body)
	}
	if code, body := h.do("POST", "/api/v1/kanban/cards/"+k.ID+"/complete", `{"summary":"reported over http","artifacts":["report.md"],"metadata":{"pr":"42"}}`); code != 200 {
		t.Fatalf("complete with the token: %d %s", code, body)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := svc.Store.Card(ctx, k.ID)
	if err != nil || got.Status != kanban.StatusDone || got.Result.Summary != "reported over http" || got.Result.Metadata["pr"] != "42" {
		t.Fatalf("card = %+v, %v", got, err)
	}
	// The artifact was promoted out of the scratch workspace, which goes
	// once the worker has ended.
	if len(got.Result.Artifacts) != 1 || !strings.HasPrefix(got.Result.Artifacts[0], filepath.Join(cfg.Home, "kanban", "artifacts", k.ID)) {
		t.Errorf("artifacts %q, want one promoted under the board home", got.Result.Artifacts)
	} else if b, err := os.ReadFile(got.Result.Artifacts[0]); err != nil || string(b) != "made here\n" {
		t.Errorf("the promoted artifact = %q, %v", b, err)
	}
	testkit.Eventually(t, "the scratch workspace removed", func() bool {
		_, err := os.Stat(filepath.Join(cfg.Home, "kanban", "work", k.ID))
		return os.IsNotExist(err)
	})
	if code, _ := h.do("POST", "/api/v1/kanban/cards/"+k.ID+"/heartbeat", `{}`); code != 409 {
		t.Errorf("a heartbeat after the claim ended: %d, want 409", code)
	}
}

// The herald lane's agent, rate limited by the model provider for ten
// minutes, requeues its card for then with no failure counted.
func TestGatewayKanbanAgentRateLimited(t *testing.T) {
	model := testkit.NewModelServer(t)
	model.Respond(func(testkit.RecordedRequest) testkit.Step { return testkit.RateLimited("600") })
	cfg := testConfig(t, model)
	cfg.Model.MaxRetries = 0
	h := startGateway(t, cfg, Options{})
	svc := h.g.boards
	ctx := context.Background()
	before := time.Now()
	k, _, err := svc.Create(ctx, kanban.CreateSpec{Title: "write the notes", Assignee: "herald"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the card's run recorded", func() bool {
		k, err = svc.Store.Card(ctx, k.ID)
		return err == nil && k.Status == kanban.StatusReady && !k.RetryAt.IsZero()
	})
	if k.Failures != 0 || k.RetryAt.Before(before.Add(590*time.Second)) || k.RetryAt.After(time.Now().Add(610*time.Second)) {
		t.Errorf("card = %+v, want ready again in about ten minutes with no failure", k)
	}
}
