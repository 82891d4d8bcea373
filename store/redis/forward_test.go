package redis

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/notes"
	"github.com/heraldgw/herald/sessions"
)

// A commit's writes whose home is another shard are applied there right
// after the commit; when that fails (a process stopping in between), the
// record the commit left is applied by the sweep once it is old enough,
// and only then.
func TestForwardedWritesSweptAfterAFailure(t *testing.T) {
	ctx := context.Background()
	r := testkit.StartRedis(t)
	clk := clock.NewFake(epoch)
	db, err := Open(ctx, Options{URL: r.URL(), Prefix: r.Prefix(), Clock: clk, Shards: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	db.fwd.shutdown() // the test sweeps by hand

	// A user and a file of shards other than the conversation's.
	const conv = "c"
	user, file := "", ""
	for i := 0; user == "" || file == ""; i++ {
		name := strconv.Itoa(i)
		if db.pfxOf("u"+name) != db.convPfx(conv) && user == "" {
			user = "u" + name
		}
		if db.pfxOf("f"+name) != db.convPfx(conv) && file == "" {
			file = "f" + name
		}
	}
	if err := db.Files().PutFile(ctx, file, []byte("bytes")); err != nil {
		t.Fatalf("PutFile: %v", err)
	}

	fails := errors.New("stopped before the write")
	db.applyHook = func(string) error { return fails }
	ss := db.Sessions()
	_, turn, err := ss.AppendClaim(ctx, sessions.Inbound{Conv: conv, Text: "remember this"}, "w", time.Minute)
	if err != nil || turn == nil {
		t.Fatalf("AppendClaim = %v, %v; want a turn", turn, err)
	}
	err = ss.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true, Writes: []sessions.Write{
		notes.Add{User: user, ID: "n1", Text: "lives in Oslo"},
		media.ReleaseFiles{IDs: []string{file}},
	}})
	if err != nil {
		t.Fatalf("Finish = %v; the commit stands when its forwarded writes fail", err)
	}
	if ns, err := db.Notes().Notes(ctx, user); err != nil || len(ns) != 0 {
		t.Fatalf("Notes after the failed apply = %+v, %v; want none yet", ns, err)
	}
	records := func() int64 {
		t.Helper()
		n, err := db.client.ZCard(ctx, fwdKey(db.convPfx(conv))).Result()
		if err != nil {
			t.Fatalf("ZCARD: %v", err)
		}
		return n
	}
	if n := records(); n != 2 {
		t.Fatalf("records left = %d, want 2 (one per home shard)", n)
	}

	db.applyHook = nil
	if n, err := db.sweepForwarded(ctx, sweepBatch); err != nil || n != 0 {
		t.Fatalf("sweep of fresh records = %d, %v; want none applied", n, err)
	}
	clk.Advance(forwardAge * time.Millisecond)
	if n, err := db.sweepForwarded(ctx, sweepBatch); err != nil || n != 2 {
		t.Fatalf("sweep of old records = %d, %v; want 2 applied", n, err)
	}
	ns, err := db.Notes().Notes(ctx, user)
	if err != nil || len(ns) != 1 || ns[0].ID != "n1" || !ns[0].At.Equal(epoch) {
		t.Errorf("Notes after the sweep = %+v, %v; want n1, at the commit's time %v", ns, err, epoch)
	}
	if _, err := db.Files().File(ctx, file); err == nil {
		t.Errorf("the released file is still there after the sweep")
	}
	if n := records(); n != 0 {
		t.Errorf("records left after the sweep = %d, want none", n)
	}
	// Applied again (two sweepers, or a sweep after a slow apply), the
	// writes change nothing.
	_, f := splitForwarded(db.convPfx(conv), []writeOp{{cmd: "NOTEADD", args: []any{db.notesKey(user), "n1", "lives in Oslo", 0}, now: 4, home: db.pfxOf(user)}})
	if err := db.applyForwarded(ctx, "test", db.convPfx(conv), f, ""); err != nil {
		t.Fatalf("applying again: %v", err)
	}
	if ns, _ := db.Notes().Notes(ctx, user); len(ns) != 1 {
		t.Errorf("Notes after applying again = %+v, want the one note", ns)
	}
}

// Without a failure nothing is left behind, and the one-server layout
// forwards nothing.
func TestForwardedWritesLeaveNoRecord(t *testing.T) {
	for _, shards := range []int{0, 4} {
		t.Run("shards "+strconv.Itoa(shards), func(t *testing.T) {
			ctx := context.Background()
			r := testkit.StartRedis(t)
			db, err := Open(ctx, Options{URL: r.URL(), Prefix: r.Prefix(), Clock: clock.NewFake(epoch), Shards: shards})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { db.Close() })
			ss := db.Sessions()
			_, turn, err := ss.AppendClaim(ctx, sessions.Inbound{Conv: "c", Text: "hi"}, "w", time.Minute)
			if err != nil || turn == nil {
				t.Fatalf("AppendClaim = %v, %v; want a turn", turn, err)
			}
			var ws []sessions.Write
			for i := range 8 {
				ws = append(ws, notes.Add{User: "u" + strconv.Itoa(i), ID: "n", Text: "t"})
			}
			if err := ss.Finish(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true, Writes: ws}); err != nil {
				t.Fatalf("Finish: %v", err)
			}
			for i := range 8 {
				if ns, err := db.Notes().Notes(ctx, "u"+strconv.Itoa(i)); err != nil || len(ns) != 1 {
					t.Errorf("Notes(u%d) = %+v, %v; want the note", i, ns, err)
				}
			}
			for i := range db.shards.count() {
				if n, err := db.client.Exists(ctx, fwdKey(db.shards.pfx(i))).Result(); err != nil || n != 0 {
					t.Errorf("shard %d's forwarded writes exist (%d, %v); want none left", i, n, err)
				}
			}
		})
	}
}

func TestForwardRecordRoundTrip(t *testing.T) {
	ops := []writeOp{
		{cmd: "NOTEADD", args: []any{"P{1}:notes:{u}", "id:with|odd\x00bytes", "text\n", 0}, now: 4, home: "P{1}:"},
		{cmd: "DEL", args: []any{"P{1}:file:a", "P{1}:file:b"}, home: "P{1}:"},
		{cmd: "HSET", args: []any{"k", "v", int64(7), []byte{0xff, 0}, true}, home: "P{1}:"},
	}
	_, fwd := splitForwarded("P{0}:", ops)
	if len(fwd) != 1 {
		t.Fatalf("records = %d, want one for the one home", len(fwd))
	}
	got, err := decodeForward("test", fwd[0].member)
	if err != nil {
		t.Fatalf("decodeForward: %v", err)
	}
	if got.home != "P{1}:" || len(got.ops) != len(ops) {
		t.Fatalf("decoded %+v", got)
	}
	for i, o := range got.ops {
		if o.cmd != ops[i].cmd || o.now != ops[i].now || len(o.args) != len(ops[i].args) {
			t.Fatalf("op %d = %+v, want %+v", i, o, ops[i])
		}
		for j, a := range o.args {
			if a != opArg(ops[i].args[j]) {
				t.Errorf("op %d arg %d = %q, want %q", i, j, a, opArg(ops[i].args[j]))
			}
		}
	}
	for _, bad := range []string{"", "3:abc", fwd[0].member[:len(fwd[0].member)-1], fwd[0].member + "x"} {
		if _, err := decodeForward("test", bad); err == nil {
			t.Errorf("decodeForward(%q) took it", bad)
		}
	}
}
