package delegation_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/outbox"
)

// statusBatch dispatches a batch of three children into s and claims
// them; end ends the next one and returns the delegation as it stands.
func statusBatch(t *testing.T, s stores) (end func() delegation.Delegation) {
	t.Helper()
	ctx := context.Background()
	d := delegation.Delegation{ID: "deleg_1", Conv: "slack:C1", Origin: outbox.Target{Platform: "slack", Chat: "C1"}, Source: "tool"}
	for i := range 3 {
		d.Children = append(d.Children, delegation.Child{ID: "sub_" + string(rune('a'+i)), Delegation: d.ID, Index: i, Task: delegation.Task{Goal: "g"}})
	}
	st := s.dlg
	if err := st.Create(ctx, delegation.Dispatch{Delegation: d}); err != nil {
		t.Fatal(err)
	}
	_, claims, err := st.Claim(ctx, "w", 3, time.Minute)
	if err != nil || len(claims) != 3 {
		t.Fatalf("Claim = %d, %v", len(claims), err)
	}
	return func() delegation.Delegation {
		t.Helper()
		if _, err := st.End(ctx, claims[0], delegation.Result{Status: delegation.StatusCompleted}); err != nil {
			t.Fatal(err)
		}
		claims = claims[1:]
		got, err := st.Delegation(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
}

// presenceCall is one status call a presenceAdapter got: post (a new
// status line), edit or clear.
type presenceCall struct {
	kind string
	id   string // the status line's
	text string
}

// presenceAdapter is an adapter that shows presence and records its
// status calls; a posted line gets the id "s1", "s2", …, after status,
// when set, answered.
type presenceAdapter struct {
	status func(ctx context.Context, id, text string) error

	mu    sync.Mutex
	calls []presenceCall
	posts int
}

var (
	_ adapters.Adapter  = (*presenceAdapter)(nil)
	_ adapters.Presence = (*presenceAdapter)(nil)
)

func (p *presenceAdapter) Platform() string { return "slack" }

func (p *presenceAdapter) Run(ctx context.Context, _ adapters.Inbox) error {
	<-ctx.Done()
	return nil
}

func (p *presenceAdapter) Send(context.Context, outbox.Message) adapters.SendResult {
	return adapters.SendResult{Outcome: adapters.Accepted}
}

func (p *presenceAdapter) Typing(context.Context, outbox.Target) error { return nil }

func (p *presenceAdapter) Status(ctx context.Context, _ outbox.Target, id, text string) (string, error) {
	kind := "edit"
	if id == "" {
		kind = "post"
	}
	p.record(presenceCall{kind: kind, id: id, text: text})
	if p.status != nil {
		if err := p.status(ctx, id, text); err != nil {
			return "", err
		}
	}
	if id != "" {
		return id, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts++
	return fmt.Sprintf("s%d", p.posts), nil
}

func (p *presenceAdapter) ClearStatus(_ context.Context, _ outbox.Target, id string) error {
	p.record(presenceCall{kind: "clear", id: id})
	return nil
}

func (p *presenceAdapter) record(c presenceCall) {
	p.mu.Lock()
	p.calls = append(p.calls, c)
	p.mu.Unlock()
}

func presenceCalls(pa *presenceAdapter) []presenceCall {
	pa.mu.Lock()
	defer pa.mu.Unlock()
	return append([]presenceCall(nil), pa.calls...)
}

func statusLine(s stores, pa *presenceAdapter, owner string) func(context.Context, delegation.Delegation) {
	return delegation.StatusLines(delegation.StatusLinesOptions{
		Adapters: []adapters.Adapter{pa}, Meta: s.meta, Once: s.once, Read: s.dlg.Delegation, Owner: owner, Logger: slog.Default(),
	})
}

func TestStatusLine(t *testing.T) {
	eachStore(t, func(t *testing.T, s stores) {
		ctx := context.Background()
		pa := &presenceAdapter{}
		end := statusBatch(t, s)
		// Two instances end children in turn: the line is one, edited.
		for i := range 3 {
			statusLine(s, pa, []string{"a", "b"}[i%2])(ctx, end())
		}
		want := []presenceCall{
			{kind: "post", text: "Background: 1 of 3 sub-agents done"},
			{kind: "edit", id: "s1", text: "Background: 2 of 3 sub-agents done"},
			{kind: "clear", id: "s1"},
		}
		if diff := cmp.Diff(want, presenceCalls(pa), cmp.AllowUnexported(presenceCall{})); diff != "" {
			t.Errorf("presence calls (-want +got):\n%s", diff)
		}
		meta, err := s.meta.Meta(ctx, "slack:C1")
		if err != nil || meta[delegation.StatusKey("deleg_1")] != "" {
			t.Errorf("metadata %v (%v): want the line's id gone once it was removed", meta, err)
		}
	})
}

// TestStatusLinePostedOnce is two instances ending a batch's first
// children at once: the first to claim the post posts the line, the
// other leaves it to it, and the poster shows the count it reads once
// its line's id is kept.
func TestStatusLinePostedOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, s stores) {
		ctx := context.Background()
		posting, release := make(chan struct{}), make(chan struct{})
		pa := &presenceAdapter{status: func(_ context.Context, id, _ string) error {
			if id == "" {
				close(posting)
				<-release
			}
			return nil
		}}
		end := statusBatch(t, s)
		first := end()
		posted := make(chan struct{})
		go func() {
			defer close(posted)
			statusLine(s, pa, "a")(ctx, first)
		}()
		<-posting
		statusLine(s, pa, "b")(ctx, end()) // finds the post claimed and no line
		close(release)
		<-posted
		want := []presenceCall{
			{kind: "post", text: "Background: 1 of 3 sub-agents done"},
			{kind: "edit", id: "s1", text: "Background: 2 of 3 sub-agents done"},
		}
		if diff := cmp.Diff(want, presenceCalls(pa), cmp.AllowUnexported(presenceCall{})); diff != "" {
			t.Errorf("presence calls (-want +got):\n%s", diff)
		}
		statusLine(s, pa, "b")(ctx, end())
		if got := presenceCalls(pa); len(got) != 3 || got[2].kind != "clear" || got[2].id != "s1" {
			t.Errorf("after the last end: %+v, want the line cleared", got)
		}
	})
}

// No platform that shows presence: no hook, so the runner reads nothing
// after an end for it.
func TestStatusLinesWithoutPresence(t *testing.T) {
	if hook := delegation.StatusLines(delegation.StatusLinesOptions{}); hook != nil {
		t.Error("StatusLines without a presence adapter made a hook")
	}
}
