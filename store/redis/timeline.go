package redis

import (
	"context"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// timelineStore is what was delivered to the local API's conversations
// (sessions.Timeline).
type timelineStore struct{ db *DB }

var _ sessions.Timeline = timelineStore{}

// Timeline returns the local API's conversations' timelines.
func (db *DB) Timeline() sessions.Timeline { return timelineStore{db: db} }

func (s timelineStore) AppendTimeline(ctx context.Context, item sessions.TimelineItem) (string, error) {
	const op = "redis.AppendTimeline"
	if err := item.Check(op, s.db.lim); err != nil {
		return "", err
	}
	tag := convTag(item.Conv)
	v, err := s.db.run(ctx, op, scriptTlAppend,
		[]string{s.db.convKey(tag, "tl"), s.db.convKey(tag, "tlid")},
		item.ID, item.Kind, item.Text, s.db.nowArg(), item.ReplyTo, s.db.lim.TimelineMax, sessions.EncodeMeta(item.Meta),
		sessions.EncodeFiles(item.Files))
	if err != nil {
		return "", err
	}
	if len(v) != 1 {
		return "", errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	return str(v[0]), nil
}

func (s timelineStore) ReadTimeline(ctx context.Context, conv, after string, count int) ([]sessions.TimelineItem, error) {
	const op = "redis.ReadTimeline"
	if err := s.db.check(op); err != nil {
		return nil, err
	}
	if err := chat.ValidateConv(op, conv); err != nil {
		return nil, err
	}
	start := "-"
	if after != "" {
		if !isStreamID(after) {
			return nil, errs.E(op, errs.Invalid, "%q is not a timeline cursor", after)
		}
		start = "(" + after
	}
	raw, err := xrange(ctx, s.db.client, s.db.convKey(convTag(conv), "tl"), start, count)
	if err != nil {
		return nil, s.db.fail(op, err)
	}
	out := make([]sessions.TimelineItem, len(raw))
	for i, m := range raw {
		// Meta or files that cannot be read are left out: the item
		// still shows.
		meta, _ := sessions.DecodeMeta(field(m, "m"))
		files, _ := sessions.DecodeFiles(field(m, "f"))
		out[i] = sessions.TimelineItem{
			Cursor:  m.ID,
			ID:      field(m, "id"),
			Conv:    conv,
			Kind:    field(m, "k"),
			Text:    field(m, "t"),
			At:      msTime(field(m, "at")),
			ReplyTo: field(m, "r"),
			Meta:    meta,
			Files:   files,
		}
	}
	return out, nil
}

func (s timelineStore) TimelineEnd(ctx context.Context, conv string) (string, error) {
	const op = "redis.TimelineEnd"
	if err := s.db.check(op); err != nil {
		return "", err
	}
	if err := chat.ValidateConv(op, conv); err != nil {
		return "", err
	}
	last, err := s.db.client.XRevRangeN(ctx, s.db.convKey(convTag(conv), "tl"), "+", "-", 1).Result()
	if err != nil {
		return "", s.db.fail(op, err)
	}
	if len(last) == 0 {
		return "", nil
	}
	return last[0].ID, nil
}

// xrange reads a stream from start on, up to count entries (0 or less: all).
func xrange(ctx context.Context, c goredis.UniversalClient, key, start string, count int) ([]goredis.XMessage, error) {
	if count > 0 {
		return c.XRangeN(ctx, key, start, "+", int64(count)).Result()
	}
	return c.XRange(ctx, key, start, "+").Result()
}

// isStreamID reports whether s is a stream entry id, "<ms>-<seq>", that
// Redis accepts: both parts unsigned 64-bit numbers.
func isStreamID(s string) bool {
	ms, seq, ok := strings.Cut(s, "-")
	if !ok {
		return false
	}
	for _, p := range []string{ms, seq} {
		if p == "" || p[0] == '+' {
			return false
		}
		if _, err := strconv.ParseUint(p, 10, 64); err != nil {
			return false
		}
	}
	return true
}

// field reads one field of a stream entry as a string.
func field(m goredis.XMessage, name string) string {
	v, _ := m.Values[name].(string)
	return v
}
