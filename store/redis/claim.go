package redis

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// Claims across shards. A claim takes the conversations ready longest
// (sessions.Store.Claim), and in the sharded layout every shard has a
// ready index of its own, which a script reads alone. So a claim first
// reads the head of every shard's index, with plain commands that go out
// together (one round trip), merges them as one index would order them
// (by score, then by tag) and keeps those due by the store's clock; then
// it asks each shard holding some of the first n for its share, all at
// once (q_claim, which checks again what is due and takes the shard's
// oldest). A shard that gave less than its share lost members to another
// claim meanwhile: the shards with due members not yet asked for are
// asked in turn for what is missing. When nothing is ready anywhere a
// claim is that one round trip of reads and no script.
//
// A commit claiming the next turn (FinishAndClaim) reads the other
// shards' heads first and gives q_finish the oldest due one: the script
// claims in its own shard only a conversation ready before it, else it
// answers that the next turn is elsewhere, which is then claimed as
// above. A commit that claims only when its conversation has entries
// left (Finish.ClaimIfLeft), which mostly it has not, reads nothing
// first: the script answers whether to claim, and the claim follows as
// above.

// readyHead is a member of a shard's ready index.
type readyHead struct {
	shard int
	score int64 // when a claim may take it, ms
	tag   string
}

// clockSlack is how far past the store's time, as this process read it,
// a member still counts as due when the time came from one node's TIME:
// a cluster's nodes' clocks differ a little, and a script checks again.
const clockSlack = time.Second

// peekReady reads up to n members of the ready index of every shard but
// skip (-1: none skipped), all at once, and returns those due, ordered
// as one index would order them.
func (db *DB) peekReady(ctx context.Context, op string, n, skip int) ([]readyHead, error) {
	count := db.shards.count()
	per := make([][]readyHead, count)
	var now int64
	// The store's time, the injected clock's, else a server's, is read
	// with the heads, as if of a shard count.
	reads := append(db.shards.all(), count)
	if skip >= 0 {
		reads = slices.Delete(reads, skip, skip+1)
	}
	err := inShards(ctx, reads, func(ctx context.Context, i int) error {
		if i == count {
			if db.clk != nil {
				now = db.clk.Now().UnixMilli()
				return nil
			}
			cmd := goredis.NewTimeCmd(ctx, "time")
			t, err := await(ctx, db.batch, cmd, cmd.Result)
			now = t.Add(clockSlack).UnixMilli()
			return err
		}
		cmd := goredis.NewZSliceCmd(ctx, "zrange", readyKey(db.shards.pfx(i)), 0, n-1, "withscores")
		zs, err := await(ctx, db.batch, cmd, cmd.Result)
		for _, z := range zs {
			tag, _ := z.Member.(string)
			per[i] = append(per[i], readyHead{shard: i, score: int64(z.Score), tag: tag})
		}
		return err
	})
	if err != nil {
		return nil, db.fail(op, err)
	}
	var heads []readyHead
	for _, hs := range per {
		for _, h := range hs {
			if h.score <= now {
				heads = append(heads, h)
			}
		}
	}
	slices.SortFunc(heads, func(a, b readyHead) int {
		return cmp.Or(cmp.Compare(a.score, b.score), cmp.Compare(a.tag, b.tag))
	})
	return heads, nil
}

// claimHeads claims up to n turns from the shards of heads (due members,
// ordered), ready longest first: each shard among the first n is asked
// for its share at once, then, for what is missing, each shard with
// members not asked for, one after another. Turns claimed are returned
// even when a later call failed, as they are leased now.
func (s *sessionStore) claimHeads(ctx context.Context, op string, heads []readyHead, worker string, n int, ttl time.Duration) ([]*sessions.Turn, error) {
	share := map[int]int{}
	var asked []int
	for _, h := range heads[:min(n, len(heads))] {
		if share[h.shard] == 0 {
			asked = append(asked, h.shard)
		}
		share[h.shard]++
	}
	got := make([][]*sessions.Turn, s.db.shards.count())
	failed := inShards(ctx, asked, func(ctx context.Context, i int) error {
		var err error
		got[i], err = s.claimIn(ctx, op, i, worker, share[i], ttl)
		return err
	})
	var turns []*sessions.Turn
	// A shard that gave less than its share has nothing more due.
	dry := map[int]bool{}
	for _, i := range asked {
		turns = append(turns, got[i]...)
		dry[i] = len(got[i]) < share[i]
	}
	if failed == nil && len(turns) < n {
		for _, h := range heads {
			if len(turns) == n {
				break
			}
			if dry[h.shard] || slices.Contains(asked, h.shard) && !hasMore(heads, h.shard, share[h.shard]) {
				continue
			}
			more, err := s.claimIn(ctx, op, h.shard, worker, n-len(turns), ttl)
			if err != nil {
				failed = err
				break
			}
			turns = append(turns, more...)
			dry[h.shard] = true
		}
	}
	if failed != nil && len(turns) == 0 {
		return nil, failed
	}
	// Ready longest first, as the heads were ordered; a turn of a
	// conversation not among them (made ready since) last.
	place := make(map[string]int, len(heads))
	for j, h := range heads {
		if _, ok := place[h.tag]; !ok {
			place[h.tag] = j
		}
	}
	at := func(t *sessions.Turn) int {
		if j, ok := place[convTag(t.Lease.Conv)]; ok {
			return j
		}
		return len(heads)
	}
	slices.SortStableFunc(turns, func(a, b *sessions.Turn) int { return cmp.Compare(at(a), at(b)) })
	return turns, nil
}

// hasMore reports whether heads holds more than k members of shard.
func hasMore(heads []readyHead, shard, k int) bool {
	for _, h := range heads {
		if h.shard == shard {
			if k == 0 {
				return true
			}
			k--
		}
	}
	return false
}

// claimIn runs q_claim in shard i for up to n turns.
func (s *sessionStore) claimIn(ctx context.Context, op string, i int, worker string, n int, ttl time.Duration) ([]*sessions.Turn, error) {
	pfx := s.db.shards.pfx(i)
	v, err := s.db.run(ctx, op, scriptQClaim, []string{readyKey(pfx)},
		pfx, worker, durMS(ttl), s.db.nowArg(), n)
	if err != nil || len(v) == 0 {
		return nil, err
	}
	if len(v)%turnItems != 0 || len(v)/turnItems > n {
		return nil, errs.E(op, errs.Internal, "unexpected claim reply of %d items", len(v))
	}
	turns := make([]*sessions.Turn, 0, len(v)/turnItems)
	for j := 0; j < len(v); j += turnItems {
		turn, err := s.db.decodeTurn(op, worker, v[j:j+turnItems])
		if err != nil {
			return turns, err
		}
		turns = append(turns, turn)
	}
	return turns, nil
}

// claim claims up to n turns, those ready longest first.
func (s *sessionStore) claim(ctx context.Context, op, worker string, n int, ttl time.Duration) ([]*sessions.Turn, error) {
	if n <= 0 {
		return nil, s.db.check(op)
	}
	if ttl <= 0 {
		ttl = sessions.DefaultLeaseTTL
	}
	if !s.db.shards.sharded() {
		return s.claimIn(ctx, op, 0, worker, n, ttl)
	}
	if err := s.db.check(op); err != nil {
		return nil, err
	}
	heads, err := s.db.peekReady(ctx, op, n, -1)
	if err != nil || len(heads) == 0 {
		return nil, err
	}
	return s.claimHeads(ctx, op, heads, worker, n, ttl)
}

// claimAfter, as q_finish's last argument, has it claim nothing but
// answer ELSEWHERE where it would claim.
const claimAfter = "*"

// boundArg is q_finish's last argument: the score (ms) of the oldest due
// member of another shard, which a conversation of the commit's shard
// must be ready before (or at) to be claimed there; ” for none.
func boundArg(heads []readyHead) string {
	if len(heads) == 0 {
		return ""
	}
	return strconv.FormatInt(heads[0].score, 10)
}
