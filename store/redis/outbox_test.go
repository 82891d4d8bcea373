package redis

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

func msg(platform, text string) outbox.Message {
	// Each text its own chat: a target whose messages wait for none of the
	// others.
	return outbox.Message{Target: outbox.Target{Platform: platform, Chat: text}, Text: text, Kind: "reply"}
}

func texts[T any](xs []T, text func(T) string) []string {
	out := []string{}
	for _, x := range xs {
		out = append(out, text(x))
	}
	return out
}

func claimedTexts(cs []outbox.Claimed) []string {
	return texts(cs, func(c outbox.Claimed) string { return c.Text })
}

func msgTexts(ms []outbox.Message) []string {
	return texts(ms, func(m outbox.Message) string { return m.Text })
}

func TestOutboxLifecycle(t *testing.T) {
	ctx := context.Background()
	db, clk := newFake(t)
	o := db.Outbox()
	enqueue := func(m outbox.Message) string {
		t.Helper()
		id, dup, err := o.Enqueue(ctx, m)
		if err != nil || dup {
			t.Fatalf("Enqueue(%q) = %s, %v, %v", m.Text, id, dup, err)
		}
		return id
	}
	// Same millisecond: enqueue order must hold.
	for _, s := range []string{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "t10", "t11"} {
		enqueue(msg("telegram", s))
	}
	enqueue(msg("slack", "s1"))
	later := msg("telegram", "later")
	later.NextAttempt = epoch.Add(time.Hour)
	enqueue(later)

	got, err := o.Claim(ctx, "d1", []string{"telegram", "telegram"}, 3, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"t1", "t2", "t3"}, claimedTexts(got)); diff != "" {
		t.Fatalf("first claim (-want +got):\n%s", diff)
	}
	for _, c := range got {
		if c.Token == 0 || !c.Expires.Equal(epoch.Add(time.Minute)) || !c.CreatedAt.Equal(epoch) {
			t.Fatalf("claimed %+v", c)
		}
	}
	t1, t2, t3 := got[0], got[1], got[2]

	if err := o.Ack(ctx, t1); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	wantCode(t, "second Ack", o.Ack(ctx, t1), errs.NotFound)

	// A transient failure counts an attempt and waits.
	if err := o.Release(ctx, t2, epoch.Add(10*time.Second), "429 rate limited"); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wantCode(t, "Ack after Release", o.Ack(ctx, t2), errs.LeaseLost)
	// The route went away: no attempt spent.
	if err := o.Postpone(ctx, t3, epoch.Add(5*time.Second)); err != nil {
		t.Fatalf("Postpone: %v", err)
	}

	rest, err := o.Claim(ctx, "d1", []string{"telegram"}, 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"t4", "t5", "t6", "t7", "t8", "t9", "t10", "t11"}, claimedTexts(rest)); diff != "" {
		t.Fatalf("second claim (-want +got):\n%s", diff)
	}
	for _, c := range rest {
		if err := o.Ack(ctx, c); err != nil {
			t.Fatal(err)
		}
	}

	clk.Advance(10 * time.Second)
	retry, err := o.Claim(ctx, "d2", []string{"telegram"}, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"t3", "t2"}, claimedTexts(retry)); diff != "" {
		t.Fatalf("retry claim, oldest due first (-want +got):\n%s", diff)
	}
	if retry[0].Attempts != 0 || retry[1].Attempts != 1 || retry[1].LastError != "429 rate limited" {
		t.Fatalf("attempts: %+v", retry)
	}

	// Permanent failure: dead letter with a reason.
	if err := o.Dead(ctx, retry[1], "403 bot blocked"); err != nil {
		t.Fatalf("Dead: %v", err)
	}
	wantCode(t, "Dead twice", o.Dead(ctx, retry[1], "again"), errs.LeaseLost)
	dead, err := o.DeadLetters(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].Text != "t2" || dead[0].LastError != "403 bot blocked" {
		t.Fatalf("DeadLetters = %+v", dead)
	}
	pending, err := o.Pending(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"t3", "s1", "later"}, msgTexts(pending)); diff != "" {
		t.Fatalf("Pending (-want +got):\n%s", diff)
	}
	if p, _ := o.Pending(ctx, 1); len(p) != 1 {
		t.Fatalf("Pending(1) = %d messages", len(p))
	}

	if err := o.Requeue(ctx, dead[0].ID); err != nil {
		t.Fatalf("Requeue: %v", err)
	}
	wantCode(t, "Requeue twice", o.Requeue(ctx, dead[0].ID), errs.NotFound)
	wantCode(t, "Requeue unknown", o.Requeue(ctx, "nope"), errs.NotFound)
	if d, _ := o.DeadLetters(ctx, 0); len(d) != 0 {
		t.Fatalf("DeadLetters after Requeue = %+v", d)
	}
	back, err := o.Claim(ctx, "d2", []string{"telegram"}, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 1 || back[0].Text != "t2" || back[0].Attempts != 0 {
		t.Fatalf("after Requeue claimed %+v", back)
	}

	// Slack has no adapter in this run: its message was never touched.
	pending, _ = o.Pending(ctx, 0)
	for _, m := range pending {
		if m.Text == "s1" && m.Attempts != 0 {
			t.Fatalf("route-missing message spent an attempt: %+v", m)
		}
	}
	s1, err := o.Claim(ctx, "d3", []string{"slack"}, 10, time.Minute)
	if err != nil || len(s1) != 1 || s1[0].Text != "s1" {
		t.Fatalf("slack claim = %+v, %v", s1, err)
	}
}

func TestOutboxClaimExpiryAndFencing(t *testing.T) {
	ctx := context.Background()
	db, clk := newFake(t)
	o := db.Outbox()
	if _, _, err := o.Enqueue(ctx, msg("telegram", "a")); err != nil {
		t.Fatal(err)
	}
	first, err := o.Claim(ctx, "d1", []string{"telegram"}, 1, 30*time.Second)
	if err != nil || len(first) != 1 {
		t.Fatalf("Claim = %+v, %v", first, err)
	}
	if none, _ := o.Claim(ctx, "d2", []string{"telegram"}, 1, 30*time.Second); len(none) != 0 {
		t.Fatalf("claimed a held message: %+v", none)
	}
	clk.Advance(31 * time.Second)
	second, err := o.Claim(ctx, "d2", []string{"telegram"}, 1, 30*time.Second)
	if err != nil || len(second) != 1 || second[0].ID != first[0].ID {
		t.Fatalf("Claim after expiry = %+v, %v", second, err)
	}
	if second[0].Token == first[0].Token {
		t.Fatalf("token not renewed on a second claim")
	}
	wantCode(t, "stale Ack", o.Ack(ctx, first[0]), errs.LeaseLost)
	wantCode(t, "stale Release", o.Release(ctx, first[0], clk.Now(), "x"), errs.LeaseLost)
	wantCode(t, "stale Postpone", o.Postpone(ctx, first[0], clk.Now()), errs.LeaseLost)
	wantCode(t, "stale Dead", o.Dead(ctx, first[0], "x"), errs.LeaseLost)
	if err := o.Ack(ctx, second[0]); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "Ack of a gone message", o.Ack(ctx, second[0]), errs.NotFound)
	wantCode(t, "Ack without id", o.Ack(ctx, outbox.Claimed{}), errs.NotFound)

	// An expired claim that nobody took still acks.
	if _, _, err := o.Enqueue(ctx, msg("telegram", "b")); err != nil {
		t.Fatal(err)
	}
	slow, _ := o.Claim(ctx, "d1", []string{"telegram"}, 1, 30*time.Second)
	clk.Advance(time.Minute)
	if none, _ := o.Claim(ctx, "d1", []string{"slack"}, 1, 30*time.Second); len(none) != 0 {
		t.Fatalf("slack claim took %+v", none)
	}
	if err := o.Ack(ctx, slow[0]); err != nil {
		t.Fatalf("Ack of an expired, untaken claim: %v", err)
	}
	if p, _ := o.Pending(ctx, 0); len(p) != 0 {
		t.Fatalf("pending after ack: %+v", p)
	}
}

func TestOutboxIdempotency(t *testing.T) {
	ctx := context.Background()
	db, clk := newFake(t)
	o := db.Outbox()
	m := msg("telegram", "cron report")
	m.IdempotencyKey = "cron:job1:2030-01-02T03:00"
	id, dup, err := o.Enqueue(ctx, m)
	if err != nil || dup {
		t.Fatalf("Enqueue = %s, %v, %v", id, dup, err)
	}
	id2, dup, err := o.Enqueue(ctx, m)
	if err != nil || !dup || id2 != id {
		t.Fatalf("second Enqueue = %s, %v, %v; want %s, dup", id2, dup, err, id)
	}
	// Also after it was delivered.
	c, _ := o.Claim(ctx, "d", []string{"telegram"}, 10, time.Minute)
	if err := o.Ack(ctx, c[0]); err != nil {
		t.Fatal(err)
	}
	if _, dup, _ := o.Enqueue(ctx, m); !dup {
		t.Fatalf("idempotency key forgotten after delivery")
	}
	clk.Advance(8 * 24 * time.Hour)
	if _, dup, _ := o.Enqueue(ctx, m); dup {
		t.Fatalf("idempotency key outlived the window")
	}

	_, _, err = o.Enqueue(ctx, outbox.Message{Target: outbox.Target{Chat: "c"}})
	wantCode(t, "Enqueue without platform", err, errs.Invalid)
}

// handOut commits a turn of conv whose outbox messages (one per text)
// are handed to d1 for a minute, and returns their claims.
func handOut(t *testing.T, db *DB, conv string, texts ...string) []outbox.Claimed {
	t.Helper()
	s := db.Sessions()
	mustAppend(t, s, sessions.Inbound{Conv: conv, Text: "hi"})
	turn := mustClaim(t, s, "w1", time.Minute)
	var handed []outbox.Claimed
	f := sessions.Finish{
		EntryID: turn.Entry.ID, Release: true,
		Handoff: &sessions.Handoff{Worker: "d1", TTL: time.Minute, Claimed: func(cs []outbox.Claimed) { handed = cs }},
	}
	for _, text := range texts {
		f.Outbox = append(f.Outbox, msg("telegram", text))
	}
	if err := s.Finish(context.Background(), turn.Lease, f); err != nil {
		t.Fatal(err)
	}
	if len(handed) != len(texts) {
		t.Fatalf("handed %q, want %q", claimedTexts(handed), texts)
	}
	return handed
}

func claimIDs(cs ...outbox.Claimed) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

// checkIndexes compares the members of the outbox's indexes with want,
// in which an index left out is empty.
func checkIndexes(t *testing.T, db *DB, when string, want map[string][]string) {
	t.Helper()
	for _, index := range []string{"handed", "all", "due:telegram", "claimed:telegram", "dead"} {
		got, err := db.client.ZRange(context.Background(), db.prefix+"ob:"+index, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		w := want[index]
		if w == nil {
			w = []string{}
		}
		if d := cmp.Diff(w, got); d != "" {
			t.Errorf("%s: ob:%s (-want +got):\n%s", when, index, d)
		}
	}
}

// settleThree acks ack, releases release for an hour and dead-letters
// dead, then checks that only release is pending (ob:all and the due
// index) and only dead is a dead letter.
func settleThree(t *testing.T, db *DB, clk *clock.Fake, ack, release, dead outbox.Claimed) {
	t.Helper()
	ctx, o := context.Background(), db.Outbox()
	if err := o.Ack(ctx, ack); err != nil {
		t.Fatal(err)
	}
	if err := o.Release(ctx, release, clk.Now().Add(time.Hour), "503"); err != nil {
		t.Fatal(err)
	}
	if err := o.Dead(ctx, dead, "400"); err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, db, "settled", map[string][]string{"all": claimIDs(release), "due:telegram": claimIDs(release), "dead": claimIDs(dead)})
}

// TestHandedMessagesLeaveNoIndexBehind follows messages handed by a
// finish through each way a claim ends, the claim holding or run out,
// and checks the outbox's indexes (doc.go) at each step: a handed message
// is in ob:handed alone until its claim runs out, and once settled it is
// in none but the dead letters'.
func TestHandedMessagesLeaveNoIndexBehind(t *testing.T) {
	ctx := context.Background()
	db, clk := newFake(t)
	o := db.Outbox()
	const conv = "telegram:100"
	handed := handOut(t, db, conv, "one", "two", "three", "four")
	checkIndexes(t, db, "handed", map[string][]string{"handed": claimIDs(handed...)})

	// Acked while its claim holds: out of ob:handed, and gone.
	if err := o.Ack(ctx, handed[0]); err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, db, "one acked", map[string][]string{"handed": claimIDs(handed[1:]...)})

	// Run out, the others are due again once any claim looks, here one
	// for another platform.
	clk.Advance(time.Minute + time.Second)
	if cs, err := o.Claim(ctx, "d2", []string{"slack"}, 10, time.Minute); err != nil || len(cs) != 0 {
		t.Fatalf("Claim(slack) = %q, %v; want nothing", claimedTexts(cs), err)
	}
	lapsed := claimIDs(handed[1:]...)
	checkIndexes(t, db, "the claims ran out", map[string][]string{"all": lapsed, "due:telegram": lapsed})

	// Their holder still settles them: an ack, a release, a dead letter.
	settleThree(t, db, clk, handed[1], handed[2], handed[3])

	// A release and a dead letter under claims that still hold.
	again := handOut(t, db, conv, "five", "six")
	if err := o.Release(ctx, again[0], clk.Now().Add(time.Hour), "429"); err != nil {
		t.Fatal(err)
	}
	if err := o.Dead(ctx, again[1], "403"); err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, db, "settled under claims that hold", map[string][]string{
		"all":          claimIDs(handed[2], again[0]),
		"due:telegram": claimIDs(handed[2], again[0]),
		"dead":         claimIDs(handed[3], again[1]),
	})
	if p, err := o.Pending(ctx, 0); err != nil || len(p) != 2 {
		t.Errorf("Pending = %q, %v; want the two released", msgTexts(p), err)
	}
}

// TestHandedByAnEarlierVersionSettles: a message handed before ob:handed
// was is indexed as an ob_claim's claim (the claimed index and ob:all).
// Its holder's ack, release or dead letter still takes it out of every
// index it was in, so that no sweep of the claimed index makes it due
// again.
func TestHandedByAnEarlierVersionSettles(t *testing.T) {
	ctx := context.Background()
	db, clk := newFake(t)
	o := db.Outbox()
	handed := handOut(t, db, "telegram:100", "one", "two", "three")
	exp := float64(clk.Now().Add(time.Minute).UnixMilli())
	for _, c := range handed {
		p := db.prefix + "ob:"
		if err := db.client.ZRem(ctx, p+"handed", c.ID).Err(); err != nil {
			t.Fatal(err)
		}
		if err := db.client.ZAdd(ctx, p+"claimed:telegram", goredis.Z{Score: exp, Member: c.ID}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := db.client.ZAdd(ctx, p+"all", goredis.Z{Score: 0, Member: c.ID}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	settleThree(t, db, clk, handed[0], handed[1], handed[2])
	// Long after, the dead letter is not due again.
	clk.Advance(2 * time.Hour)
	cs, err := o.Claim(ctx, "d2", []string{"telegram"}, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"two"}, claimedTexts(cs)); d != "" {
		t.Errorf("Claim when two is due (-want +got):\n%s", d)
	}
}

// TestHandedAckChecksATokenNoHandoffGave acks handed messages under
// tokens the finish did not give them, one no handoff of theirs can have
// (below the negated id of the message) and a positive one, an
// ob_claim's: neither takes the ack's unchecked way, so both are lost,
// and the messages stay handed until their own claim acks them.
func TestHandedAckChecksATokenNoHandoffGave(t *testing.T) {
	ctx := context.Background()
	db, _ := newFake(t)
	o := db.Outbox()
	handed := handOut(t, db, "telegram:100", "one", "two")
	forged := handed[0]
	forged.Token = handed[0].Token - 1000
	claimed := handed[1]
	claimed.Token = -handed[1].Token
	for _, c := range []outbox.Claimed{forged, claimed} {
		got, err := o.AckAll(ctx, []outbox.Claimed{c})
		if err != nil || len(got) != 1 {
			t.Fatalf("AckAll under token %d = %v, %v; want one error", c.Token, got, err)
		}
		wantCode(t, fmt.Sprintf("AckAll under token %d", c.Token), got[0], errs.LeaseLost)
	}
	checkIndexes(t, db, "after the acks under other tokens", map[string][]string{"handed": claimIDs(handed...)})
	if _, err := o.AckAll(ctx, handed); err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, db, "acked under their claim", map[string][]string{})
}

// TestOutboxClaimReadsABacklogOnce: a claim of many messages to one
// target reads each earlier message of the target once, not once for
// every message behind it.
func TestOutboxClaimReadsABacklogOnce(t *testing.T) {
	ctx := context.Background()
	db, _ := newFake(t)
	o := db.Outbox()
	const n = 200
	tg := outbox.Target{Platform: "telegram", Chat: "100"}
	for i := range n {
		if _, _, err := o.Enqueue(ctx, outbox.Message{Target: tg, Conv: "telegram:100", Kind: "reply", Text: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.client.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cs, err := o.Claim(ctx, "d1", []string{"telegram"}, n, time.Minute)
	if err != nil || len(cs) != n {
		t.Fatalf("Claim = %d messages, %v; want %d", len(cs), err, n)
	}
	stats, err := db.client.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`cmdstat_hmget:calls=(\d+)`).FindStringSubmatch(stats)
	if m == nil {
		t.Fatalf("no HMGET counted in %q", stats)
	}
	// One read of each message to claim it, and one of each earlier
	// message as a later one checks it, at most.
	if calls, _ := strconv.Atoi(m[1]); calls > 2*n {
		t.Errorf("Claim of %d messages to one target made %d HMGETs, want at most %d", n, calls, 2*n)
	}
}

// openSharded opens a store of four shards on one server.
func openSharded(t *testing.T) (*DB, *clock.Fake) {
	t.Helper()
	r := testkit.StartRedis(t)
	clk := clock.NewFake(epoch)
	db, err := Open(context.Background(), Options{URL: r.URL(), Prefix: r.Prefix(), Clock: clk, Shards: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db, clk
}

// convsInShards is two conversation names of different shards.
func convsInShards(t *testing.T, db *DB) (string, string) {
	t.Helper()
	for i := 1; i < 100; i++ {
		if b := "conv-" + strconv.Itoa(i); db.shards.of(b) != db.shards.of("conv-0") {
			return "conv-0", b
		}
	}
	t.Fatal("no two conversations in different shards")
	return "", ""
}

// TestOutboxSharded: in a sharded layout a message lives in its
// conversation's shard (else its target's), its id names the shard, and
// what reads or settles messages of several shards reaches each.
func TestOutboxSharded(t *testing.T) {
	ctx := context.Background()
	tg := outbox.Target{Platform: "telegram", Chat: "100"}
	in := func(conv, text string) outbox.Message {
		return outbox.Message{Target: tg, Conv: conv, Kind: "reply", Text: text}
	}

	t.Run("an id names its conversation's shard, else its target's", func(t *testing.T) {
		db, _ := openSharded(t)
		o := db.Outbox()
		a, _ := convsInShards(t, db)
		for _, tc := range []struct {
			desc string
			m    outbox.Message
			home string
		}{
			{"with a conversation", in(a, "x"), a},
			{"without one", in("", "y"), tg.String()},
		} {
			id, _, err := o.Enqueue(ctx, tc.m)
			if err != nil {
				t.Fatalf("Enqueue %s: %v", tc.desc, err)
			}
			want := db.shards.of(tc.home)
			if i, ok := db.shards.idShard(id); !ok || i != want || !regexp.MustCompile(`_\d{12}$`).MatchString(id) {
				t.Errorf("Enqueue %s: id %q, want one of shard %d, its sequence zero-padded", tc.desc, id, want)
			}
			if n, _ := db.client.Exists(ctx, db.shards.pfx(want)+"ob:m:"+id).Result(); n != 1 {
				t.Errorf("Enqueue %s: no hash of %q in shard %d", tc.desc, id, want)
			}
		}
	})

	t.Run("a claim takes the oldest shard's first and fills from several", func(t *testing.T) {
		// A round starts at any shard: a few stores, a few starts.
		for range 4 {
			db, clk := openSharded(t)
			o := db.Outbox()
			a, b := convsInShards(t, db)
			for _, m := range []outbox.Message{in(a, "a1"), in(b, "b1"), in(a, "a2")} {
				if _, _, err := o.Enqueue(ctx, m); err != nil {
					t.Fatal(err)
				}
				clk.Advance(time.Millisecond)
			}
			for _, step := range []struct {
				worker string
				max    int
				want   []string
			}{
				{"w1", 1, []string{"a1"}},
				{"w2", 10, []string{"b1"}}, // a2 waits behind w1's a1
				{"w1", 10, []string{"a2"}},
				{"w2", 10, nil},
			} {
				cs, err := o.Claim(ctx, step.worker, []string{"telegram"}, step.max, time.Minute)
				if d := cmp.Diff(step.want, claimedTexts(cs), cmpopts.EquateEmpty()); err != nil || d != "" {
					t.Fatalf("Claim(%s, %d) (-want +got):\n%s (%v)", step.worker, step.max, d, err)
				}
			}
		}
	})

	t.Run("acks of several shards: outcomes in the batch's order", func(t *testing.T) {
		db, _ := openSharded(t)
		o := db.Outbox()
		a, b := convsInShards(t, db)
		for _, m := range []outbox.Message{in(a, "a1"), in(b, "b1"), in(a, "a2"), in(b, "b2")} {
			if _, _, err := o.Enqueue(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		cs, err := o.Claim(ctx, "d1", []string{"telegram"}, 10, time.Minute)
		if err != nil || len(cs) != 4 {
			t.Fatalf("Claim = %q, %v; want all four", claimedTexts(cs), err)
		}
		ghost := func(id string) outbox.Claimed {
			return outbox.Claimed{Message: outbox.Message{ID: id, Target: tg}, Token: cs[0].Token}
		}
		label := strings.TrimSuffix(strings.TrimPrefix(db.shards.pfx(0), db.prefix+"{"), "}:")
		batch := []outbox.Claimed{cs[3], ghost("no-such-message"), cs[0], ghost("nolabel_000000000001"), cs[2], ghost(label + "_999999999999"), cs[1]}
		acked, err := o.AckAll(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		nf := string(errs.NotFound)
		want := []string{"", nf, "", nf, "", nf, ""}
		got := texts(acked, func(err error) string { return string(errs.CodeOf(err)) })
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("AckAll (-want +got):\n%s", d)
		}
		if p, err := o.Pending(ctx, 0); err != nil || len(p) != 0 {
			t.Errorf("Pending after AckAll = %q, %v; want none", msgTexts(p), err)
		}
		for _, id := range []string{"no-such-message", "nolabel_000000000001"} {
			if err := o.Requeue(ctx, id); errs.CodeOf(err) != errs.NotFound {
				t.Errorf("Requeue(%q) = %v, want NotFound", id, err)
			}
			if err := o.Dead(ctx, ghost(id), "x"); errs.CodeOf(err) != errs.NotFound {
				t.Errorf("Dead(%q) = %v, want NotFound", id, err)
			}
		}
	})

	t.Run("lists merge the shards by enqueue time, up to the limit", func(t *testing.T) {
		db, clk := openSharded(t)
		o := db.Outbox()
		a, b := convsInShards(t, db)
		order := []outbox.Message{in(b, "1"), in(a, "2"), in(b, "3"), in("", "4"), in(a, "5")}
		for _, m := range order {
			if _, _, err := o.Enqueue(ctx, m); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Millisecond)
		}
		all := []string{"1", "2", "3", "4", "5"}
		for _, limit := range []int{0, 3} {
			p, err := o.Pending(ctx, limit)
			want := all
			if limit > 0 {
				want = all[:limit]
			}
			if d := cmp.Diff(want, msgTexts(p)); err != nil || d != "" {
				t.Errorf("Pending(%d) (-want +got):\n%s (%v)", limit, d, err)
			}
		}
		cs, err := o.Claim(ctx, "d1", []string{"telegram"}, 10, time.Minute)
		if err != nil || len(cs) != len(all) {
			t.Fatalf("Claim = %q, %v", claimedTexts(cs), err)
		}
		// Dead in another order than enqueued: listed as enqueued.
		for _, k := range []int{4, 0, 2, 1} {
			if err := o.Dead(ctx, cs[k], "gone"); err != nil {
				t.Fatal(err)
			}
		}
		dead, err := o.DeadLetters(ctx, 3)
		if d := cmp.Diff([]string{"1", "2", "3"}, msgTexts(dead)); err != nil || d != "" {
			t.Errorf("DeadLetters(3) (-want +got):\n%s (%v)", d, err)
		}
		if unsent, err := o.Unsent(ctx, tg); err != nil || !unsent {
			t.Errorf("Unsent with one of its messages claimed = %v, %v; want true", unsent, err)
		}
	})

	t.Run("a beat holds in every shard, and a claim renews it in each", func(t *testing.T) {
		db, clk := openSharded(t)
		o := db.Outbox()
		if err := o.Beat(ctx, "d1", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		expiries := func() []float64 {
			var out []float64
			for i := range db.shards.count() {
				s, err := db.client.ZScore(ctx, db.shards.pfx(i)+"ob:workers", "d1").Result()
				if err != nil {
					t.Fatalf("shard %d: %v", i, err)
				}
				out = append(out, s)
			}
			return out
		}
		at := float64(clk.Now().UnixMilli())
		if d := cmp.Diff([]float64{at + 10000, at + 10000, at + 10000, at + 10000}, expiries()); d != "" {
			t.Errorf("heartbeats after Beat (-want +got):\n%s", d)
		}
		clk.Advance(5 * time.Second)
		if _, err := o.Claim(ctx, "d1", []string{"telegram"}, 1, time.Minute); err != nil {
			t.Fatal(err)
		}
		at = float64(clk.Now().UnixMilli())
		if d := cmp.Diff([]float64{at + 10000, at + 10000, at + 10000, at + 10000}, expiries()); d != "" {
			t.Errorf("heartbeats after an empty Claim (-want +got):\n%s", d)
		}
	})
}
