package delegation_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/store/sqlite"
	"github.com/heraldgw/herald/tools"
)

// blockingModel tells of each call on started and answers when the
// call's context ends, as an HTTP call does.
type blockingModel struct{ started chan struct{} }

func (m blockingModel) Complete(ctx context.Context, _ llm.Request) (*llm.Response, error) {
	m.started <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// startRunner starts a runner named "here" of children on model, which
// tells of each completion an end made on ended.
func startRunner(t *testing.T, st delegation.Store, model llm.Client) (*delegation.Runner, chan struct{}) {
	t.Helper()
	return runnerWith(t, st, delegation.SpawnerOptions{Client: model, Model: "m"}, nil, delegation.RunnerOptions{})
}

func openStore(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestServiceCancelHere cancels a child that runs on this instance: the
// runner stops it at once, no signal goes through the store, and it
// ends cancelled, saying who cancelled it.
func TestServiceCancelHere(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	model := blockingModel{started: make(chan struct{}, 1)}
	runner, ended := startRunner(t, db.Delegations(), model)
	svc := &delegation.Service{Store: db.Delegations(), Signals: db.Signals(), Runner: runner, MaxChildren: 2, Cancelled: "cancelled from the API"}

	d, err := svc.Start(ctx, delegation.Request{Conv: "api:demo", Origin: outbox.Target{Platform: "api", Chat: "demo"}, Goal: "wait"})
	if err != nil {
		t.Fatal(err)
	}
	<-model.started // Start woke the runner: the child runs here
	_, from, err := db.Signals().SignalsAfter(ctx, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	_, stopped, err := svc.Cancel(ctx, d.ID)
	if err != nil || len(stopped) != 1 || stopped[0] != d.Children[0].ID {
		t.Fatalf("Cancel = %v, %v; want the running child stopped", stopped, err)
	}
	<-ended
	got, err := svc.Get(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Children[0]; c.Status != delegation.StatusCancelled || c.Result == nil || c.Result.Error != "cancelled from the API" {
		t.Errorf("the child ended %s (%+v), want cancelled from the API", c.Status, c.Result)
	}
	if got.Status() != delegation.StatusCancelled {
		t.Errorf("the delegation's status is %s, want cancelled", got.Status())
	}
	if sigs, _, _ := db.Signals().SignalsAfter(ctx, from, 10); len(sigs) != 0 {
		t.Errorf("a stop applied here also sent %v", sigs)
	}
}

func TestServiceStart(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	svc := &delegation.Service{Store: db.Delegations(), Signals: db.Signals(), MaxChildren: 2}
	req := delegation.Request{Conv: "api:demo", Key: "k1", Tasks: []delegation.Task{{Goal: "a"}, {Goal: "b"}}}
	first, err := svc.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.Start(ctx, req)
	if err != nil || again.ID != first.ID {
		t.Errorf("a retry with its key = %s, %v; want %s again", again.ID, err, first.ID)
	}
	req.Key = "k2"
	if _, err := svc.Start(ctx, req); !errs.Is(err, errs.Conflict) {
		t.Errorf("a dispatch past the conversation's places = %v, want Conflict", err)
	}
	if _, err := svc.Start(ctx, delegation.Request{Conv: "", Goal: "x"}); !errs.Is(err, errs.Invalid) {
		t.Errorf("no conversation = %v, want Invalid", err)
	}
	if _, _, err := svc.Cancel(ctx, "deleg_nope"); !errs.Is(err, errs.NotFound) {
		t.Errorf("Cancel of an unknown delegation = %v, want NotFound", err)
	}
}

// TestDispatchRacingTheCap is a turn's delegate_task and an out-of-turn
// dispatch arriving together at the conversation's cap: both pass the
// tool's early count, the out-of-turn one is written first, and the
// turn's commit, counting again as it writes, saves the turn with its
// dispatch ended rejected, whose completion tells the parent so with the
// places that were left. Nothing runs beyond the cap, nothing is lost.
func TestDispatchRacingTheCap(t *testing.T) {
	db := openStore(t)
	ctx := context.Background()
	const conv = "api:race"
	set, err := func() (*tools.Set, error) {
		r := tools.NewRegistry()
		if err := r.Register(delegation.Toolset, delegation.Tool(delegation.ToolOptions{Store: db.Delegations(), MaxChildren: 2})); err != nil {
			return nil, err
		}
		return r.Set([]string{delegation.Toolset})
	}()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Sessions().Append(ctx, sessions.Inbound{Conv: conv, Text: "delegate two"}); err != nil {
		t.Fatal(err)
	}
	turn, err := db.Sessions().Claim(ctx, "w1", time.Minute)
	if err != nil || turn == nil {
		t.Fatalf("Claim = %v, %v", turn, err)
	}
	tt := &tools.Turn{Conv: conv}
	res := set.Call(ctx, tt, chat.ToolCall{ID: "1", Name: delegation.ToolName, Arguments: `{"tasks":[{"goal":"a"},{"goal":"b"}]}`})
	if res.IsError || !strings.Contains(res.Content, `"status":"dispatched"`) {
		t.Fatalf("tool answered %s, want dispatched (nothing runs yet)", res.Content)
	}
	svc := &delegation.Service{Store: db.Delegations(), Signals: db.Signals(), MaxChildren: 2}
	if _, err := svc.Start(ctx, delegation.Request{Conv: conv, Goal: "from outside"}); err != nil {
		t.Fatalf("the out-of-turn dispatch: %v", err)
	}
	var writes []sessions.Write
	for _, w := range tt.Writes() {
		writes = append(writes, w)
	}
	if err := db.Sessions().Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Writes: writes, Release: true}); err != nil {
		t.Fatalf("the turn's commit: %v", err)
	}
	if n, _ := db.Delegations().Active(ctx, conv); n != 1 {
		t.Errorf("Active = %d, want 1: the out-of-turn child only", n)
	}
	d := tt.Writes()[0].(delegation.Dispatch).Delegation
	cmps, err := db.Delegations().Completions(ctx, d.ID)
	if err != nil || len(cmps) != 1 {
		t.Fatalf("Completions(%s) = %d, %v; want the refusal's one", d.ID, len(cmps), err)
	}
	text := delegation.CompletionText(cmps[0])
	for _, want := range []string{"status: rejected", "free_slots: 1", "delegation.max_concurrent_children is 2"} {
		if !strings.Contains(text, want) {
			t.Errorf("completion text %q: want %q", text, want)
		}
	}
}
