package storetest

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// listConvs lists up to limit conversations after the cursor before.
func (f *fixture) listConvs(limit int, before string) []sessions.ConvSummary {
	f.t.Helper()
	got, err := f.st.Conversations().Conversations(f.ctx, sessions.ConvQuery{Limit: limit, Before: before})
	if err != nil {
		f.t.Fatalf("Conversations(%d, %q): %v", limit, before, err)
	}
	return got
}

// convSummary reads one conversation's summary.
func (f *fixture) convSummary(conv string) sessions.ConvSummary {
	f.t.Helper()
	got, err := f.st.Conversations().Conversation(f.ctx, conv)
	if err != nil {
		f.t.Fatalf("Conversation(%q): %v", conv, err)
	}
	return got
}

// convOpts compare summaries but for their cursors, which only the
// store reads.
var convOpts = cmp.Options{timeOpts, cmpopts.IgnoreFields(sessions.ConvSummary{}, "Cursor")}

// convKeys is the conversations of a list, in its order.
func convKeys(list []sessions.ConvSummary) []string {
	out := make([]string, len(list))
	for i, c := range list {
		out[i] = c.Conv
	}
	return out
}

func runConversations(t *testing.T, b Backend) {
	t.Run("newest activity first, each with its queue, lease and metadata", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		if got := f.listConvs(10, ""); len(got) != 0 {
			t.Errorf("an empty store lists %v, want none", convKeys(got))
		}
		// a: a turn started by its append, one entry behind it.
		_, turn := f.mustAppendClaim(user("a", "1"), "w1")
		f.clk.Advance(tick)
		f.append(user("a", "2"))
		tA2 := f.clk.Now()
		f.clk.Advance(tick)
		// b: two entries waiting, and its token totals.
		f.appendAll(user("b", "1"), user("b", "2"))
		tB := f.clk.Now()
		if err := f.ss.SetMeta(f.ctx, "b", sessions.UsagePrefix+"prompt_tokens.m", "12"); err != nil {
			t.Fatalf("SetMeta: %v", err)
		}
		f.clk.Advance(tick)
		f.append(user("c", "1"))
		tC := f.clk.Now()
		f.clk.Advance(tick)

		want := []sessions.ConvSummary{
			{Conv: "c", LastActive: tC, Queued: 1},
			{Conv: "b", LastActive: tB, Queued: 2, Meta: map[string]string{sessions.UsagePrefix + "prompt_tokens.m": "12"}},
			{Conv: "a", LastActive: tA2, Queued: 2, Worker: "w1", Expires: turn.Lease.Expires},
		}
		if diff := cmp.Diff(want, f.listConvs(10, ""), convOpts); diff != "" {
			t.Errorf("Conversations (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want[1], f.convSummary("b"), convOpts); diff != "" {
			t.Errorf("Conversation(b) (-want +got):\n%s", diff)
		}

		// A commit is activity: a's finish moves it first, its lease
		// given back, one entry left and the turn's metadata written.
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true, Meta: map[string]string{"mode": "queue"}})
		tDone := f.clk.Now()
		want = []sessions.ConvSummary{
			{Conv: "a", LastActive: tDone, Queued: 1, Meta: map[string]string{"mode": "queue"}},
			want[0], want[1],
		}
		if diff := cmp.Diff(want, f.listConvs(10, ""), convOpts); diff != "" {
			t.Errorf("Conversations after a's commit (-want +got):\n%s", diff)
		}

		// A lease that ran out by the store's clock holds nothing; a
		// claim is no activity.
		f.clk.Advance(tick)
		held := f.mustClaim("w2")
		if diff := cmp.Diff(held.Lease.Worker, f.convSummary(held.Lease.Conv).Worker); diff != "" {
			t.Errorf("Conversation(%s).Worker while held (-want +got):\n%s", held.Lease.Conv, diff)
		}
		f.clk.Advance(ttl + tick)
		got := f.convSummary(held.Lease.Conv)
		if got.Worker != "" || !got.Expires.IsZero() {
			t.Errorf("Conversation(%s) after its lease ran out: worker %q until %v, want none", held.Lease.Conv, got.Worker, got.Expires)
		}
		if diff := cmp.Diff(convKeys(want), convKeys(f.listConvs(10, ""))); diff != "" {
			t.Errorf("order after a claim (-want +got):\n%s", diff)
		}

		eachReopening(t, func(t *testing.T, restart bool) {
			f.reopen(restart)
			if diff := cmp.Diff(convKeys(want), convKeys(f.listConvs(10, ""))); diff != "" {
				t.Errorf("order after reopening (-want +got):\n%s", diff)
			}
		})
	})

	t.Run("pages go on after the cursor, each conversation once", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		var want []string
		for _, conv := range []string{"p1", "p2", "p3", "p4", "p5"} {
			f.append(user(conv, "hi"))
			want = append([]string{conv}, want...)
			f.clk.Advance(tick)
		}
		// Four at the same instant, across pages, some with the characters
		// a backend may escape: each listed once, on one page or the next.
		ties := []string{"q1", "q}2", "Q%3", "é4"}
		for _, conv := range ties {
			f.append(user(conv, "hi"))
		}
		want = append(ties, want...)
		var got []string
		before := ""
		for range 10 {
			page := f.listConvs(2, before)
			if len(page) > 2 {
				t.Fatalf("a page of limit 2 has %d", len(page))
			}
			if len(page) == 0 {
				break
			}
			got = append(got, convKeys(page)...)
			before = page[len(page)-1].Cursor
		}
		if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("every page together (-want +got):\n%s", diff)
		}
		if len(got) == len(want) {
			if diff := cmp.Diff(want[len(ties):], got[len(ties):]); diff != "" {
				t.Errorf("order past the ties (-want +got):\n%s", diff)
			}
		}
	})

	t.Run("the end of a history, and its length", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		_, turn := f.mustAppendClaim(user("h", "1"), "w1")
		var history []chat.Message
		for i := range 5 {
			history = append(history, chat.Message{Role: "user", Content: fmt.Sprint("m", i)})
		}
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true, History: history})
		cs := f.st.Conversations()
		for _, tc := range []struct {
			desc string
			conv string
			n    int
			want []chat.Message
			all  int
		}{
			{"the last two", "h", 2, history[3:], 5},
			{"more than it holds", "h", 50, history, 5},
			{"a conversation without one", "none", 3, nil, 0},
		} {
			got, total, err := cs.RecentHistory(f.ctx, tc.conv, tc.n)
			if err != nil {
				t.Fatalf("%s: RecentHistory: %v", tc.desc, err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" || total != tc.all {
				t.Errorf("%s: %d in all, want %d; messages (-want +got):\n%s", tc.desc, total, tc.all, diff)
			}
		}
		_, _, err := cs.RecentHistory(f.ctx, "h", 0)
		wantCode(t, "RecentHistory(0)", err, errs.Invalid)
		_, _, err = cs.RecentHistory(f.ctx, "", 1)
		wantCode(t, "RecentHistory(\"\")", err, errs.Invalid)
	})

	t.Run("bad input", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.append(user("a", "1"))
		cs := f.st.Conversations()
		for _, q := range []sessions.ConvQuery{
			{Limit: 0},
			{Limit: -1},
			{Limit: sessions.MaxConvList + 1},
			{Limit: 1, Before: "nonsense"},
		} {
			_, err := cs.Conversations(f.ctx, q)
			wantCode(t, "Conversations("+q.Before+")", err, errs.Invalid)
		}
		_, err := cs.Conversation(f.ctx, "")
		wantCode(t, "Conversation(\"\")", err, errs.Invalid)
		_, err = cs.Conversation(f.ctx, "never-seen")
		wantCode(t, "Conversation(never-seen)", err, errs.NotFound)
		if got := f.listConvs(sessions.MaxConvList, ""); len(got) != 1 {
			t.Errorf("Conversations(%d) = %v, want a", sessions.MaxConvList, convKeys(got))
		}
	})
}
