package redis

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// convStore lists conversations by their last activity
// (sessions.Conversations), from the activity index q_append and
// q_finish keep.
type convStore struct{ db *DB }

var _ sessions.Conversations = convStore{}

// Conversations lists the conversations by their last activity.
func (db *DB) Conversations() sessions.Conversations { return convStore{db: db} }

func (s convStore) Conversations(ctx context.Context, q sessions.ConvQuery) ([]sessions.ConvSummary, error) {
	const op = "redis.Conversations"
	if err := q.Check(op); err != nil {
		return nil, err
	}
	at, tag := "", ""
	if q.Before != "" {
		ms, conv, ok := strings.Cut(q.Before, ":")
		if n, err := strconv.ParseInt(ms, 10, 64); !ok || err != nil || n < 0 || conv == "" {
			return nil, errs.E(op, errs.Invalid, "%q is not a conversations cursor", q.Before)
		}
		at, tag = ms, convTag(conv)
	}
	return s.read(ctx, op, q.Limit, at, tag, "")
}

func (s convStore) Conversation(ctx context.Context, conv string) (sessions.ConvSummary, error) {
	const op = "redis.Conversation"
	if err := chat.ValidateConv(op, conv); err != nil {
		return sessions.ConvSummary{}, err
	}
	got, err := s.read(ctx, op, 1, "", "", convTag(conv))
	if err != nil {
		return sessions.ConvSummary{}, err
	}
	if len(got) == 0 {
		return sessions.ConvSummary{}, errs.E(op, errs.NotFound, "no conversation %q", conv)
	}
	return got[0], nil
}

// convItems is how many items conv_list answers per conversation.
const convItems = 6

// read runs conv_list: a page after the cursor (at, tag), or the
// conversation one alone. A page reads the same page of every shard's
// activity index and keeps the newest of them all: each shard's page
// holds its share of the merged one, as every shard orders its
// conversations as the merged page does (activity, then the tag, both
// highest first), and the cursor is a place in that order.
func (s convStore) read(ctx context.Context, op string, limit int, at, tag, one string) ([]sessions.ConvSummary, error) {
	if one != "" {
		pfx := s.db.convPfx(convFromTag(one))
		v, err := s.db.run(ctx, op, scriptConvList, []string{activeKey(pfx)}, pfx, limit, s.db.nowArg(), at, tag, one)
		if err != nil {
			return nil, err
		}
		return decodeConvs(op, v)
	}
	pages, err := everyShard(ctx, s.db, func(ctx context.Context, i int) ([]sessions.ConvSummary, error) {
		pfx := s.db.shards.pfx(i)
		v, err := s.db.run(ctx, op, scriptConvList, []string{activeKey(pfx)}, pfx, limit, s.db.nowArg(), at, tag, "")
		if err != nil {
			return nil, err
		}
		return decodeConvs(op, v)
	})
	if err != nil {
		return nil, err
	}
	if len(pages) == 1 {
		return pages[0], nil
	}
	out := merged(pages)
	slices.SortFunc(out, func(a, b sessions.ConvSummary) int {
		if c := b.LastActive.Compare(a.LastActive); c != 0 {
			return c
		}
		return strings.Compare(convTag(b.Conv), convTag(a.Conv))
	})
	return out[:min(len(out), limit)], nil
}

// decodeConvs reads conv_list's reply.
func decodeConvs(op string, v []any) ([]sessions.ConvSummary, error) {
	if len(v)%convItems != 0 {
		return nil, errs.E(op, errs.Internal, "unexpected script reply of %d items", len(v))
	}
	out := make([]sessions.ConvSummary, 0, len(v)/convItems)
	for i := 0; i < len(v); i += convItems {
		c := sessions.ConvSummary{
			Conv:       convFromTag(str(v[i])),
			LastActive: msTime(v[i+1]),
			Queued:     int(num(v[i+2])),
			Worker:     str(v[i+3]),
		}
		if exp := num(v[i+4]); exp > 0 {
			c.Expires = msTime(exp)
		}
		if flat, ok := v[i+5].([]any); ok && len(flat) > 0 {
			c.Meta = make(map[string]string, len(flat)/2)
			for j := 0; j+1 < len(flat); j += 2 {
				c.Meta[str(flat[j])] = str(flat[j+1])
			}
			// A running-turn mark an older version stored.
			delete(c.Meta, sessions.ConvMetaTurn)
		}
		c.Cursor = str(v[i+1]) + ":" + c.Conv
		out = append(out, c)
	}
	return out, nil
}

func (s convStore) RecentHistory(ctx context.Context, conv string, n int) ([]chat.Message, int, error) {
	const op = "redis.RecentHistory"
	if err := s.db.check(op); err != nil {
		return nil, 0, err
	}
	if err := sessions.CheckRecent(op, conv, n); err != nil {
		return nil, 0, err
	}
	key := s.db.convKey(convTag(conv), "hist")
	var tail *goredis.StringSliceCmd
	var total *goredis.IntCmd
	// MULTI, so the count and the messages agree.
	_, err := s.db.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		tail = p.LRange(ctx, key, int64(-n), -1)
		total = p.LLen(ctx, key)
		return nil
	})
	if err != nil {
		return nil, 0, s.db.fail(op, err)
	}
	out := make([]chat.Message, 0, len(tail.Val()))
	for _, b := range tail.Val() {
		var m chat.Message
		if err := json.Unmarshal([]byte(b), &m); err != nil {
			return nil, 0, errs.Wrap(op, errs.Internal, err)
		}
		out = append(out, m)
	}
	return out, int(total.Val()), nil
}
