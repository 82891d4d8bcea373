package storetest

import (
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/sessions"
)

// runOnce runs the conformance cases of lease.OnceStore.
func runOnce(t *testing.T, b Backend) {
	t.Run("first claimer runs it", func(t *testing.T) { runOnceClaim(t, b) })
	t.Run("a dead claimer's fire is taken over", func(t *testing.T) { runOnceTakeover(t, b) })
	t.Run("stale fires", func(t *testing.T) { runOnceStale(t, b) })
	t.Run("done fires are forgotten after the dedupe window", func(t *testing.T) { runOnceForgotten(t, b) })
	t.Run("invalid arguments", func(t *testing.T) { runOnceInvalid(t, b) })
	t.Run("durability", func(t *testing.T) { runOnceDurability(t, b) })
}

func (f *fixture) once() lease.OnceStore { return f.st.Once() }

// claimOnce claims id for owner and checks what it found.
func (f *fixture) claimOnce(id, owner string, want lease.OnceState) lease.Claim {
	f.t.Helper()
	c, st, err := f.once().ClaimOnce(f.ctx, id, owner, ttl)
	if err != nil {
		f.t.Fatalf("ClaimOnce(%s, %s): %v", id, owner, err)
	}
	if st != want {
		f.t.Fatalf("ClaimOnce(%s, %s) = %s (%+v), want %s", id, owner, st, c, want)
	}
	return c
}

func (f *fixture) doneOnce(c lease.Claim) {
	f.t.Helper()
	if err := f.once().DoneOnce(f.ctx, c); err != nil {
		f.t.Fatalf("DoneOnce(%s): %v", c.Name, err)
	}
}

func (f *fixture) staleOnce(prefix string, n int) []string {
	f.t.Helper()
	ids, err := f.once().StaleOnce(f.ctx, prefix, n)
	if err != nil {
		f.t.Fatalf("StaleOnce(%q, %d): %v", prefix, n, err)
	}
	return ids
}

func runOnceClaim(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	const fire = "cron:job_1:1767225600"
	c := f.claimOnce(fire, "gw-a", lease.OnceClaimed)
	if c.Name != fire || c.Owner != "gw-a" || c.Token <= 0 || !c.Expires.Equal(t0.Add(ttl)) {
		t.Errorf("claim = %+v, want %s by gw-a with a token, expiring at %v", c, fire, t0.Add(ttl))
	}
	held := f.claimOnce(fire, "gw-b", lease.OnceHeld)
	if held.Owner != "gw-a" || held.Token != c.Token {
		t.Errorf("a held fire's claim = %+v, want gw-a's %+v", held, c)
	}
	f.clk.Advance(ttl / 2)
	renewed, err := f.once().RenewOnce(f.ctx, []lease.Claim{c}, ttl)
	if err != nil || len(renewed) != 1 || !renewed[0].Expires.Equal(f.clk.Now().Add(ttl)) {
		t.Fatalf("RenewOnce = %+v, %v; want the claim to %v", renewed, err, f.clk.Now().Add(ttl))
	}
	// Renewed, it outlives its first expiry.
	f.clk.Advance(ttl/2 + time.Second)
	f.claimOnce(fire, "gw-b", lease.OnceHeld)
	f.doneOnce(renewed[0])
	f.doneOnce(renewed[0]) // a retried call is not an error
	f.claimOnce(fire, "gw-b", lease.OnceDone)
	f.clk.Advance(2 * ttl)
	f.claimOnce(fire, "gw-c", lease.OnceDone)
	if ids := f.staleOnce("cron:", 10); len(ids) != 0 {
		t.Errorf("StaleOnce after the fire was done = %v, want none", ids)
	}
	// Another fire of the same job is its own.
	f.claimOnce("cron:job_1:1767229200", "gw-b", lease.OnceClaimed)
	wantCode(t, "DoneOnce of an unknown fire", f.once().DoneOnce(f.ctx, lease.Claim{Name: "cron:none", Token: 1}), errs.NotFound)
}

func runOnceTakeover(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	const fire = "cron:job_1:1"
	dead := f.claimOnce(fire, "gw-a", lease.OnceClaimed)
	f.clk.Advance(ttl + time.Millisecond)
	taken := f.claimOnce(fire, "gw-b", lease.OnceClaimed)
	if taken.Token <= dead.Token {
		t.Errorf("takeover token %d, want above the dead claim's %d", taken.Token, dead.Token)
	}
	// The first holder, back from a stall, can neither renew nor finish.
	renewed, err := f.once().RenewOnce(f.ctx, []lease.Claim{dead, taken}, ttl)
	if err != nil {
		t.Fatalf("RenewOnce: %v", err)
	}
	if len(renewed) != 1 || renewed[0].Token != taken.Token {
		t.Errorf("RenewOnce of the dead and the current claim = %+v, want the current one only", renewed)
	}
	wantCode(t, "DoneOnce by the dead claim", f.once().DoneOnce(f.ctx, dead), errs.LeaseLost)
	f.claimOnce(fire, "gw-a", lease.OnceHeld)
	f.doneOnce(taken)
	wantCode(t, "DoneOnce by the dead claim after the fire was done", f.once().DoneOnce(f.ctx, dead), errs.LeaseLost)
	f.claimOnce(fire, "gw-a", lease.OnceDone)
}

func runOnceStale(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	a := f.claimOnce("cron:job_a:1", "gw-a", lease.OnceClaimed)
	f.clk.Advance(tick)
	f.claimOnce("cron:job_b:1", "gw-a", lease.OnceClaimed)
	f.clk.Advance(tick)
	f.claimOnce("ctl:goal:1", "gw-a", lease.OnceClaimed)
	f.clk.Advance(tick)
	done := f.claimOnce("cron:job_c:1", "gw-a", lease.OnceClaimed)
	f.doneOnce(done)
	if ids := f.staleOnce("cron:", 10); len(ids) != 0 {
		t.Errorf("StaleOnce while every claim holds = %v, want none", ids)
	}
	f.clk.Advance(ttl)
	if ids := f.staleOnce("cron:", 10); len(ids) != 2 || ids[0] != "cron:job_a:1" || ids[1] != "cron:job_b:1" {
		t.Errorf("StaleOnce(cron:) = %v, want [cron:job_a:1 cron:job_b:1], oldest claim first", ids)
	}
	if ids := f.staleOnce("cron:", 1); len(ids) != 1 || ids[0] != "cron:job_a:1" {
		t.Errorf("StaleOnce(cron:, 1) = %v, want [cron:job_a:1]", ids)
	}
	if ids := f.staleOnce("ctl:", 10); len(ids) != 1 || ids[0] != "ctl:goal:1" {
		t.Errorf("StaleOnce(ctl:) = %v, want [ctl:goal:1]", ids)
	}
	// Taken over and renewed, a fire is not stale any more.
	f.claimOnce(a.Name, "gw-b", lease.OnceClaimed)
	if ids := f.staleOnce("cron:", 10); len(ids) != 1 || ids[0] != "cron:job_b:1" {
		t.Errorf("StaleOnce after a takeover = %v, want [cron:job_b:1]", ids)
	}
}

func runOnceForgotten(t *testing.T, b Backend) {
	const window = time.Hour
	f := newFixture(t, b, sessions.Limits{DedupeWindow: window})
	c := f.claimOnce("cron:job_1:1", "gw-a", lease.OnceClaimed)
	f.doneOnce(c)
	f.clk.Advance(window - time.Second)
	f.claimOnce("cron:job_1:1", "gw-b", lease.OnceDone)
	f.clk.Advance(2 * time.Second)
	again := f.claimOnce("cron:job_1:1", "gw-b", lease.OnceClaimed)
	if again.Token <= c.Token {
		t.Errorf("token of a forgotten fire claimed again = %d, want above %d", again.Token, c.Token)
	}
}

func runOnceInvalid(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	for _, tc := range []struct {
		desc, id, owner string
		ttl             time.Duration
	}{
		{"empty id", "", "gw-a", ttl},
		{"empty owner", "cron:x:1", "", ttl},
		{"no ttl", "cron:x:1", "gw-a", 0},
	} {
		_, _, err := f.once().ClaimOnce(f.ctx, tc.id, tc.owner, tc.ttl)
		wantCode(t, "ClaimOnce with "+tc.desc, err, errs.Invalid)
	}
	_, err := f.once().RenewOnce(f.ctx, []lease.Claim{{Name: "cron:x:1", Token: 1}}, 0)
	wantCode(t, "RenewOnce with no ttl", err, errs.Invalid)
	_, err = f.once().StaleOnce(f.ctx, "cron:", 0)
	wantCode(t, "StaleOnce with limit 0", err, errs.Invalid)
	f.claimOnce("cron:x:1", "gw-a", lease.OnceClaimed) // nothing was written
}

func runOnceDurability(t *testing.T, b Backend) {
	eachReopening(t, func(t *testing.T, restart bool) {
		f := newFixture(t, b, sessions.Limits{})
		done := f.claimOnce("cron:job_1:1", "gw-a", lease.OnceClaimed)
		f.doneOnce(done)
		held := f.claimOnce("cron:job_1:2", "gw-a", lease.OnceClaimed)
		f.reopen(restart)
		f.claimOnce("cron:job_1:1", "gw-b", lease.OnceDone)
		if got := f.claimOnce("cron:job_1:2", "gw-b", lease.OnceHeld); got.Token != held.Token {
			t.Errorf("held claim after reopening = %+v, want %+v", got, held)
		}
		f.clk.Advance(ttl + time.Millisecond)
		if ids := f.staleOnce("cron:", 10); len(ids) != 1 || ids[0] != "cron:job_1:2" {
			t.Errorf("StaleOnce after reopening = %v, want [cron:job_1:2]", ids)
		}
		if next := f.claimOnce("cron:job_1:2", "gw-b", lease.OnceClaimed); next.Token <= held.Token {
			t.Errorf("token after reopening = %d, want above %d", next.Token, held.Token)
		}
	})
}
