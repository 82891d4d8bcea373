package redis

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
)

// appendClaim delivers a message to conv and returns the turn the append
// started.
func appendClaim(t *testing.T, s sessions.Store, conv, id string) *sessions.Turn {
	t.Helper()
	_, turn, err := s.AppendClaim(context.Background(), sessions.Inbound{Conv: conv, MessageID: id, Text: "m" + id}, "w", time.Minute)
	if err != nil {
		t.Fatalf("AppendClaim %s: %v", id, err)
	}
	if turn == nil {
		t.Fatalf("AppendClaim %s started no turn", id)
	}
	return turn
}

// exchange is a turn's two messages.
func exchange(n int) []chat.Message {
	s := strconv.Itoa(n)
	return []chat.Message{{Role: "user", Content: "q" + s}, {Role: "assistant", Content: "a" + s, At: epoch}}
}

func commit(t *testing.T, s sessions.Store, turn *sessions.Turn, msgs []chat.Message) {
	t.Helper()
	f := sessions.Finish{EntryID: turn.Entry.ID, History: msgs, Release: true}
	if err := s.Finish(context.Background(), turn.Lease, f); err != nil {
		t.Fatalf("Finish: %v", err)
	}
}

func wantHistory(t *testing.T, what string, want, got []chat.Message) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("%s: history (-want +got):\n%s", what, diff)
	}
}

// Turns of one conversation that follow each other in one process take
// the history that process kept, and it is the whole history.
func TestKeptHistoryServesTheNextTurn(t *testing.T) {
	ctx := context.Background()
	db, _ := newFake(t)
	s := db.Sessions()
	var want []chat.Message
	for i := range 5 {
		stored, err := s.History(ctx, "c")
		if err != nil {
			t.Fatal(err)
		}
		turn := appendClaim(t, s, "c", strconv.Itoa(i))
		// What the turn is given is what a read returns.
		wantHistory(t, "turn "+strconv.Itoa(i), stored, turn.History)
		// A turn may change what it was given.
		for j := range turn.History {
			turn.History[j].Content = "changed by the turn"
			for k := range turn.History[j].ToolCalls {
				turn.History[j].ToolCalls[k].Name = "changed by the turn"
			}
		}
		turn.History = append(turn.History, chat.Message{Role: "user", Content: "appended by the turn"})
		msgs := exchange(i)
		switch i {
		case 1:
			// Stored, a string that is not UTF-8 and a time with a
			// monotonic reading and a zone come back changed.
			msgs[0].Content = "bad \xff byte"
			msgs[1].At = time.Now().In(time.FixedZone("X", 3600))
		case 2:
			// So does a time in a zone seconds off a whole minute, as
			// its encoding keeps the offset to the minute.
			msgs[1].At = time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("odd", 3600+21))
			msgs[1].ToolCalls = []chat.ToolCall{{ID: "t1", Name: "memory", Arguments: "{}"}}
		}
		commit(t, s, turn, msgs)
		want = append(want, msgs...)
	}
	if got := db.hist.served.Load(); got != 4 {
		t.Fatalf("%d turns took the kept history, want 4 (every one after the first)", got)
	}
	got, err := s.History(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || got[2].Content == want[2].Content || !got[3].At.Equal(want[3].At) {
		t.Fatalf("stored history %+v, want the committed %+v with the bad byte replaced", got, want)
	}
}

// Whatever another process did to the history, the next turn here sees
// the history as stored.
func TestKeptHistoryNotServedAfterOthersWrote(t *testing.T) {
	ctx := context.Background()
	r := testkit.StartRedis(t)
	clk := clock.NewFake(epoch)
	here := openDB(t, r, clk, sessions.Limits{})
	there := openDB(t, r, clk, sessions.Limits{})
	s, o := here.Sessions(), there.Sessions()

	t.Run("another process ran a turn", func(t *testing.T) {
		commit(t, s, appendClaim(t, s, "a", "1"), exchange(1))
		commit(t, o, appendClaim(t, o, "a", "2"), exchange(2))
		turn := notServed(t, here, func() *sessions.Turn { return appendClaim(t, s, "a", "3") })
		wantHistory(t, "after the other's turn", append(exchange(1), exchange(2)...), turn.History)
	})

	t.Run("another process wrote under this process's lease", func(t *testing.T) {
		// Another process holding the same token (the lease changed hands
		// without a grant here) appends: the fence is the same, the
		// length is not.
		turn := appendClaim(t, s, "b", "1")
		commit(t, o, turn, exchange(1))
		turn = notServed(t, here, func() *sessions.Turn { return appendClaim(t, s, "b", "2") })
		wantHistory(t, "after the other's write", exchange(1), turn.History)
	})

	t.Run("a state of an earlier layout, without the history's length", func(t *testing.T) {
		commit(t, s, appendClaim(t, s, "d", "1"), exchange(1))
		if err := here.client.HDel(ctx, here.convKey(convTag("d"), "state"), "hl").Err(); err != nil {
			t.Fatal(err)
		}
		turn := notServed(t, here, func() *sessions.Turn { return appendClaim(t, s, "d", "2") })
		wantHistory(t, "without hl", exchange(1), turn.History)
		// Its commit writes the length again, and the next turn takes
		// the kept copy.
		commit(t, s, turn, exchange(2))
		before := here.hist.served.Load()
		turn = appendClaim(t, s, "d", "3")
		wantHistory(t, "after hl came back", append(exchange(1), exchange(2)...), turn.History)
		if here.hist.served.Load() != before+1 {
			t.Fatal("the turn after a commit read the history again")
		}
	})

	t.Run("another process cleared the history", func(t *testing.T) {
		commit(t, s, appendClaim(t, s, "c", "1"), exchange(1))
		held := appendClaim(t, s, "c", "2")
		// Cleared and written again to the same length, under the lease
		// this process holds: only the fence tells.
		if err := o.ClearHistory(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		if err := o.AppendHistory(ctx, held.Lease, exchange(7)...); err != nil {
			t.Fatal(err)
		}
		commit(t, s, held, exchange(2))
		turn := notServed(t, here, func() *sessions.Turn { return appendClaim(t, s, "c", "3") })
		wantHistory(t, "after the other's clear", append(exchange(7), exchange(2)...), turn.History)
	})
}

// notServed runs start and fails when the turn it started took the
// history db kept.
func notServed(t *testing.T, db *DB, start func() *sessions.Turn) *sessions.Turn {
	t.Helper()
	before := db.hist.served.Load()
	turn := start()
	if db.hist.served.Load() != before {
		t.Fatal("the turn took a kept history that was out of date")
	}
	return turn
}

// Extending appends in place, where there is room, and leaves the copies
// turns were given as they were.
func TestHistoryEntryExtendsInPlace(t *testing.T) {
	msg := func(s string) chat.Message { return chat.Message{Role: "user", Content: s} }
	e := histEntry{token: 1, msgs: []chat.Message{msg("a")}}
	var turns [][]chat.Message
	for _, s := range []string{"b", "c", "d", "e", "f"} {
		turns = append(turns, e.copy())
		e = e.extended([]chat.Message{msg(s)}, 1)
	}
	for i, got := range turns {
		if len(got) != i+1 || got[i].Content != string(rune('a'+i)) {
			t.Errorf("turn %d's copy changed: %+v", i, got)
		}
		turns[i] = append(got, msg("the turn's own")) // never reaches e
	}
	for i, m := range e.msgs {
		if want := string(rune('a' + i)); m.Content != want {
			t.Errorf("message %d is %q, want %q", i, m.Content, want)
		}
	}
	if len(e.msgs) != 6 || e.size != 5 {
		t.Errorf("extended to %d messages of size %d, want 6 of 5", len(e.msgs), e.size)
	}
	// Room left in the array is used: one more message does not copy the
	// history.
	e.msgs = slices.Grow(e.msgs, 1)
	if f := e.extended([]chat.Message{msg("g")}, 1); &f.msgs[0] != &e.msgs[0] {
		t.Error("extending with room to spare copied the history")
	}
}

func TestHistoryCacheStaysWithinItsBound(t *testing.T) {
	c := newHistCache(8 << 10)
	e := histEntry{token: 1, size: 512}
	for i := range 100 {
		c.put("c"+strconv.Itoa(i), e)
	}
	if want := c.max / e.cost(); c.bytes > c.max || len(c.m) != want {
		t.Fatalf("kept %d entries of %d bytes, want %d within %d", len(c.m), c.bytes, want, c.max)
	}
	c.put("big", histEntry{token: 1, size: c.max / 8})
	if _, ok := c.get("big"); ok {
		t.Fatal("kept a history of more than an eighth of the bound")
	}
	none := newHistCache(0)
	none.put("empty", histEntry{token: 1})
	if _, ok := none.get("empty"); ok || none.bytes != 0 {
		t.Fatal("a cache bounded at 0 kept an empty history")
	}
}
