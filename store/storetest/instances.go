package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/instances"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// runInstances runs the conformance cases of instances.Store.
func runInstances(t *testing.T, b Backend) {
	t.Run("beats, the store's clock and leaving", func(t *testing.T) { runInstanceBeats(t, b) })
	t.Run("two processes see each other", func(t *testing.T) { runInstancesShared(t, b) })
	t.Run("durability", func(t *testing.T) { runInstancesDurability(t, b) })
	t.Run("invalid arguments", func(t *testing.T) { runInstancesInvalid(t, b) })
}

func (f *fixture) instances() instances.Store { return f.st.Instances() }

// listInstances lists the live instances, failing the case on an error.
func (f *fixture) listInstances(st instances.Store) []instances.Instance {
	f.t.Helper()
	got, err := st.Instances(f.ctx)
	if err != nil {
		f.t.Fatalf("Instances: %v", err)
	}
	return got
}

func (f *fixture) beat(st instances.Store, in instances.Instance, ttl time.Duration) {
	f.t.Helper()
	if err := st.Beat(f.ctx, in, ttl); err != nil {
		f.t.Fatalf("Beat(%s): %v", in.ID, err)
	}
}

// instance is a process's record as it beats, without LastSeen.
func instance(id string, turns int64) instances.Instance {
	return instances.Instance{ID: id, Host: "host-" + id, PID: 4242, Version: "v1.2.3", StartedAt: t0.Add(-time.Hour),
		Minute: instances.Counts{Turns: turns, TurnErrors: 1, ModelErrors: 2, Sent: 3, SendFailed: 4}}
}

// seen is in as the store gives it back, last seen at.
func seen(in instances.Instance, at time.Time) instances.Instance {
	in.LastSeen = at
	return in
}

// runInstanceBeats: a beat records the instance, last seen by the
// store's clock, until its ttl runs out on that clock; a later beat
// replaces it and lengthens it; leaving removes it at once.
func runInstanceBeats(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	if got := f.listInstances(f.instances()); len(got) != 0 {
		t.Errorf("a new store lists %v", got)
	}
	f.beat(f.instances(), instance("b", 1), 15*time.Second)
	f.clk.Advance(time.Second)
	f.beat(f.instances(), instance("a", 2), 15*time.Second)
	want := []instances.Instance{seen(instance("a", 2), t0.Add(time.Second)), seen(instance("b", 1), t0)}
	if diff := cmp.Diff(want, f.listInstances(f.instances()), timeOpts); diff != "" {
		t.Errorf("after two beats (-want +got):\n%s", diff)
	}
	// b's record runs out 15 s after its beat; a beats again first.
	f.clk.Advance(10 * time.Second)
	f.beat(f.instances(), instance("a", 5), 15*time.Second)
	f.clk.Advance(4 * time.Second)
	want = []instances.Instance{seen(instance("a", 5), t0.Add(11*time.Second))}
	if diff := cmp.Diff(want, f.listInstances(f.instances()), timeOpts); diff != "" {
		t.Errorf("at b's expiry (-want +got):\n%s", diff)
	}
	// b comes back with a beat.
	f.beat(f.instances(), instance("b", 7), 15*time.Second)
	if got := f.listInstances(f.instances()); len(got) != 2 || got[1].ID != "b" || got[1].Minute.Turns != 7 {
		t.Errorf("after b beat again: %+v", got)
	}
	if err := f.instances().Leave(f.ctx, "a"); err != nil {
		t.Fatalf("Leave(a): %v", err)
	}
	if err := f.instances().Leave(f.ctx, "never-was"); err != nil {
		t.Errorf("Leave of an unknown id: %v, want nil", err)
	}
	if got := f.listInstances(f.instances()); len(got) != 1 || got[0].ID != "b" {
		t.Errorf("after a left: %+v, want only b", got)
	}
	f.clk.Advance(15 * time.Second)
	if got := f.listInstances(f.instances()); len(got) != 0 {
		t.Errorf("after every ttl ran out: %+v", got)
	}
}

// runInstancesShared: two processes, each a store of its own on one
// place, list each other's beats.
func runInstancesShared(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	other, _ := openStore(t, f.place, f.clk, f.lim)
	f.beat(f.instances(), instance("one", 1), time.Minute)
	f.beat(other.Instances(), instance("two", 2), time.Minute)
	for _, st := range []instances.Store{f.instances(), other.Instances()} {
		got := f.listInstances(st)
		if len(got) != 2 || got[0].ID != "one" || got[1].ID != "two" {
			t.Errorf("a process lists %+v, want one and two", got)
		}
		if total := instances.Total(got); total.Turns != 3 || total.Errors() != 14 {
			t.Errorf("their total = %+v, want 3 turns and 14 errors", total)
		}
	}
}

func runInstancesDurability(t *testing.T, b Backend) {
	eachReopening(t, func(t *testing.T, restart bool) {
		f := newFixture(t, b, sessions.Limits{})
		f.beat(f.instances(), instance("a", 3), time.Minute)
		f.reopen(restart)
		want := []instances.Instance{seen(instance("a", 3), t0)}
		if diff := cmp.Diff(want, f.listInstances(f.instances()), timeOpts); diff != "" {
			t.Errorf("after reopening (-want +got):\n%s", diff)
		}
	})
}

func runInstancesInvalid(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	st := f.instances()
	wantCode(t, "Beat without an id", st.Beat(f.ctx, instances.Instance{}, time.Minute), errs.Invalid)
	wantCode(t, "Beat with an overlong id", st.Beat(f.ctx, instances.Instance{ID: strings.Repeat("x", instances.MaxIDLen+1)}, time.Minute), errs.Invalid)
	wantCode(t, "Beat without a ttl", st.Beat(f.ctx, instances.Instance{ID: "a"}, 0), errs.Invalid)
	wantCode(t, "Leave without an id", st.Leave(f.ctx, ""), errs.Invalid)
	if got := f.listInstances(st); len(got) != 0 {
		t.Errorf("refused beats left %+v", got)
	}
}
