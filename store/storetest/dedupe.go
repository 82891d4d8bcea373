package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/sessions"
)

func runDedupe(t *testing.T, b Backend) {
	const conv = "telegram:7"

	// Each case appends a first entry with message id "m1", does something,
	// then appends "again" with the same id and checks what came of it.
	cases := []struct {
		desc    string
		between func(f *fixture)
		again   sessions.Inbound
		dup     bool
		queued  map[string][]string // what each conversation hands out afterwards
	}{
		{
			desc:   "same id in the same conversation is a duplicate",
			again:  withMessageID(user(conv, "redelivered"), "m1"),
			dup:    true,
			queued: map[string][]string{conv: {"first"}},
		},
		{
			desc: "duplicate after the first entry was acked",
			between: func(f *fixture) {
				turn := f.mustClaim("w1")
				f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true})
			},
			again:  withMessageID(user(conv, "redelivered"), "m1"),
			dup:    true,
			queued: map[string][]string{conv: nil},
		},
		{
			desc:    "duplicate after closing and reopening the store",
			between: func(f *fixture) { f.reopen(false) },
			again:   withMessageID(user(conv, "redelivered"), "m1"),
			dup:     true,
			queued:  map[string][]string{conv: {"first"}},
		},
		{
			desc:    "duplicate after restarting the server",
			between: func(f *fixture) { f.reopen(true) },
			again:   withMessageID(user(conv, "redelivered"), "m1"),
			dup:     true,
			queued:  map[string][]string{conv: {"first"}},
		},
		{
			desc:    "remembered until the window ends",
			between: func(f *fixture) { f.clk.Advance(sessions.DefaultDedupeWindow - time.Minute) },
			again:   withMessageID(user(conv, "redelivered"), "m1"),
			dup:     true,
			queued:  map[string][]string{conv: {"first"}},
		},
		{
			desc:   "a synthetic entry with a seen id is a duplicate too",
			again:  withMessageID(synthetic(conv, "redelivered"), "m1"),
			dup:    true,
			queued: map[string][]string{conv: {"first"}},
		},
		{
			desc:   "same id in another conversation is new",
			again:  withMessageID(user("telegram:8", "elsewhere"), "m1"),
			queued: map[string][]string{conv: {"first"}, "telegram:8": {"elsewhere"}},
		},
		{
			desc:   "another id in the same conversation is new",
			again:  withMessageID(user(conv, "second"), "m2"),
			queued: map[string][]string{conv: {"first", "second"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			first := f.append(withMessageID(user(conv, "first"), "m1"))
			if first.Duplicate {
				t.Fatalf("first Append: Duplicate = true")
			}
			f.clk.Advance(tick)
			if tc.between != nil {
				tc.between(f)
			}
			got := f.append(tc.again)
			if got.Duplicate != tc.dup {
				t.Errorf("second Append: Duplicate = %v, want %v", got.Duplicate, tc.dup)
			}
			if tc.dup && got.EntryID != first.EntryID {
				t.Errorf("second Append: EntryID = %q, want the first entry's %q", got.EntryID, first.EntryID)
			}
			// Entry ids need be unique only within a conversation.
			if !tc.dup && tc.again.Conv == conv && got.EntryID == first.EntryID {
				t.Errorf("second Append: EntryID = %q, the same as the first entry's", got.EntryID)
			}
			checkQueued(f, tc.queued)
		})
	}

	t.Run("message ids with odd characters", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		ids := []string{"a|b", "a|b|0", "a b/ü:{x}%7D", "*", "-1001234567890:42"}
		first := map[string]string{}
		for _, id := range ids {
			first[id] = f.append(withMessageID(user(conv, id), id)).EntryID
			f.clk.Advance(tick)
		}
		for _, id := range ids {
			r := f.append(withMessageID(user(conv, "again"), id))
			if !r.Duplicate || r.EntryID != first[id] {
				t.Errorf("Append with seen message id %q = %+v, want a duplicate of %q", id, r, first[id])
			}
		}
		checkQueued(f, map[string][]string{conv: ids})
	})

	t.Run("entries without a message id are never deduped", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		ids := f.appendAll(user(conv, "same"), user(conv, "same"), synthetic(conv, "same"))
		if ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2] {
			t.Errorf("entry ids %q are not distinct", ids)
		}
		checkQueued(f, map[string][]string{conv: {"same", "same", "same"}})
	})

	t.Run("concurrent duplicates make one entry", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		const appenders = 16
		results := make([]sessions.AppendResult, appenders)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range appenders {
			wg.Go(func() {
				<-start
				r, err := f.ss.Append(f.ctx, withMessageID(user(conv, "hello"), "m1"))
				if err != nil {
					t.Errorf("Append %d: %v", i, err)
				}
				results[i] = r
			})
		}
		close(start)
		wg.Wait()
		fresh := 0
		for i, r := range results {
			if !r.Duplicate {
				fresh++
			}
			if r.EntryID != results[0].EntryID {
				t.Errorf("Append %d: EntryID = %q, Append 0 got %q", i, r.EntryID, results[0].EntryID)
			}
		}
		if fresh != 1 {
			t.Errorf("%d of %d concurrent Appends were not duplicates, want 1", fresh, appenders)
		}
		checkQueued(f, map[string][]string{conv: {"hello"}})
	})

	// The window is measured with a real clock: a backend may leave the
	// forgetting to its server (a key with a TTL), which a fake clock
	// cannot move.
	t.Run("forgotten after the window", func(t *testing.T) {
		const window = 1500 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
		defer cancel()
		st, _ := openStore(t, b.New(t), clock.Real{}, sessions.Limits{DedupeWindow: window})
		ss := st.Sessions()
		in := withMessageID(user(conv, "hello"), "m1")

		keyed := reply(conv, "report")
		keyed.IdempotencyKey = "cron:daily"
		firstMsg, _, err := st.Outbox().Enqueue(ctx, keyed)
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		first, err := ss.Append(ctx, in)
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		appended := time.Now()
		if id, dup, err := st.Outbox().Enqueue(ctx, keyed); err != nil || !dup || id != firstMsg {
			t.Errorf("Enqueue within the window = %q, %v, %v; want %q, true, nil", id, dup, err, firstMsg)
		}
		again, err := ss.Append(ctx, in)
		if err != nil {
			t.Fatalf("Append within the window: %v", err)
		}
		if !again.Duplicate || again.EntryID != first.EntryID {
			t.Errorf("Append within the window = %+v, want a duplicate of %q", again, first.EntryID)
		}

		time.Sleep(time.Until(appended.Add(window + 700*time.Millisecond)))
		later, err := ss.Append(ctx, in)
		if err != nil {
			t.Fatalf("Append after the window: %v", err)
		}
		if later.Duplicate || later.EntryID == first.EntryID {
			t.Errorf("Append after the window = %+v, want a new entry", later)
		}
		if id, dup, err := st.Outbox().Enqueue(ctx, keyed); err != nil || dup || id == firstMsg {
			t.Errorf("Enqueue after the window = %q, %v, %v; want a new message", id, dup, err)
		}
	})
}

// checkQueued drains each conversation in want and compares what it hands
// out; a nil list means the conversation must not be claimable at all.
func checkQueued(f *fixture, want map[string][]string) {
	f.t.Helper()
	got := map[string][]string{}
	for {
		turn := f.claim("checker")
		if turn == nil {
			break
		}
		conv := turn.Lease.Conv
		if _, seen := got[conv]; seen {
			f.t.Fatalf("conversation %q claimable again after it was drained", conv)
		}
		var texts []string
		for e := &turn.Entry; e != nil; e = f.next(turn.Lease) {
			texts = append(texts, e.Text)
			if len(texts) > 1000 {
				f.t.Fatalf("conversation %q: more than 1000 entries", conv)
			}
			f.finish(turn.Lease, sessions.Finish{EntryID: e.ID})
		}
		f.release(turn.Lease)
		got[conv] = texts
	}
	wantSome := map[string][]string{}
	for conv, texts := range want {
		if texts != nil {
			wantSome[conv] = texts
		}
	}
	if d := cmp.Diff(wantSome, got); d != "" {
		f.t.Errorf("queued entries by conversation (-want +got):\n%s", d)
	}
}
