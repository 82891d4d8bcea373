package storetest

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

func runHistory(t *testing.T, b Backend) {
	t.Run("appended under the lease and by finish, in order, every field kept", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "what is the weather?"), user("c", "thanks"))
		turn := f.mustClaim("w1")
		at := f.clk.Now()
		first := []chat.Message{
			{Role: "system", Content: "You are herald.", At: at},
			{Role: "user", Content: "what is the weather?", At: at},
		}
		if err := f.ss.AppendHistory(f.ctx, turn.Lease, first...); err != nil {
			t.Fatalf("AppendHistory: %v", err)
		}
		f.clk.Advance(tick)
		at = f.clk.Now()
		second := []chat.Message{
			{Role: "assistant", At: at, ToolCalls: []chat.ToolCall{
				{ID: "call_1", Name: "weather", Arguments: `{"city":"Oslo"}`},
				{ID: "call_2", Name: "clock", Arguments: `{}`},
			}},
			{Role: "tool", ToolCallID: "call_1", Name: "weather", Content: `{"temp":-3}`, At: at},
			{Role: "tool", ToolCallID: "call_2", Name: "clock", Content: "12:00", At: at},
			{Role: "assistant", Content: "It is −3 °C in Oslo.\n\nAnything else?", At: at},
		}
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, History: second})
		e := f.next(turn.Lease)
		third := []chat.Message{{Role: "user", Content: "thanks", At: at}, {Role: "assistant", Content: "You're welcome.", At: at}}
		f.finish(turn.Lease, sessions.Finish{EntryID: e.ID, History: third, Release: true})

		want := append(append(append([]chat.Message{}, first...), second...), third...)
		if d := cmp.Diff(want, f.history("c"), timeOpts); d != "" {
			t.Errorf("History (-want +got):\n%s", d)
		}
		if h := f.history("other"); len(h) != 0 {
			t.Errorf("another conversation's history = %+v, want none", h)
		}
	})

	t.Run("a claim brings the conversation's history", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"), user("c", "2"), user("d", "1"))
		turn := f.mustClaim("w1")
		if turn.Lease.Conv != "c" || !turn.HistoryRead || len(turn.History) != 0 {
			t.Fatalf("first claim = %s, history read %v, %d messages; want c with its empty history read",
				turn.Lease.Conv, turn.HistoryRead, len(turn.History))
		}
		first := []chat.Message{{Role: "user", Content: "1", At: f.clk.Now()}, {Role: "assistant", Content: "one", At: f.clk.Now()}}
		f.clk.Advance(tick)
		// d has waited longest, then c with its next entry.
		next := f.finishAndClaim(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, History: first, Release: true}, "w1")
		if next == nil || next.Lease.Conv != "d" || !next.HistoryRead || len(next.History) != 0 {
			t.Fatalf("FinishAndClaim = %+v, want d with its empty history read", next)
		}
		again := f.mustClaim("w2")
		if again.Lease.Conv != "c" || !again.HistoryRead {
			t.Fatalf("claim = %s, history read %v; want c with its history", again.Lease.Conv, again.HistoryRead)
		}
		if d := cmp.Diff(first, again.History, timeOpts); d != "" {
			t.Errorf("history with the claim (-want +got):\n%s", d)
		}
		// A FinishAndClaim that takes the same conversation again brings
		// the history its own finish appended.
		f.append(user("c", "3"))
		second := []chat.Message{{Role: "assistant", Content: "two", At: f.clk.Now()}}
		f.finish(next.Lease, sessions.Finish{EntryID: next.Entry.ID, Release: true})
		third := f.finishAndClaim(again.Lease, sessions.Finish{EntryID: again.Entry.ID, History: second, Release: true}, "w2")
		if third == nil || third.Lease.Conv != "c" || third.Entry.Text != "3" || !third.HistoryRead {
			t.Fatalf("FinishAndClaim = %+v, want c's entry 3 with its history", third)
		}
		if d := cmp.Diff(append(first, second...), third.History, timeOpts); d != "" {
			t.Errorf("history with FinishAndClaim (-want +got):\n%s", d)
		}
		if d := cmp.Diff(f.history("c"), third.History, timeOpts); d != "" {
			t.Errorf("history with the claim against History (-History +claim):\n%s", d)
		}
	})

	t.Run("a long history in one call", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"))
		turn := f.mustClaim("w1")
		long := make([]chat.Message, 2500)
		for i := range long {
			long[i] = chat.Message{Role: "tool", ToolCallID: "call", Content: strconv.Itoa(i), At: t0}
		}
		if err := f.ss.AppendHistory(f.ctx, turn.Lease, long[:1200]...); err != nil {
			t.Fatalf("AppendHistory: %v", err)
		}
		f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, History: long[1200:], Release: true})
		if d := cmp.Diff(long, f.history("c"), timeOpts); d != "" {
			t.Errorf("History (-want +got):\n%s", d)
		}
		f.append(user("c", "2"))
		if again := f.mustClaim("w1"); !again.HistoryRead || !cmp.Equal(long, again.History, timeOpts) {
			t.Errorf("the claim brought %d messages (read %v), want the %d of the history", len(again.History), again.HistoryRead, len(long))
		}
	})

	t.Run("finish drops the oldest messages before appending", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		msg := func(role, text string) chat.Message {
			return chat.Message{Role: role, Content: text, At: f.clk.Now()}
		}
		// Turns that AppendClaim starts, as the router starts them: each
		// finish commits, releases, and the next turn gets the history
		// the store has then (on Redis, the copy the process kept).
		turn := func(text string) *sessions.Turn {
			_, turn := f.mustAppendClaim(user("c", text), "w1")
			return turn
		}
		t1 := turn("1")
		f.finish(t1.Lease, sessions.Finish{EntryID: t1.Entry.ID, History: []chat.Message{msg("user", "1"), msg("assistant", "one")}, Release: true})
		t2 := turn("2")
		f.finish(t2.Lease, sessions.Finish{EntryID: t2.Entry.ID, History: []chat.Message{msg("user", "2"), msg("assistant", "two")}, Release: true})
		t3 := turn("3")
		third := []chat.Message{msg("user", "3"), msg("assistant", "three")}
		f.finish(t3.Lease, sessions.Finish{EntryID: t3.Entry.ID, History: third, DropHistory: 3, Release: true})
		want := append([]chat.Message{t3.History[3]}, third...)
		if d := cmp.Diff(want, f.history("c"), timeOpts); d != "" {
			t.Errorf("History after dropping 3 (-want +got):\n%s", d)
		}
		t4 := turn("4")
		if d := cmp.Diff(want, t4.History, timeOpts); d != "" {
			t.Errorf("the next turn's history (-want +got):\n%s", d)
		}
		// More than there is drops all of it; with nothing appended.
		f.finish(t4.Lease, sessions.Finish{EntryID: t4.Entry.ID, DropHistory: 10, Release: true})
		if h := f.history("c"); len(h) != 0 {
			t.Errorf("History after dropping more than it had = %+v, want none", h)
		}
		t5 := turn("5")
		if len(t5.History) != 0 {
			t.Errorf("the next turn's history = %+v, want none", t5.History)
		}
		err := f.ss.Finish(f.ctx, t5.Lease, sessions.Finish{EntryID: t5.Entry.ID, DropHistory: -1})
		wantCode(t, "Finish with a negative DropHistory", err, errs.Invalid)
		// /new's clear: all of it, then what the turn appends.
		f.finish(t5.Lease, sessions.Finish{EntryID: t5.Entry.ID, History: third, Release: true})
		t6 := turn("6")
		fresh := []chat.Message{msg("assistant", "fresh")}
		f.finish(t6.Lease, sessions.Finish{EntryID: t6.Entry.ID, History: fresh, DropHistory: sessions.DropAllHistory, Release: true})
		if d := cmp.Diff(fresh, f.history("c"), timeOpts); d != "" {
			t.Errorf("History after dropping all of it (-want +got):\n%s", d)
		}
		if t7 := turn("7"); !cmp.Equal(fresh, t7.History, timeOpts) {
			t.Errorf("the next turn's history = %+v, want %+v", t7.History, fresh)
		}
	})

	t.Run("clear history", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "1"), user("d", "1"))
		leases := map[string]sessions.Lease{}
		for range 2 {
			turn := f.mustClaim("w1")
			msg := chat.Message{Role: "user", Content: turn.Lease.Conv, At: f.clk.Now()}
			f.finish(turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, History: []chat.Message{msg}})
			leases[turn.Lease.Conv] = turn.Lease
		}
		if err := f.ss.ClearHistory(f.ctx, "c"); err != nil {
			t.Fatalf("ClearHistory: %v", err)
		}
		if h := f.history("c"); len(h) != 0 {
			t.Errorf("History after ClearHistory = %+v, want none", h)
		}
		if h := f.history("d"); len(h) != 1 {
			t.Errorf("another conversation's history = %+v, want its one message", h)
		}
		after := chat.Message{Role: "user", Content: "after", At: f.clk.Now()}
		if err := f.ss.AppendHistory(f.ctx, leases["c"], after); err != nil {
			t.Fatalf("AppendHistory after ClearHistory: %v", err)
		}
		if d := cmp.Diff([]chat.Message{after}, f.history("c"), timeOpts); d != "" {
			t.Errorf("History after clearing and appending (-want +got):\n%s", d)
		}
		if err := f.ss.ClearHistory(f.ctx, "never-used"); err != nil {
			t.Errorf("ClearHistory of a conversation without history: %v", err)
		}
	})

	t.Run("meta set, get and delete", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		set := func(conv, key, value string) {
			t.Helper()
			if err := f.ss.SetMeta(f.ctx, conv, key, value); err != nil {
				t.Fatalf("SetMeta(%s, %s, %s): %v", conv, key, value, err)
			}
		}
		if m := f.meta("c"); len(m) != 0 {
			t.Errorf("Meta of a new conversation = %v, want empty", m)
		}
		set("c", "busy_input", "queue")
		set("c", "goal", "ship it")
		set("d", "busy_input", "interrupt")
		set("c", "busy_input", "steer")
		if d := cmp.Diff(map[string]string{"busy_input": "steer", "goal": "ship it"}, f.meta("c")); d != "" {
			t.Errorf("Meta(c) (-want +got):\n%s", d)
		}
		set("c", "goal", "")
		set("c", "never-set", "")
		if d := cmp.Diff(map[string]string{"busy_input": "steer"}, f.meta("c")); d != "" {
			t.Errorf("Meta(c) after deleting (-want +got):\n%s", d)
		}
		if d := cmp.Diff(map[string]string{"busy_input": "interrupt"}, f.meta("d")); d != "" {
			t.Errorf("Meta(d) (-want +got):\n%s", d)
		}
	})
}
