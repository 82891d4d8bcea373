package delegation_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
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

// presenceCalls are pa's status calls (post, edit, clear) with the
// fields these tests compare.
func presenceCalls(pa *adaptertest.Presence) []adaptertest.PresenceCall {
	var got []adaptertest.PresenceCall
	for _, c := range pa.Calls() {
		if c.Kind == "typing" {
			continue
		}
		got = append(got, adaptertest.PresenceCall{Kind: c.Kind, ID: c.ID, Text: c.Text})
	}
	return got
}

func statusLine(s stores, pa *adaptertest.Presence, owner string) func(context.Context, delegation.Delegation) {
	return delegation.StatusLines(delegation.StatusLinesOptions{
		Adapters: []adapters.Adapter{pa}, Meta: s.meta, Once: s.once, Read: s.dlg.Delegation, Owner: owner, Logger: slog.Default(),
	})
}

func TestStatusLine(t *testing.T) {
	eachStore(t, func(t *testing.T, s stores) {
		ctx := context.Background()
		pa := &adaptertest.Presence{Adapter: adaptertest.Adapter{Name: "slack"}}
		end := statusBatch(t, s)
		// Two instances end children in turn: the line is one, edited.
		for i := range 3 {
			statusLine(s, pa, []string{"a", "b"}[i%2])(ctx, end())
		}
		want := []adaptertest.PresenceCall{
			{Kind: "post", Text: "Background: 1 of 3 sub-agents done"},
			{Kind: "edit", ID: "s1", Text: "Background: 2 of 3 sub-agents done"},
			{Kind: "clear", ID: "s1"},
		}
		if diff := cmp.Diff(want, presenceCalls(pa)); diff != "" {
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
		pa := &adaptertest.Presence{Adapter: adaptertest.Adapter{Name: "slack"}, OnStatus: func(_ context.Context, id, _ string) error {
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
		want := []adaptertest.PresenceCall{
			{Kind: "post", Text: "Background: 1 of 3 sub-agents done"},
			{Kind: "edit", ID: "s1", Text: "Background: 2 of 3 sub-agents done"},
		}
		if diff := cmp.Diff(want, presenceCalls(pa)); diff != "" {
			t.Errorf("presence calls (-want +got):\n%s", diff)
		}
		statusLine(s, pa, "b")(ctx, end())
		if got := presenceCalls(pa); len(got) != 3 || got[2].Kind != "clear" || got[2].ID != "s1" {
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
