package kanban_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/store/redis"
	"github.com/heraldgw/herald/store/sqlite"
)

var t0 = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

// eachStore runs f on a service over a fresh store of each kind, on a
// fake clock; open opens another handle of the same store.
func eachStore(t *testing.T, f func(t *testing.T, h *harness)) {
	for _, name := range []string{"sqlite", "redis"} {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			var open func() kanban.Store
			var ob outbox.Store
			switch name {
			case "sqlite":
				path := filepath.Join(t.TempDir(), "kanban.db")
				open = func() kanban.Store {
					db, err := sqlite.Open(path, sqlite.Options{Clock: clk})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { db.Close() })
					ob = db.Outbox()
					return db.Kanban()
				}
			case "redis":
				srv := testkit.StartRedis(t)
				open = func() kanban.Store {
					db, err := redis.Open(context.Background(), redis.Options{URL: srv.URL(), Prefix: srv.Prefix(), Clock: clk})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { db.Close() })
					ob = db.Outbox()
					return db.Kanban()
				}
			}
			h := &harness{t: t, ctx: context.Background(), clk: clk, open: open}
			h.svc = &kanban.Service{Store: open(), Root: t.TempDir()}
			h.outbox = ob
			f(t, h)
		})
	}
}

type harness struct {
	t    *testing.T
	ctx  context.Context
	clk  *clock.Fake
	open func() kanban.Store
	svc  *kanban.Service
	// outbox is the outbox of the store open last opened.
	outbox outbox.Store
}

func (h *harness) create(spec kanban.CreateSpec) kanban.Card {
	h.t.Helper()
	k, created, err := h.svc.Create(h.ctx, spec)
	if err != nil || !created {
		h.t.Fatalf("Create(%+v) = %v, created %v", spec, err, created)
	}
	return k
}

func (h *harness) card(id string) kanban.Card {
	h.t.Helper()
	k, err := h.svc.Store.Card(h.ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return k
}

func (h *harness) claim(id string) kanban.Card {
	h.t.Helper()
	k, err := h.svc.Claim(h.ctx, id, kanban.ClaimSpec{Owner: "gw-a", Lane: "herald", TTL: time.Minute})
	if err != nil {
		h.t.Fatalf("Claim(%s): %v", id, err)
	}
	return k
}

func (h *harness) wantStatus(id string, want kanban.Status) kanban.Card {
	h.t.Helper()
	k := h.card(id)
	if k.Status != want {
		h.t.Fatalf("%s is %s, want %s (%+v)", id, k.Status, want, k)
	}
	return k
}

func (h *harness) kinds(id string) []string {
	h.t.Helper()
	k := h.card(id)
	evs, err := h.svc.Store.Events(h.ctx, kanban.EventQuery{Board: k.Board, Card: id})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

func TestCreate(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		p := h.create(kanban.CreateSpec{Title: "parent"})
		if p.Status != kanban.StatusReady || p.Board != kanban.DefaultBoard || !strings.HasPrefix(p.ID, "t_") || len(p.ID) != 10 {
			t.Fatalf("a card with no parents = %+v, want ready on the default board", p)
		}
		c := h.create(kanban.CreateSpec{Title: "child", Parents: []string{p.ID}, Assignee: " Coder "})
		if c.Status != kanban.StatusTodo || c.Assignee != "coder" || len(c.Parents) != 1 {
			t.Fatalf("a card with an undone parent = %+v, want todo, assignee lower-cased", c)
		}
		if got := h.card(p.ID); len(got.Children) != 1 || got.Children[0] != c.ID {
			t.Errorf("parent's children = %v", got.Children)
		}
		for _, st := range []kanban.Status{kanban.StatusTriage, kanban.StatusBlocked} {
			if k := h.create(kanban.CreateSpec{Title: string(st), Status: st}); k.Status != st {
				t.Errorf("an explicit %s card is %s", st, k.Status)
			}
		}
		first := h.create(kanban.CreateSpec{Title: "nightly", IdempotencyKey: "n-1"})
		again, created, err := h.svc.Create(h.ctx, kanban.CreateSpec{Title: "nightly again", IdempotencyKey: "n-1"})
		if err != nil || created || again.ID != first.ID {
			t.Errorf("a create with a known key = %s, created %v, %v; want %s", again.ID, created, err, first.ID)
		}
		for _, tc := range []struct {
			spec kanban.CreateSpec
			want string
		}{
			{kanban.CreateSpec{}, "title"},
			{kanban.CreateSpec{Title: "x", Parents: []string{"t_nothere"}}, "t_nothere"},
			{kanban.CreateSpec{Title: "x", Parents: []string{p.ID}, Board: "ops"}, p.ID},
			{kanban.CreateSpec{Title: "x", Status: kanban.StatusRunning}, "running"},
			{kanban.CreateSpec{Title: "x", Status: kanban.StatusScheduled}, "time"},
			{kanban.CreateSpec{Title: "x", Board: "Bad Board"}, "slug"},
			{kanban.CreateSpec{Title: "x", Workspace: kanban.Workspace{Kind: kanban.WorkspaceDir}}, "directory"},
		} {
			_, _, err := h.svc.Create(h.ctx, tc.spec)
			if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Create(%+v) = %v, want Invalid naming %q", tc.spec, err, tc.want)
			}
		}
	})
}

func TestLinksRefuseCycles(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		a := h.create(kanban.CreateSpec{Title: "a"})
		b := h.create(kanban.CreateSpec{Title: "b", Parents: []string{a.ID}})
		c := h.create(kanban.CreateSpec{Title: "c", Parents: []string{b.ID}})
		_, err := h.svc.Link(h.ctx, c.ID, a.ID, "ann")
		if want := c.ID + " → " + a.ID + " → " + b.ID + " → " + c.ID; !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "cycle: "+want) {
			t.Errorf("Link(c → a) = %v, want a cycle refused, naming it: %s", err, want)
		}
		if _, err := h.svc.Heartbeat(h.ctx, a.ID, 0, time.Minute, ""); !errs.Is(err, errs.LeaseLost) {
			t.Errorf("a heartbeat of a card no worker holds = %v, want LeaseLost", err)
		}
		_, err = h.svc.Link(h.ctx, a.ID, a.ID, "ann")
		wantInvalid(t, "a self-link", err)
		other := h.create(kanban.CreateSpec{Title: "x", Board: "ops"})
		_, err = h.svc.Link(h.ctx, other.ID, a.ID, "ann")
		wantInvalid(t, "a link across boards", err)
		if got := h.card(a.ID); len(got.Parents) != 0 {
			t.Errorf("a refused link wrote %v", got.Parents)
		}
		// A link to an undone parent sends a ready card back to todo; the
		// unlink makes it ready again.
		d := h.create(kanban.CreateSpec{Title: "d"})
		if k, err := h.svc.Link(h.ctx, d.ID, a.ID, "ann"); err != nil || k.Status != kanban.StatusTodo {
			t.Fatalf("Link(d → a) = %+v, %v; want a in todo", k, err)
		}
		if k, err := h.svc.Unlink(h.ctx, d.ID, a.ID, "ann"); err != nil || k.Status != kanban.StatusReady {
			t.Fatalf("Unlink(d → a) = %+v, %v; want a ready", k, err)
		}
	})
}

// Links made at once from two stores never close a cycle between them.
func TestConcurrentLinksMakeNoCycle(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		a := h.create(kanban.CreateSpec{Title: "a"})
		b := h.create(kanban.CreateSpec{Title: "b", Parents: []string{a.ID}})
		c := h.create(kanban.CreateSpec{Title: "c"})
		d := h.create(kanban.CreateSpec{Title: "d", Parents: []string{c.ID}})
		// b → c and d → a would close a → b → c → d → a.
		other := &kanban.Service{Store: h.open(), Root: h.svc.Root}
		var wg sync.WaitGroup
		results := make([]error, 2)
		for i, link := range [][2]string{{b.ID, c.ID}, {d.ID, a.ID}} {
			svc := h.svc
			if i == 1 {
				svc = other
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, results[i] = svc.Link(h.ctx, link[0], link[1], "x")
			}()
		}
		wg.Wait()
		if results[0] == nil && results[1] == nil {
			t.Fatalf("both links were made: the board has a cycle")
		}
		if results[0] != nil && results[1] != nil {
			t.Fatalf("neither link was made: %v, %v", results[0], results[1])
		}
	})
}

func TestClaimHasOneWinner(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		k := h.create(kanban.CreateSpec{Title: "one"})
		other := &kanban.Service{Store: h.open(), Root: h.svc.Root}
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := range 8 {
			svc := h.svc
			if i%2 == 1 {
				svc = other
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := svc.Claim(h.ctx, k.ID, kanban.ClaimSpec{Owner: "w", Lane: "herald", TTL: time.Minute})
				if err == nil {
					mu.Lock()
					won++
					mu.Unlock()
				} else if !errs.Is(err, errs.Conflict) {
					t.Errorf("Claim: %v", err)
				}
			}()
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("%d claims won, want 1", won)
		}
		got := h.wantStatus(k.ID, kanban.StatusRunning)
		if runs, _ := h.svc.Store.Runs(h.ctx, k.ID); len(runs) != 1 || runs[0].ID != got.Claim.Run {
			t.Errorf("runs = %+v, want the winner's one", runs)
		}
	})
}

func TestClaimWithUndoneParentsDemotes(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		p := h.create(kanban.CreateSpec{Title: "p"})
		c := h.create(kanban.CreateSpec{Title: "c", Parents: []string{p.ID}, Status: kanban.StatusTodo})
		// A card made ready by hand (an old promote, a bug) with a parent
		// not done is refused and sent back.
		k := h.card(c.ID)
		k.Status = kanban.StatusReady
		if _, err := h.svc.Store.Apply(h.ctx, kanban.Change{Cards: []kanban.CardWrite{{Card: k, From: k.Version}}}); err != nil {
			t.Fatal(err)
		}
		_, err := h.svc.Claim(h.ctx, c.ID, kanban.ClaimSpec{Owner: "w", TTL: time.Minute})
		wantInvalid(t, "a claim with an undone parent", err)
		h.wantStatus(c.ID, kanban.StatusTodo)
		// Its parent completed, it is promoted.
		pc := h.claim(p.ID)
		if _, err := h.svc.Complete(h.ctx, p.ID, pc.Claim.Token, kanban.Result{Summary: "done"}, "w"); err != nil {
			t.Fatal(err)
		}
		h.wantStatus(c.ID, kanban.StatusReady)
	})
}

func TestFailuresGiveUp(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		k := h.create(kanban.CreateSpec{Title: "flaky"})
		run := h.claim(k.ID)
		if _, err := h.svc.Release(h.ctx, k.ID, run.Claim.Token, kanban.Ending{Outcome: kanban.OutcomeCrashed, Reason: "process 4242 is gone"}); err != nil {
			t.Fatal(err)
		}
		got := h.wantStatus(k.ID, kanban.StatusReady)
		if got.Failures != 1 {
			t.Errorf("failures after a crash = %d, want 1", got.Failures)
		}
		// The first worker, back, can write nothing.
		_, err := h.svc.Complete(h.ctx, k.ID, run.Claim.Token, kanban.Result{Summary: "late"}, "w")
		if !errs.Is(err, errs.LeaseLost) {
			t.Errorf("a released worker's complete = %v, want LeaseLost", err)
		}
		// Rate limits requeue with a delay and count nothing.
		for range 3 {
			r := h.claim(k.ID)
			if _, err := h.svc.Release(h.ctx, k.ID, r.Claim.Token, kanban.Ending{Outcome: kanban.OutcomeLimited, Reason: "exit 75", RetryAfter: time.Minute}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.svc.Claim(h.ctx, k.ID, kanban.ClaimSpec{Owner: "w", TTL: time.Minute}); !errs.Is(err, errs.Conflict) {
				t.Fatalf("a claim before the retry delay = %v, want Conflict", err)
			}
			h.clk.Advance(time.Minute)
		}
		if got := h.wantStatus(k.ID, kanban.StatusReady); got.Failures != 1 {
			t.Errorf("failures after rate limits = %d, want still 1", got.Failures)
		}
		r := h.claim(k.ID)
		if _, err := h.svc.Release(h.ctx, k.ID, r.Claim.Token, kanban.Ending{Outcome: kanban.OutcomeTimedOut, Reason: "ran past 10m"}); err != nil {
			t.Fatal(err)
		}
		got = h.wantStatus(k.ID, kanban.StatusBlocked)
		if !strings.Contains(got.BlockReason, "ran past 10m") {
			t.Errorf("block reason = %q, want the last error", got.BlockReason)
		}
		if kinds := h.kinds(k.ID); kinds[len(kinds)-1] != kanban.EventGaveUp {
			t.Errorf("events = %v, want gave_up last", kinds)
		}
		// An unblock starts the count again.
		if k, err := h.svc.Unblock(h.ctx, k.ID, "ann"); err != nil || k.Status != kanban.StatusReady || k.Failures != 0 {
			t.Errorf("Unblock = %+v, %v", k, err)
		}
	})
}

func TestBlockKinds(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		k := h.create(kanban.CreateSpec{Title: "needs a key"})
		r := h.claim(k.ID)
		if got, err := h.svc.Block(h.ctx, k.ID, r.Claim.Token, kanban.BlockNeedsInput, "which API key?", "w"); err != nil || got.Status != kanban.StatusBlocked || got.Claim != nil {
			t.Fatalf("Block = %+v, %v", got, err)
		}
		if runs, _ := h.svc.Store.Runs(h.ctx, k.ID); len(runs) != 1 || runs[0].Outcome != kanban.OutcomeBlocked {
			t.Errorf("runs = %+v, want one blocked", runs)
		}
		if _, err := h.svc.Unblock(h.ctx, k.ID, "ann"); err != nil {
			t.Fatal(err)
		}
		r = h.claim(k.ID)
		if got, err := h.svc.Block(h.ctx, k.ID, r.Claim.Token, kanban.BlockNeedsInput, "which API key?", "w"); err != nil || got.Status != kanban.StatusTriage {
			t.Fatalf("the same block after an unblock = %+v, %v; want triage", got, err)
		}
		dep := h.create(kanban.CreateSpec{Title: "dep"})
		if got, err := h.svc.Block(h.ctx, dep.ID, 0, kanban.BlockDependency, "waits for the schema", "ann"); err != nil || got.Status != kanban.StatusTodo {
			t.Errorf("a dependency block = %+v, %v; want todo", got, err)
		}
		_, err := h.svc.Block(h.ctx, dep.ID, 0, "bored", "x", "ann")
		wantInvalid(t, "an unknown block kind", err)
		// A blocked card is never promoted.
		b := h.create(kanban.CreateSpec{Title: "sticky", Status: kanban.StatusBlocked})
		if _, err := h.svc.Promote(h.ctx, kanban.DefaultBoard); err != nil {
			t.Fatal(err)
		}
		h.wantStatus(b.ID, kanban.StatusBlocked)
		// Unblock with an undone parent → todo.
		p := h.create(kanban.CreateSpec{Title: "p"})
		c := h.create(kanban.CreateSpec{Title: "c", Parents: []string{p.ID}, Status: kanban.StatusBlocked})
		if got, err := h.svc.Unblock(h.ctx, c.ID, "ann"); err != nil || got.Status != kanban.StatusTodo {
			t.Errorf("Unblock with an undone parent = %+v, %v; want todo", got, err)
		}
	})
}

func TestReassignWhileRunningIsRefused(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		k := h.create(kanban.CreateSpec{Title: "x", Assignee: "herald"})
		h.claim(k.ID)
		if _, err := h.svc.Assign(h.ctx, k.ID, "coder", "ann"); !errs.Is(err, errs.Conflict) {
			t.Errorf("Assign while running = %v, want Conflict", err)
		}
		if got := h.card(k.ID); got.Assignee != "herald" {
			t.Errorf("assignee = %q", got.Assignee)
		}
	})
}

func TestCompleteAndReview(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		k := h.create(kanban.CreateSpec{Title: "feature", Review: true})
		r := h.claim(k.ID)
		_, err := h.svc.Complete(h.ctx, k.ID, r.Claim.Token, kanban.Result{Summary: "did it", CreatedCards: []string{"t_notmade"}}, "w")
		wantInvalid(t, "a complete naming a card that was not made", err)
		h.wantStatus(k.ID, kanban.StatusRunning)
		made := h.create(kanban.CreateSpec{Title: "follow-up"})
		if _, err := h.svc.Complete(h.ctx, k.ID, r.Claim.Token, kanban.Result{Summary: "did it", CreatedCards: []string{made.ID}}, "w"); err != nil {
			t.Fatal(err)
		}
		h.wantStatus(k.ID, kanban.StatusReview)
		// A reviewer asks for changes: ready, with the comments.
		rv, err := h.svc.Claim(h.ctx, k.ID, kanban.ClaimSpec{Owner: "gw-b", Lane: "reviewer", TTL: time.Minute, Review: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.RequestChanges(h.ctx, k.ID, rv.Claim.Token, "add tests", "reviewer"); err != nil {
			t.Fatal(err)
		}
		h.wantStatus(k.ID, kanban.StatusReady)
		if cs, _ := h.svc.Store.Comments(h.ctx, k.ID); len(cs) != 1 || cs[0].Text != "add tests" {
			t.Errorf("comments = %+v", cs)
		}
		r = h.claim(k.ID)
		if _, err := h.svc.Complete(h.ctx, k.ID, r.Claim.Token, kanban.Result{Summary: "tests added"}, "w"); err != nil {
			t.Fatal(err)
		}
		// A person approves.
		if got, err := h.svc.Approve(h.ctx, k.ID, 0, "ship it", "ann"); err != nil || got.Status != kanban.StatusDone {
			t.Fatalf("Approve = %+v, %v", got, err)
		}
	})
}

func TestCompletionCheck(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		pass := false
		h.svc.Check = func(_ context.Context, k kanban.Card, _ string) (string, bool, error) {
			return "ci: " + k.CompletionCheck, pass, nil
		}
		k := h.create(kanban.CreateSpec{Title: "x", CompletionCheck: "gh run view"})
		r := h.claim(k.ID)
		if _, err := h.svc.Complete(h.ctx, k.ID, r.Claim.Token, kanban.Result{Summary: "done"}, "w"); err != nil {
			t.Fatal(err)
		}
		got := h.wantStatus(k.ID, kanban.StatusReady)
		if got.Failures != 1 {
			t.Errorf("failures after a failed check = %d", got.Failures)
		}
		if cs, _ := h.svc.Store.Comments(h.ctx, k.ID); len(cs) != 1 || !strings.Contains(cs[0].Text, "ci: gh run view") {
			t.Errorf("comments = %+v, want the check's output", cs)
		}
		pass = true
		r = h.claim(k.ID)
		if _, err := h.svc.Complete(h.ctx, k.ID, r.Claim.Token, kanban.Result{Summary: "done"}, "w"); err != nil {
			t.Fatal(err)
		}
		h.wantStatus(k.ID, kanban.StatusDone)
	})
}

func TestScheduledCardsArePromotedOnTime(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		k := h.create(kanban.CreateSpec{Title: "later", Status: kanban.StatusScheduled, ScheduledAt: t0.Add(time.Hour)})
		if moved, err := h.svc.Promote(h.ctx, kanban.DefaultBoard); err != nil || len(moved) != 0 {
			t.Fatalf("Promote before the time = %v, %v", moved, err)
		}
		h.clk.Advance(time.Hour)
		if moved, err := h.svc.Promote(h.ctx, kanban.DefaultBoard); err != nil || len(moved) != 1 || moved[0].Status != kanban.StatusReady {
			t.Fatalf("Promote at the time = %+v, %v", moved, err)
		}
		h.wantStatus(k.ID, kanban.StatusReady)
		if _, err := h.svc.Archive(h.ctx, k.ID, "ann"); err != nil {
			t.Fatal(err)
		}
		h.wantStatus(k.ID, kanban.StatusArchived)
	})
}

func wantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errs.Is(err, errs.Invalid) {
		t.Errorf("%s: err = %v, want Invalid", what, err)
	}
}

// A comment holding one of herald's secrets (a command's output a worker
// pasted) is kept masked: the next worker's model and the chats read it.
func TestCommentIsKeptRedacted(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		const secret = "sk-live-model-key-1111"
		h.svc.Redact = redact.New([]string{secret}).String
		k := h.create(kanban.CreateSpec{Title: "x"})
		cm, err := h.svc.Comment(h.ctx, k.ID, "worker", "env said HERALD_MODEL_API_KEY="+secret)
		if err != nil {
			t.Fatal(err)
		}
		cs, _ := h.svc.Store.Comments(h.ctx, k.ID)
		if len(cs) != 1 || cs[0].Text != "env said HERALD_MODEL_API_KEY="+redact.Mask || cm.Text != cs[0].Text {
			t.Errorf("comments %+v (returned %+v), want the key masked", cs, cm)
		}
	})
}

// What a worker or a person says of a card is kept masked of herald's
// secrets wherever the store keeps it (the card, its runs, events and
// comments): a result, a block's and a release's reason, a heartbeat's
// note, a review's request for changes, a completion check's output, a
// request to stop its worker.
func TestWhatIsSaidOfACardIsKeptRedacted(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		const secret = "sk-live-model-key-1111"
		h.svc.Redact = redact.New([]string{secret}).String
		said := "it printed " + secret

		blocked := h.create(kanban.CreateSpec{Title: "blocked"})
		r := h.claim(blocked.ID)
		if _, err := h.svc.Heartbeat(h.ctx, blocked.ID, r.Claim.Token, time.Minute, said); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Block(h.ctx, blocked.ID, r.Claim.Token, kanban.BlockNeedsInput, said, "w"); err != nil {
			t.Fatal(err)
		}

		done := h.create(kanban.CreateSpec{Title: "done"})
		r = h.claim(done.ID)
		res := kanban.Result{Summary: said, Result: said, Metadata: map[string]string{"log": said}}
		if _, err := h.svc.Complete(h.ctx, done.ID, r.Claim.Token, res, "w"); err != nil {
			t.Fatal(err)
		}
		if res.Metadata["log"] != said {
			t.Error("Complete changed its caller's metadata")
		}

		reviewed := h.create(kanban.CreateSpec{Title: "reviewed"})
		r = h.claim(reviewed.ID)
		if _, err := h.svc.RequestReview(h.ctx, reviewed.ID, r.Claim.Token, kanban.Result{Summary: said}, "w"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.RequestChanges(h.ctx, reviewed.ID, 0, said, "person"); err != nil {
			t.Fatal(err)
		}

		released := h.create(kanban.CreateSpec{Title: "released"})
		r = h.claim(released.ID)
		if _, err := h.svc.Release(h.ctx, released.ID, r.Claim.Token, kanban.Ending{Outcome: kanban.OutcomeCrashed, Reason: said}); err != nil {
			t.Fatal(err)
		}

		h.svc.Check = func(context.Context, kanban.Card, string) (string, bool, error) { return said, false, nil }
		checked := h.create(kanban.CreateSpec{Title: "checked", CompletionCheck: "false"})
		r = h.claim(checked.ID)
		if _, err := h.svc.Complete(h.ctx, checked.ID, r.Claim.Token, kanban.Result{Summary: "done"}, "w"); err != nil {
			t.Fatal(err)
		}

		stopped := h.create(kanban.CreateSpec{Title: "stopped"})
		h.claim(stopped.ID)
		if _, err := h.svc.RequestStop(h.ctx, stopped.ID, said, "person"); err != nil {
			t.Fatal(err)
		}

		masked := 0
		for _, k := range []kanban.Card{blocked, done, reviewed, released, checked, stopped} {
			runs, err := h.svc.Store.Runs(h.ctx, k.ID)
			if err != nil {
				t.Fatal(err)
			}
			evs, err := h.svc.Store.Events(h.ctx, kanban.EventQuery{Board: k.Board, Card: k.ID})
			if err != nil {
				t.Fatal(err)
			}
			cs, err := h.svc.Store.Comments(h.ctx, k.ID)
			if err != nil {
				t.Fatal(err)
			}
			kept, err := json.Marshal([]any{h.card(k.ID), runs, evs, cs})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(kept), secret) {
				t.Errorf("%s keeps the secret: %s", k.Title, kept)
			}
			masked += strings.Count(string(kept), redact.Mask)
		}
		// Each card keeps what was said at least twice (its run and an
		// event), the done card in its result too.
		if masked < 12 {
			t.Errorf("%d masks kept, want what was said kept masked, not dropped", masked)
		}
	})
}

// ArchiveDone archives the done cards completed long enough ago, and
// no other card.
func TestArchiveDoneTakesTheOldDoneCards(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		complete := func(title string) kanban.Card {
			t.Helper()
			k := h.create(kanban.CreateSpec{Title: title})
			r := h.claim(k.ID)
			if _, err := h.svc.Complete(h.ctx, k.ID, r.Claim.Token, kanban.Result{Summary: "done"}, "w"); err != nil {
				t.Fatal(err)
			}
			return k
		}
		old := complete("old")
		h.clk.Advance(48 * time.Hour)
		recent := complete("recent")
		ready := h.create(kanban.CreateSpec{Title: "not done"})
		h.clk.Advance(time.Hour)
		n, err := h.svc.ArchiveDone(h.ctx, kanban.DefaultBoard, 24*time.Hour, "ann")
		if err != nil || n != 1 {
			t.Fatalf("ArchiveDone = %d, %v; want the old card alone", n, err)
		}
		h.wantStatus(old.ID, kanban.StatusArchived)
		h.wantStatus(recent.ID, kanban.StatusDone)
		h.wantStatus(ready.ID, kanban.StatusReady)
	})
}
