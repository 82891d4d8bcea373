package approvals_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/signals"
	"github.com/heraldgw/herald/signals/signalstest"
	"github.com/heraldgw/herald/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is an Approver on an in-memory store and a fake clock.
type rig struct {
	ap    *approvals.Approver
	store *memStore
	out   *memOutbox
	sigs  *signalstest.Log
	clk   *clock.Fake
}

type depthKey struct{}

func newRig(t *testing.T, change func(*approvals.Options)) *rig {
	t.Helper()
	r := &rig{store: newMemStore(), out: &memOutbox{}, clk: clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
	r.sigs = signalstest.NewLog(r.clk)
	opts := approvals.Options{
		Store: r.store, Outbox: r.out, Signals: r.sigs,
		Mode: approvals.ModeManual, Unattended: approvals.UnattendedDeny, SubagentApprovals: approvals.SubagentDeny,
		Depth: func(ctx context.Context) int { d, _ := ctx.Value(depthKey{}).(int); return d },
		Clock: r.clk,
	}
	if change != nil {
		change(&opts)
	}
	ap, err := approvals.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	r.ap = ap
	return r
}

var (
	chatTurn = &tools.Turn{Conv: "telegram:42", User: "telegram:7", Origin: outbox.Target{Platform: "telegram", Chat: "42"}, EntryID: "e1"}
	rmReq    = tools.ApprovalRequest{Tool: "terminal", Action: "rm -rf /", Reason: "matches the dangerous-command pattern rm", Pattern: "rm"}
)

// ask runs Ask in the background and returns its outcome's channel
// once its question was sent and it waits on the clock.
func (r *rig) ask(t *testing.T, ctx context.Context) (chan error, approvals.Approval) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.ap.Ask(ctx, chatTurn, rmReq) }()
	if err := r.clk.BlockUntil(ctx, 2); err != nil { // its deadline and its poll
		t.Fatal(err)
	}
	pending, _ := r.store.PendingApprovals(ctx, chatTurn.Conv)
	if len(pending) != 1 {
		t.Fatalf("pending %+v, want one", pending)
	}
	return done, pending[0]
}

func outcome(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Ask did not return")
		return nil
	}
}

// The question is stored with its key, asker, target and deadline on
// the clock; no answer by the deadline is a Timeout the model reads as
// a deny, and the chat is told.
func TestAskTimesOut(t *testing.T) {
	r := newRig(t, nil)
	done, a := r.ask(t, context.Background())
	if a.Key != "telegram:42/e1" || a.Asker != "telegram:7" || a.Target != chatTurn.Origin || !a.Deadline.Equal(r.clk.Now().Add(approvals.DefaultTimeout)) || a.Session != approvals.FirstSession {
		t.Errorf("approval %+v", a)
	}
	r.clk.Advance(approvals.DefaultTimeout)
	err := outcome(t, done)
	if err == nil || errs.Reason(err) != "no answer within 5m0s: treated as a deny; do not try it another way without asking" {
		t.Fatalf("Ask = %v", err)
	}
	got, _ := r.store.Approval(context.Background(), a.ID)
	if got.Decision != approvals.Timeout || got.DecidedBy != approvals.Herald {
		t.Errorf("after the timeout: %+v", got)
	}
	sent := r.out.messages()
	if len(sent) != 2 || sent[0].IdempotencyKey != "approval:"+a.ID || len(sent[0].Buttons) != 4 || sent[1].Kind != approvals.KindDecided {
		t.Errorf("sent %+v, want the question and its end", sent)
	}
}

// A decision the turn was not told of (its signal lost) is found by
// the re-read every Poll.
func TestAskReadsTheStoreAgain(t *testing.T) {
	r := newRig(t, nil)
	done, a := r.ask(t, context.Background())
	if _, err := r.store.Decide(context.Background(), a.ID, approvals.Once, "telegram:7", r.clk.Now(), ""); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(approvals.DefaultPoll)
	if err := outcome(t, done); err != nil {
		t.Fatalf("Ask = %v, want it allowed", err)
	}
}

// Answer wakes the turn at once and tells the other gateways; a
// session decision leaves a grant for the conversation's session, so the
// same pattern runs without asking.
func TestAnswerWakesAndGrants(t *testing.T) {
	r := newRig(t, nil)
	done, a := r.ask(t, context.Background())
	got, err := r.ap.Answer(context.Background(), a.ID, approvals.Session, "telegram:7", "tg-msg-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := outcome(t, done); err != nil {
		t.Fatalf("Ask = %v, want it allowed", err)
	}
	if got.MessageID != "tg-msg-1" {
		t.Errorf("message %q, want the pressed one", got.MessageID)
	}
	if s := r.sigs.Sent(); len(s) != 1 || s[0].Kind != approvals.SignalDecided || s[0].Target != a.ID || s[0].Conv != a.Conv {
		t.Errorf("signals %+v", s)
	}
	sent := r.out.messages()
	if last := sent[len(sent)-1]; last.Edits != "tg-msg-1" || !strings.Contains(last.Text, "Allowed for this session by telegram:7") {
		t.Errorf("the decision's line %+v", last)
	}
	if err := r.ap.Ask(context.Background(), chatTurn, rmReq); err != nil {
		t.Errorf("the same pattern in the same session: %v", err)
	}
	if _, err := r.ap.Answer(context.Background(), a.ID, approvals.Deny, "telegram:7", ""); !approvals.IsDecided(err) {
		t.Errorf("a second answer: %v, want Conflict", err)
	}
}

// Another gateway's decision wakes the turn through its signal.
func TestSignalWakes(t *testing.T) {
	r := newRig(t, nil)
	done, a := r.ask(t, context.Background())
	if _, err := r.store.Decide(context.Background(), a.ID, approvals.Deny, "telegram:7", r.clk.Now(), ""); err != nil {
		t.Fatal(err)
	}
	r.ap.HandleSignal(signals.Signal{Kind: approvals.SignalDecided, Target: a.ID, Conv: a.Conv})
	if err := outcome(t, done); err == nil || !strings.HasPrefix(errs.Reason(err), "denied by telegram:7") {
		t.Fatalf("Ask = %v, want the denial", err)
	}
}

// A stopped turn returns at once; its question expires.
func TestAskStopped(t *testing.T) {
	r := newRig(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done, a := r.ask(t, ctx)
	cancel()
	if err := outcome(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ask = %v, want the context's end", err)
	}
	got, _ := r.store.Approval(context.Background(), a.ID)
	if got.Decision != approvals.Expired {
		t.Errorf("after the stop: %+v", got)
	}
	if r.ap.Waiting() != 0 {
		t.Errorf("%d turns still waiting", r.ap.Waiting())
	}
}

// What is decided without asking.
func TestAskWithoutAsking(t *testing.T) {
	cron := &tools.Turn{Conv: "cron:job_1:run_1"}
	sub := context.WithValue(context.Background(), depthKey{}, 1)
	tests := []struct {
		desc    string
		change  func(*approvals.Options)
		ctx     context.Context
		turn    *tools.Turn
		req     tools.ApprovalRequest
		wantErr string // "" runs
	}{
		{desc: "a command that matched nothing", req: tools.ApprovalRequest{Tool: "terminal", Action: "ls"}},
		{desc: "approvals.deny, whatever else", change: func(o *approvals.Options) { o.Mode, o.Deny = approvals.ModeOff, []string{`^ls`} },
			req: tools.ApprovalRequest{Tool: "terminal", Action: "ls"}, wantErr: "refused: the command matches approvals.deny (pattern ^ls)"},
		{desc: "approvals.deny is for commands", change: func(o *approvals.Options) { o.Deny = []string{`x`} },
			req: tools.ApprovalRequest{Tool: "mcp_x", Action: "{}"}},
		{desc: "mode off", change: func(o *approvals.Options) { o.Mode = approvals.ModeOff }, req: rmReq},
		{desc: "a cron fire", turn: cron, req: rmReq, wantErr: "this is a scheduled job's run, with nobody to ask and approvals.unattended is deny"},
		{desc: "a cron fire, unattended allow", change: func(o *approvals.Options) { o.Unattended = approvals.UnattendedAllow }, turn: cron, req: rmReq},
		{desc: "a sub-agent", ctx: sub, req: rmReq, wantErr: "this is a sub-agent, with nobody to ask"},
		{desc: "a sub-agent with auto-approve", change: func(o *approvals.Options) { o.SubagentAutoApprove = true }, ctx: sub, req: rmReq},
		{desc: "no chat to ask in", turn: &tools.Turn{Conv: "x:1"}, req: rmReq, wantErr: "this turn has no chat to ask in"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := newRig(t, tc.change)
			ctx, turn := tc.ctx, tc.turn
			if ctx == nil {
				ctx = context.Background()
			}
			if turn == nil {
				turn = chatTurn
			}
			err := r.ap.Ask(ctx, turn, tc.req)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Ask = %v, want it run", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(errs.Reason(err), tc.wantErr)):
				t.Errorf("Ask = %v, want %q", err, tc.wantErr)
			}
			if n := len(r.out.messages()); n != 0 {
				t.Errorf("%d messages sent, want none", n)
			}
		})
	}
}

// Who may answer: the asker, an admin, and anyone in the conversation
// when nobody is named.
func TestMayAnswer(t *testing.T) {
	r := newRig(t, func(o *approvals.Options) { o.Admins = []string{"slack:boss"} })
	asked := approvals.Approval{Conv: "slack:C1", Asker: "slack:U1"}
	open := approvals.Approval{Conv: "api:x"}
	for _, tc := range []struct {
		desc       string
		a          approvals.Approval
		user, conv string
		want       bool
	}{
		{"the asker", asked, "slack:U1", "slack:C1", true},
		{"the asker elsewhere", asked, "slack:U1", "slack:D1", true},
		{"a stranger", asked, "slack:U2", "slack:C1", false},
		{"an admin", asked, "slack:boss", "slack:C1", true},
		{"nobody named, in its conversation", open, "api:api", "api:x", true},
		{"nobody named, elsewhere", open, "api:api", "api:y", false},
	} {
		if got := r.ap.MayAnswer(tc.a, tc.user, tc.conv); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.desc, got, tc.want)
		}
	}
}

// An approval is keyed by the asking turn: the same turn asking again
// (run again after a restart, its model naming the call anew) expires
// its earlier question; sub-agents asking their parent conversation's
// person do not expire each other's, nor the conversation's own, though
// their entries share an id.
func TestAskAgainExpiresTheEarlier(t *testing.T) {
	parent := approvals.Parent{Conv: chatTurn.Conv, User: chatTurn.User, Origin: chatTurn.Origin}
	r := newRig(t, func(o *approvals.Options) {
		o.SubagentApprovals = approvals.SubagentAsk
		o.Parent = func(context.Context) (approvals.Parent, bool) { return parent, true }
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := context.WithValue(ctx, depthKey{}, 1)
	var dones []chan error
	ask := func(ctx context.Context, turn *tools.Turn) []approvals.Approval {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- r.ap.Ask(ctx, turn, rmReq) }()
		dones = append(dones, done)
		if err := r.clk.BlockUntil(ctx, 2*len(dones)); err != nil { // each one's deadline and poll
			t.Fatal(err)
		}
		pending, _ := r.store.PendingApprovals(ctx, chatTurn.Conv)
		return pending
	}
	first := ask(ctx, chatTurn)
	ask(sub, &tools.Turn{Conv: "subagent:a", EntryID: chatTurn.EntryID})
	if got := ask(sub, &tools.Turn{Conv: "subagent:b", EntryID: chatTurn.EntryID}); len(got) != 3 {
		t.Fatalf("pending %+v, want the three questions", got)
	}
	again := ask(ctx, chatTurn)
	if len(again) != 3 || slices.ContainsFunc(again, func(a approvals.Approval) bool { return a.ID == first[0].ID }) {
		t.Errorf("pending after the turn asked again: %+v, want three, %s not among them", again, first[0].ID)
	}
	if got, _ := r.store.Approval(ctx, first[0].ID); got.Decision != approvals.Expired {
		t.Errorf("the earlier question: %+v, want it expired", got)
	}
	cancel()
	for _, done := range dones {
		outcome(t, done)
	}
}
