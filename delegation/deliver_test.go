package delegation_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/store/sqlite"
)

// inbox records what the deliverer hands it, failing while fail says so.
type inbox struct {
	mu   sync.Mutex
	got  []sessions.Inbound
	fail int // the next calls to fail
}

func (b *inbox) Deliver(_ context.Context, in sessions.Inbound) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail > 0 {
		b.fail--
		return errs.E("test.Deliver", errs.Unavailable, "the conversation's store is unreachable")
	}
	b.got = append(b.got, in)
	return nil
}

func (b *inbox) delivered() []sessions.Inbound {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]sessions.Inbound(nil), b.got...)
}

// completed makes one delegation of conv whose only child ended.
func completed(t *testing.T, ctx context.Context, st delegation.Store, conv, session string) string {
	t.Helper()
	d := delegation.Delegation{ID: delegation.NewID("deleg_"), Conv: conv, User: "api:u", Origin: outbox.Target{Platform: "api", Chat: "c"}, Session: session, Source: "tool"}
	d.Children = []delegation.Child{{ID: delegation.NewID("sub_"), Delegation: d.ID, Status: delegation.StatusPending, Task: delegation.Task{Goal: "g"}}}
	if err := st.Create(ctx, delegation.Dispatch{Delegation: d}); err != nil {
		t.Fatal(err)
	}
	_, claims, err := st.Claim(ctx, "w", 1, time.Minute)
	if err != nil || len(claims) != 1 {
		t.Fatalf("Claim: %v %v", claims, err)
	}
	comp, err := st.End(ctx, claims[0], delegation.Result{Status: delegation.StatusCompleted, Summary: "the answer is 4"})
	if err != nil || comp == nil {
		t.Fatalf("End: %v %v", comp, err)
	}
	return comp.ID
}

func TestDelivererNeverGivesUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clk := clock.NewFake(time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC))
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "h.db"), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := db.Delegations()
	in := &inbox{fail: 9}
	d, err := delegation.NewDeliverer(delegation.DelivererOptions{
		Store: st, Inbox: in, Outbox: db.Outbox(), Name: "d1", Clock: clk,
		Meta: db.Sessions().Meta,
	})
	if err != nil {
		t.Fatal(err)
	}
	id := completed(t, ctx, st, "api:c", "")
	// Nine failures, each retried after a growing wait by the store's
	// clock: far past any bounded attempt count, it is still delivered.
	for i := 0; i < 10; i++ {
		if n := d.DeliverDue(ctx); n != 1 {
			t.Fatalf("round %d: claimed %d completions, want 1", i, n)
		}
		if n := d.DeliverDue(ctx); n != 0 {
			t.Fatalf("round %d: a completion waiting its retry was claimed again", i)
		}
		clk.Advance(2 * time.Minute)
	}
	got := in.delivered()
	if len(got) != 1 || got[0].MessageID != id || got[0].Kind != sessions.KindSynthetic || got[0].User != "api:u" ||
		!strings.Contains(got[0].Text, "the answer is 4") || got[0].Meta[sessions.MetaTarget] != "api:c" {
		t.Fatalf("delivered %+v: want the completion once, keyed by its id, for its user and origin", got)
	}
	comps, err := st.Completions(ctx, strings.TrimPrefix(id, "cmp_"))
	if err != nil || len(comps) != 1 || !comps[0].Delivered || comps[0].Attempts != 9 {
		t.Errorf("completions %+v (%v): want delivered after 9 counted attempts", comps, err)
	}
	if n := d.DeliverDue(ctx); n != 0 {
		t.Errorf("a delivered completion was claimed again")
	}
}

func TestDelivererPostsToAConversationStartedAnew(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clk := clock.NewFake(time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC))
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "h.db"), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Sessions().SetMeta(ctx, "api:c", sessions.ConvMetaSession, "s2"); err != nil {
		t.Fatal(err)
	}
	in := &inbox{}
	d, err := delegation.NewDeliverer(delegation.DelivererOptions{
		Store: db.Delegations(), Inbox: in, Outbox: db.Outbox(), Name: "d1", Clock: clk, Meta: db.Sessions().Meta,
	})
	if err != nil {
		t.Fatal(err)
	}
	completed(t, ctx, db.Delegations(), "api:c", "s1")
	if n := d.DeliverDue(ctx); n != 1 {
		t.Fatalf("claimed %d, want 1", n)
	}
	if got := in.delivered(); len(got) != 0 {
		t.Errorf("a completion of an earlier session became a turn: %+v", got)
	}
	pending, err := db.Outbox().Pending(ctx, 10)
	if err != nil || len(pending) != 1 || pending[0].Kind != delegation.KindCompletion || !strings.Contains(pending[0].Text, "started anew") {
		t.Errorf("outbox %+v (%v): want the completion posted as a notice", pending, err)
	}
}

func TestCompletionTextFitsAQueuedEntry(t *testing.T) {
	c := delegation.Completion{ID: "cmp_x", Delegation: "deleg_x", Total: 10}
	for i := range 10 {
		c.Results = append(c.Results, delegation.Result{TaskIndex: i, Status: delegation.StatusCompleted, Summary: strings.Repeat("é<", 24_000)})
	}
	text := delegation.CompletionText(c)
	in, _, err := sessions.EncodeInbound("test", sessions.Inbound{Conv: "api:c", Text: text}, sessions.Limits{})
	if err != nil || !strings.Contains(text, "summary cut") || in.Text == "" {
		t.Errorf("a completion of ten full summaries does not fit a queued entry (%v)", err)
	}
	small := delegation.Completion{Results: []delegation.Result{{Summary: "whole"}}}
	if text := delegation.CompletionText(small); !strings.Contains(text, "whole") || strings.Contains(text, "cut") {
		t.Errorf("a small completion was cut: %q", text)
	}
}
