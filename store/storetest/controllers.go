package storetest

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// runControllers runs the conformance cases of controllers.Store.
func runControllers(t *testing.T, b Backend) {
	t.Run("put and read", func(t *testing.T) { runCtlPutRead(t, b) })
	t.Run("a put is a compare-and-set", func(t *testing.T) { runCtlConflict(t, b) })
	t.Run("a conversation's states", func(t *testing.T) { runCtlConv(t, b) })
	t.Run("due states", func(t *testing.T) { runCtlDue(t, b) })
	t.Run("delete", func(t *testing.T) { runCtlDelete(t, b) })
	t.Run("invalid states", func(t *testing.T) { runCtlInvalid(t, b) })
	t.Run("one winner of concurrent puts", func(t *testing.T) { runCtlRace(t, b) })
	t.Run("durability", func(t *testing.T) { runCtlDurability(t, b) })
	t.Run("a put in a turn's commit", func(t *testing.T) { runCtlCommit(t, b) })
	t.Run("a claim says whether a conversation has any", func(t *testing.T) { runCtlClaimed(t, b) })
}

func (f *fixture) ctl() controllers.Store { return f.st.Controllers() }

// stateOpts compare states with their times to the millisecond and their
// data as JSON kept whole: the same keys in the same order, the same
// numbers as written, whatever white space surrounds them.
var stateOpts = cmp.Options{timeOpts, cmp.Comparer(func(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
})}

// ctlConv has a '}' and a '%', which a backend that files keys under
// the conversation must escape.
const ctlConv = "telegram:100}%x"

func goalState(conv, data string) controllers.State {
	return controllers.State{Conv: conv, Kind: controllers.KindGoal, Data: json.RawMessage(data)}
}

func loopState(conv, id string, due time.Time) controllers.State {
	return controllers.State{Conv: conv, Kind: controllers.KindLoop, ID: id, Data: json.RawMessage(`{"prompt":"check ` + id + `"}`), DueAt: due}
}

func (f *fixture) putCtl(s controllers.State) controllers.State {
	f.t.Helper()
	got, err := f.ctl().PutController(f.ctx, s)
	if err != nil {
		f.t.Fatalf("PutController(%+v): %v", s.Key(), err)
	}
	return got
}

func (f *fixture) ctlState(k controllers.Key) controllers.State {
	f.t.Helper()
	s, err := f.ctl().Controller(f.ctx, k)
	if err != nil {
		f.t.Fatalf("Controller(%+v): %v", k, err)
	}
	return s
}

// ctlNames names states "conv kind id" in the cases' expectations.
func ctlNames(states []controllers.State, err error) []string {
	out := []string{}
	for _, s := range states {
		out = append(out, strings.TrimSpace(s.Conv+" "+string(s.Kind)+" "+s.ID))
	}
	if err != nil {
		out = append(out, "error: "+err.Error())
	}
	return out
}

func (f *fixture) wantDue(at time.Time, n int, want ...string) {
	f.t.Helper()
	if want == nil {
		want = []string{}
	}
	if diff := cmp.Diff(want, ctlNames(f.ctl().DueControllers(f.ctx, at, n))); diff != "" {
		f.t.Errorf("DueControllers(t0+%v, %d) (-want +got):\n%s", at.Sub(t0), n, diff)
	}
}

func runCtlPutRead(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	now, err := f.ctl().Now(f.ctx)
	if err != nil || !now.Equal(t0) {
		t.Errorf("Now = %v, %v; want the store's clock, %v", now, err, t0)
	}
	// Key order, number spellings, escapes and white space as written.
	data := `{ "objective": "ship it",  "turns": 3, "budget": 1.50, "big": 12345678901234567890, "zeta": "\u00e9", "alpha": [1, 2e3] }`
	goal := f.putCtl(goalState(ctlConv, data))
	want := goalState(ctlConv, data)
	want.Version, want.UpdatedAt = 1, t0
	if diff := cmp.Diff(want, goal, stateOpts); diff != "" {
		t.Errorf("PutController (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, f.ctlState(want.Key()), stateOpts); diff != "" {
		t.Errorf("Controller (-want +got):\n%s", diff)
	}
	if got := f.ctlState(want.Key()); !got.DueAt.IsZero() {
		t.Errorf("a goal written with no due time reads back due at %v", got.DueAt)
	}

	f.clk.Advance(time.Second)
	loop := f.putCtl(loopState(ctlConv, "lp_1", t0.Add(time.Minute)))
	if loop.Version != 1 || !loop.UpdatedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("new loop = version %d, updated %v; want 1 at t0+1s", loop.Version, loop.UpdatedAt)
	}
	if diff := cmp.Diff(loop, f.ctlState(loop.Key()), stateOpts); diff != "" {
		t.Errorf("Controller(loop) (-want +got):\n%s", diff)
	}

	f.clk.Advance(time.Second)
	goal.Data = json.RawMessage(`{"objective":"ship it","turns":4}`)
	goal = f.putCtl(goal)
	if goal.Version != 2 || !goal.UpdatedAt.Equal(t0.Add(2*time.Second)) {
		t.Errorf("goal over version 1 = version %d, updated %v; want 2 at t0+2s", goal.Version, goal.UpdatedAt)
	}
	if diff := cmp.Diff(goal, f.ctlState(goal.Key()), stateOpts); diff != "" {
		t.Errorf("Controller after an update (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		desc string
		k    controllers.Key
	}{
		{"another conversation's goal", controllers.Key{Conv: "telegram:100", Kind: controllers.KindGoal}},
		{"a kind not stored", controllers.Key{Conv: ctlConv, Kind: controllers.KindHeartbeat}},
		{"another loop", controllers.Key{Conv: ctlConv, Kind: controllers.KindLoop, ID: "lp_2"}},
	} {
		_, err := f.ctl().Controller(f.ctx, tc.k)
		wantCode(t, "Controller of "+tc.desc, err, errs.NotFound)
	}
}

func runCtlConflict(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	stored := f.putCtl(goalState(ctlConv, `{"n":1}`))
	stored.Data = json.RawMessage(`{"n":2}`)
	stored = f.putCtl(stored)
	for _, tc := range []struct {
		desc    string
		version int64
	}{
		{"a new goal over the stored one", 0},
		{"a stale version", 1},
		{"a version not reached", 3},
	} {
		s := goalState(ctlConv, `{"n":"refused"}`)
		s.Version = tc.version
		_, err := f.ctl().PutController(f.ctx, s)
		wantCode(t, "PutController of "+tc.desc, err, errs.Conflict)
	}
	gone := loopState(ctlConv, "lp_gone", time.Time{})
	gone.Version = 1
	_, err := f.ctl().PutController(f.ctx, gone)
	wantCode(t, "PutController over a version of a state never stored", err, errs.Conflict)
	if _, err := f.ctl().Controller(f.ctx, gone.Key()); !errs.Is(err, errs.NotFound) {
		t.Errorf("a refused put stored a state: Controller = %v", err)
	}
	if diff := cmp.Diff(stored, f.ctlState(stored.Key()), stateOpts); diff != "" {
		t.Errorf("the refused puts changed the goal (-want +got):\n%s", diff)
	}
}

func runCtlConv(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	// Written out of order, and beside conversations whose keys start
	// alike.
	for _, s := range []controllers.State{
		loopState(ctlConv, "lp_b", t0.Add(time.Minute)),
		{Conv: ctlConv, Kind: controllers.KindHeartbeat, Data: json.RawMessage(`{}`), DueAt: t0.Add(time.Hour)},
		loopState(ctlConv, "lp_a", time.Time{}),
		goalState(ctlConv, `{}`),
		goalState("telegram:100", `{}`),
		loopState("telegram:100}%xy", "lp_c", time.Time{}),
	} {
		f.putCtl(s)
	}
	want := []string{ctlConv + " goal", ctlConv + " heartbeat", ctlConv + " loop lp_a", ctlConv + " loop lp_b"}
	if diff := cmp.Diff(want, ctlNames(f.ctl().Controllers(f.ctx, ctlConv))); diff != "" {
		t.Errorf("Controllers, by kind then id (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"telegram:100 goal"}, ctlNames(f.ctl().Controllers(f.ctx, "telegram:100"))); diff != "" {
		t.Errorf("Controllers of another conversation (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{}, ctlNames(f.ctl().Controllers(f.ctx, "telegram:999"))); diff != "" {
		t.Errorf("Controllers of a conversation with none (-want +got):\n%s", diff)
	}
}

func runCtlDue(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	for _, s := range []controllers.State{
		loopState(ctlConv, "lp_3", t0.Add(3*time.Second)),
		loopState(ctlConv, "lp_1", t0.Add(time.Second)),
		loopState("telegram:200", "lp_2", t0.Add(2*time.Second)),
		loopState(ctlConv, "lp_never", time.Time{}),
		goalState(ctlConv, `{}`),
		{Conv: "telegram:200", Kind: controllers.KindHeartbeat, Data: json.RawMessage(`{}`), DueAt: t0.Add(time.Hour)},
	} {
		f.putCtl(s)
	}
	f.wantDue(t0, 10)
	f.wantDue(t0.Add(2*time.Second), 10, ctlConv+" loop lp_1", "telegram:200 loop lp_2")
	f.wantDue(t0.Add(time.Minute), 10, ctlConv+" loop lp_1", "telegram:200 loop lp_2", ctlConv+" loop lp_3")
	f.wantDue(t0.Add(time.Minute), 2, ctlConv+" loop lp_1", "telegram:200 loop lp_2")
	f.wantDue(t0.Add(time.Minute), 1, ctlConv+" loop lp_1")

	// Put again later, lp_1 moves behind lp_3; put with no due time, lp_3
	// leaves the due states.
	lp1 := f.ctlState(controllers.Key{Conv: ctlConv, Kind: controllers.KindLoop, ID: "lp_1"})
	lp1.DueAt = t0.Add(5 * time.Second)
	f.putCtl(lp1)
	lp3 := f.ctlState(controllers.Key{Conv: ctlConv, Kind: controllers.KindLoop, ID: "lp_3"})
	f.wantDue(t0.Add(time.Minute), 10, "telegram:200 loop lp_2", ctlConv+" loop lp_3", ctlConv+" loop lp_1")
	lp3.DueAt = time.Time{}
	f.putCtl(lp3)
	f.wantDue(t0.Add(time.Minute), 10, "telegram:200 loop lp_2", ctlConv+" loop lp_1")
	f.wantDue(t0.Add(2*time.Hour), 10, "telegram:200 loop lp_2", ctlConv+" loop lp_1", "telegram:200 heartbeat")
	if got := f.ctlState(lp3.Key()); !got.DueAt.IsZero() || got.Version != 2 {
		t.Errorf("lp_3 put with no due time = %+v", got)
	}
}

func runCtlDelete(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	lp := f.putCtl(loopState(ctlConv, "lp_1", t0.Add(time.Second)))
	lp = f.putCtl(lp)
	other := f.putCtl(loopState(ctlConv, "lp_2", t0.Add(2*time.Second)))

	err := f.ctl().DeleteController(f.ctx, controllers.Key{Conv: ctlConv, Kind: controllers.KindGoal}, 1)
	wantCode(t, "DeleteController of a state not stored", err, errs.NotFound)
	err = f.ctl().DeleteController(f.ctx, lp.Key(), 1)
	wantCode(t, "DeleteController at a stale version", err, errs.Conflict)
	f.ctlState(lp.Key())

	if err := f.ctl().DeleteController(f.ctx, lp.Key(), lp.Version); err != nil {
		t.Fatalf("DeleteController: %v", err)
	}
	_, err = f.ctl().Controller(f.ctx, lp.Key())
	wantCode(t, "Controller of a deleted state", err, errs.NotFound)
	if diff := cmp.Diff([]string{ctlConv + " loop lp_2"}, ctlNames(f.ctl().Controllers(f.ctx, ctlConv))); diff != "" {
		t.Errorf("Controllers after a delete (-want +got):\n%s", diff)
	}
	f.wantDue(t0.Add(time.Minute), 10, ctlConv+" loop lp_2")
	err = f.ctl().DeleteController(f.ctx, lp.Key(), lp.Version)
	wantCode(t, "DeleteController again", err, errs.NotFound)

	// The key is free again: a new state starts over at version 1.
	again := loopState(ctlConv, "lp_1", time.Time{})
	if got := f.putCtl(again); got.Version != 1 {
		t.Errorf("a state put over a deleted one has version %d, want 1", got.Version)
	}
	f.wantDue(t0.Add(time.Minute), 10, ctlConv+" loop lp_2")
	if diff := cmp.Diff(other, f.ctlState(other.Key()), stateOpts); diff != "" {
		t.Errorf("another loop after the delete (-want +got):\n%s", diff)
	}
}

func runCtlInvalid(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	over := `{"x":"` + big(controllers.MaxData) + `"}`
	for _, tc := range []struct {
		desc string
		s    controllers.State
		code errs.Code
	}{
		{"an empty conversation", goalState("", `{}`), errs.Invalid},
		{"a conversation with a control character", goalState("telegram:\n1", `{}`), errs.Invalid},
		{"an unknown kind", controllers.State{Conv: ctlConv, Kind: "cron", Data: json.RawMessage(`{}`)}, errs.Invalid},
		{"a goal with an id", controllers.State{Conv: ctlConv, Kind: controllers.KindGoal, ID: "g1", Data: json.RawMessage(`{}`)}, errs.Invalid},
		{"a heartbeat with an id", controllers.State{Conv: ctlConv, Kind: controllers.KindHeartbeat, ID: "h1", Data: json.RawMessage(`{}`)}, errs.Invalid},
		{"a loop without an id", loopState(ctlConv, "", time.Time{}), errs.Invalid},
		{"a loop with an id over 64 bytes", loopState(ctlConv, big(65), time.Time{}), errs.Invalid},
		{"a negative version", controllers.State{Conv: ctlConv, Kind: controllers.KindGoal, Data: json.RawMessage(`{}`), Version: -1}, errs.Invalid},
		{"no data", goalState(ctlConv, ``), errs.Invalid},
		{"data that is an array", goalState(ctlConv, `[1]`), errs.Invalid},
		{"data that is a string", goalState(ctlConv, `"goal"`), errs.Invalid},
		{"data that is null", goalState(ctlConv, `null`), errs.Invalid},
		{"data that is not JSON", goalState(ctlConv, `{"a":`), errs.Invalid},
		{"data over MaxData", goalState(ctlConv, over), errs.TooLarge},
	} {
		_, err := f.ctl().PutController(f.ctx, tc.s)
		wantCode(t, "PutController of "+tc.desc, err, tc.code)
	}
	if diff := cmp.Diff([]string{}, ctlNames(f.ctl().Controllers(f.ctx, ctlConv))); diff != "" {
		t.Errorf("refused puts stored states (-want +got):\n%s", diff)
	}
	f.wantDue(t0.Add(time.Hour), 10)
	// MaxData itself is kept.
	atMax := `{"x":"` + big(controllers.MaxData-8) + `"}`
	if got := f.putCtl(goalState(ctlConv, atMax)); len(got.Data) != controllers.MaxData {
		t.Errorf("data of MaxData bytes: put %d bytes", len(got.Data))
	}
	if got := f.ctlState(controllers.Key{Conv: ctlConv, Kind: controllers.KindGoal}); string(got.Data) != atMax {
		t.Errorf("data of MaxData bytes read back as %d bytes", len(got.Data))
	}
}

func runCtlRace(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	other, _ := openStore(t, f.place, f.clk, f.lim)
	stores := []controllers.Store{f.ctl(), other.Controllers()}
	const rounds = 20
	s := loopState(ctlConv, "lp_1", t0.Add(time.Second))
	for round := range rounds {
		// Round 0 is two creates; every later one two writes over the
		// version both read.
		var wg sync.WaitGroup
		results := make([]controllers.State, len(stores))
		errList := make([]error, len(stores))
		for i, st := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := s
				w.Data = json.RawMessage(`{"writer":` + strconv.Itoa(i) + `}`)
				w.DueAt = s.DueAt.Add(time.Duration(i+1) * time.Second)
				results[i], errList[i] = st.PutController(f.ctx, w)
			}()
		}
		wg.Wait()
		winner := -1
		for i, err := range errList {
			switch {
			case err == nil && winner < 0:
				winner = i
			case err == nil:
				t.Fatalf("round %d: both puts over version %d won", round, s.Version)
			case !errs.Is(err, errs.Conflict):
				t.Fatalf("round %d: PutController: %v", round, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no put over version %d won: %v", round, s.Version, errList)
		}
		got := f.ctlState(s.Key())
		if diff := cmp.Diff(results[winner], got, stateOpts); diff != "" {
			t.Fatalf("round %d: the stored state is not the winner's (-want +got):\n%s", round, diff)
		}
		s = got
	}
	if s.Version != rounds {
		t.Errorf("after %d rounds the version is %d", rounds, s.Version)
	}
	f.wantDue(t0.Add(time.Hour), 10, ctlConv+" loop lp_1")
}

func runCtlDurability(t *testing.T, b Backend) {
	eachReopening(t, func(t *testing.T, restart bool) {
		f := newFixture(t, b, sessions.Limits{})
		goal := f.putCtl(goalState(ctlConv, `{"objective": "kept", "n": 1.0}`))
		loop := f.putCtl(loopState(ctlConv, "lp_1", t0.Add(time.Minute)))
		loop = f.putCtl(loop)
		f.reopen(restart)
		if diff := cmp.Diff([]controllers.State{goal, loop}, mustStates(t)(f.ctl().Controllers(f.ctx, ctlConv)), stateOpts); diff != "" {
			t.Errorf("states after reopening (-want +got):\n%s", diff)
		}
		f.wantDue(t0.Add(time.Minute), 10, ctlConv+" loop lp_1")
		loop.DueAt = time.Time{}
		if got := f.putCtl(loop); got.Version != 3 {
			t.Errorf("a put after reopening gave version %d, want 3", got.Version)
		}
		f.wantDue(t0.Add(time.Minute), 10)
	})
}

// mustStates fails the case on a read's error.
func mustStates(t *testing.T) func([]controllers.State, error) []controllers.State {
	return func(s []controllers.State, err error) []controllers.State {
		t.Helper()
		if err != nil {
			t.Fatalf("reading states: %v", err)
		}
		return s
	}
}

// runCtlCommit: a controllers.Put in a turn's commit is written with the
// turn or not at all, only over the version it read, and a put another
// writer overtook is skipped without failing the turn.
func runCtlCommit(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	f.append(user(ctlConv, "work on it"))
	stale := f.mustClaim("w1")
	f.clk.Advance(ttl + time.Second)
	rival := f.mustClaim("w2")

	fresh := loopState(ctlConv, "lp_1", t0.Add(time.Hour))
	err := f.ss.Finish(f.ctx, stale.Lease, sessions.Finish{
		EntryID: stale.Entry.ID, Writes: []sessions.Write{controllers.Put{State: fresh}}, Release: true,
	})
	wantCode(t, "stale Finish with a controller's state", err, errs.LeaseLost)
	f.wantDue(t0.Add(2*time.Hour), 0)

	goal := f.putCtl(goalState(ctlConv, `{"turns":1}`))
	moved := goal
	moved.Data = json.RawMessage(`{"turns":2}`)
	overtaken := goal
	overtaken.Version = 0 // as though it read none
	overtaken.Data = json.RawMessage(`{"turns":9}`)
	bad := loopState(ctlConv, "", time.Time{})
	err = f.ss.Finish(f.ctx, rival.Lease, sessions.Finish{
		EntryID: rival.Entry.ID, Writes: []sessions.Write{controllers.Put{State: bad}},
	})
	wantCode(t, "Finish with an invalid controller's state", err, errs.Invalid)

	f.finish(rival.Lease, sessions.Finish{
		EntryID: rival.Entry.ID, Release: true,
		Writes: []sessions.Write{controllers.Put{State: fresh}, controllers.Put{State: moved}, controllers.Put{State: overtaken}},
	})
	got := f.ctlState(goal.Key())
	if got.Version != 2 || string(got.Data) != `{"turns":2}` {
		t.Errorf("goal after the commit = version %d %s; want version 2 {\"turns\":2} (the put over version 1 written, the one over none skipped)", got.Version, got.Data)
	}
	f.wantDue(t0.Add(2*time.Hour), 0, ctlConv+" loop lp_1")
	if l := f.ctlState(fresh.Key()); l.Version != 1 || !l.DueAt.Equal(fresh.DueAt) {
		t.Errorf("committed loop = version %d due %v; want 1, due %v", l.Version, l.DueAt, fresh.DueAt)
	}

	// A put over a version another writer moved on from is skipped.
	f.append(user(ctlConv, "again"))
	turn := f.mustClaim("w2")
	f.putCtl(got) // version 3
	late := got
	late.Data = json.RawMessage(`{"turns":7}`)
	f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true, Writes: []sessions.Write{controllers.Put{State: late}}})
	if g := f.ctlState(goal.Key()); g.Version != 3 || string(g.Data) != `{"turns":2}` {
		t.Errorf("goal after an overtaken put = version %d %s; want version 3 as the other writer left it", g.Version, g.Data)
	}
}

// runCtlClaimed: a turn claimed with its history (HistoryRead) says
// whether its conversation has a controller's state (Turn.Uncontrolled),
// whichever way it was claimed: Claim, AppendClaim, FinishAndClaim. A
// backend that claims without the history says nothing.
func runCtlClaimed(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	f.putCtl(goalState(ctlConv, `{"status":"active"}`))
	uncontrolled := func(how string, turn *sessions.Turn, want bool) {
		t.Helper()
		switch {
		case turn == nil:
			t.Fatalf("%s claimed no turn", how)
		case !turn.HistoryRead:
			if turn.Uncontrolled {
				t.Errorf("%s: a turn without its history says it is uncontrolled", how)
			}
		case turn.Uncontrolled != want:
			t.Errorf("%s of %s: uncontrolled %v, want %v", how, turn.Lease.Conv, turn.Uncontrolled, want)
		}
	}
	f.appendAll(user(ctlConv, "1"), user("plain:1", "1"), user(ctlConv, "2"))
	turn := f.claim("w")
	uncontrolled("Claim", turn, false)
	next := f.finishAndClaim(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}, "w")
	uncontrolled("FinishAndClaim", next, true)
	_, fresh := f.mustAppendClaim(user("plain:2", "1"), "w2")
	uncontrolled("AppendClaim", fresh, true)
	_, held := f.mustAppendClaim(user(ctlConv+"-2", "1"), "w3")
	uncontrolled("AppendClaim", held, true)
	f.putCtl(goalState(ctlConv+"-3", `{"status":"active"}`))
	_, ctl := f.mustAppendClaim(user(ctlConv+"-3", "1"), "w4")
	uncontrolled("AppendClaim", ctl, false)
}
