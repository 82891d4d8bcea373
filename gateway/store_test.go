package gateway

import (
	"context"
	"testing"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// TestCommitsWithRepliesNotifyDelivery checks both ways a turn commits:
// each wakes the delivery worker when it queued a reply, and only then.
func TestCommitsWithRepliesNotifyDelivery(t *testing.T) {
	reply := []outbox.Message{{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Text: "hi"}}
	cases := []struct {
		desc   string
		outbox []outbox.Message
		claim  bool
		want   int
	}{
		{desc: "Finish with a reply", outbox: reply, want: 1},
		{desc: "Finish without a reply", want: 0},
		{desc: "FinishAndClaim with a reply", outbox: reply, claim: true, want: 1},
		{desc: "FinishAndClaim without a reply", claim: true, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := context.Background()
			db := openSQLite(t, clock.NewFake(t0))
			notified := 0
			s := notifyingSessions{Store: db.Sessions(), notify: func() { notified++ }}
			if _, err := s.Append(ctx, sessions.Inbound{Conv: "telegram:1", Text: "hello"}); err != nil {
				t.Fatal(err)
			}
			turn, err := s.Claim(ctx, "w", 0)
			if err != nil || turn == nil {
				t.Fatalf("Claim = %v, %v; want a turn", turn, err)
			}
			f := sessions.Finish{EntryID: turn.Entry.ID, Outbox: tc.outbox, Release: true}
			if tc.claim {
				_, err = s.FinishAndClaim(ctx, turn.Lease, f, "w", 0)
			} else {
				err = s.Finish(ctx, turn.Lease, f)
			}
			if err != nil {
				t.Fatal(err)
			}
			if notified != tc.want {
				t.Errorf("notified %d times, want %d", notified, tc.want)
			}
		})
	}
}
