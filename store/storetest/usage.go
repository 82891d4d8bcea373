package storetest

import (
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// runUsage: a turn's token usage (sessions.Usage) adds to its
// conversation's totals in the turn's commit, by model, and a commit
// whose lease was lost adds none.
func runUsage(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	f.append(user("c", "one"))
	turn := f.mustClaim("w1")
	f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true, Writes: []sessions.Write{
		sessions.Usage{Conv: "c", Model: "m-a", Prompt: 10, Completion: 3},
	}})
	f.append(user("c", "two"))
	turn = f.mustClaim("w1")
	f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true, Writes: []sessions.Write{
		sessions.Usage{Conv: "c", Model: "m-a", Prompt: 5, Completion: 2},
		sessions.Usage{Conv: "c", Model: "m-b", Prompt: 1, Completion: 1},
	}})
	f.append(user("c", "three"))
	stale := f.mustClaim("w1")
	f.clk.Advance(ttl + time.Second)
	live := f.mustClaim("w2")
	err := f.ss.Finish(f.ctx, stale.Lease, sessions.Finish{EntryID: stale.Entry.ID, Writes: []sessions.Write{
		sessions.Usage{Conv: "c", Model: "m-a", Prompt: 100, Completion: 100},
	}})
	wantCode(t, "stale Finish with usage", err, errs.LeaseLost)

	meta := f.meta("c")
	pa, ca := sessions.UsageKeys("m-a")
	pb, cb := sessions.UsageKeys("m-b")
	for k, want := range map[string]string{pa: "15", ca: "5", pb: "1", cb: "1"} {
		if meta[k] != want {
			t.Errorf("meta[%q] = %q, want %q (all: %v)", k, meta[k], want, meta)
		}
	}
	err = f.ss.Finish(f.ctx, live.Lease, sessions.Finish{EntryID: live.Entry.ID, Writes: []sessions.Write{
		sessions.Usage{Conv: "c", Model: "m-a", Prompt: -1},
	}})
	wantCode(t, "Finish with negative usage", err, errs.Invalid)
}
