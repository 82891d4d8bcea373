package storetest

import (
	"testing"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

func runQueueDepth(t *testing.T, b Backend) {
	t.Run("entries waiting and running, across conversations, up to a limit", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		depth := func(limit int) int {
			t.Helper()
			n, err := f.ss.QueueDepth(f.ctx, limit)
			if err != nil {
				t.Fatalf("QueueDepth(%d): %v", limit, err)
			}
			return n
		}
		if n := depth(100); n != 0 {
			t.Errorf("QueueDepth of an empty store = %d, want 0", n)
		}
		// One turn started by its append (its entry kept with the lease),
		// then entries queued behind it and in another conversation.
		_, running := f.mustAppendClaim(user("a", "1"), "w1")
		f.appendAll(user("a", "2"), user("a", "3"), user("b", "1"), user("b", "2"))
		if n := depth(100); n != 5 {
			t.Errorf("QueueDepth = %d, want 5 (one running, four waiting)", n)
		}
		if n := depth(3); n != 3 {
			t.Errorf("QueueDepth(3) = %d, want the limit", n)
		}
		f.finish(running.Lease, sessions.Finish{EntryID: running.Entry.ID, Release: true})
		if n := depth(100); n != 4 {
			t.Errorf("QueueDepth after a finish = %d, want 4", n)
		}
		// Either conversation has two entries left; run one's to the end.
		turn := f.mustClaim("w1")
		f.runOut(turn)
		if n := depth(100); n != 2 {
			t.Errorf("QueueDepth after %s's turns = %d, want 2", turn.Lease.Conv, n)
		}
		_, err := f.ss.QueueDepth(f.ctx, 0)
		wantCode(t, "QueueDepth(0)", err, errs.Invalid)
	})
}
