package redis

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
)

// kanbanStore is the DB seen as a kanban.Store. Its keys, after the
// prefix K of the kanban shard (P itself in the one-server layout):
//
//	Kkb:boards            hash: slug → the encoded board
//	Kkb:c:<id>            hash: v version, j the encoded card (without its
//	                      links), b board, s status, k idempotency key
//	Kkb:st:<board>:<s>    set of the board's cards in status s
//	Kkb:key:<board>       hash: idempotency key → card id
//	Kkb:p:<id>, Kkb:ch:<id>  sets of a card's parents, children
//	Kkb:cm:<card>         list of the card's encoded comments, oldest first
//	Kkb:att:<card>        hash: name → the encoded attachment
//	Kkb:r:<run>           the encoded run
//	Kkb:runs:<card>       sorted set of the card's runs, by start ms
//	Kkb:ev:<board>        stream of the board's events (field e); the
//	                      entry ids are the cursors
//	Kkb:evc:<card>        list of the card's events' cursors
//	Kkb:sub:<id>          hash: v version, j encoding, b board
//	Kkb:subs              sorted set of every subscription id (scored 0)
//	Kkb:lane:<name>       hash: v version, j the encoded kanban.LaneState, b ''
//	                      (written by kb_sub_put, as a subscription is)
//	Kkb:lanes             sorted set of every lane with a state (scored 0)
//
// A change is one kb_apply call, which checks every version it is given
// before it writes anything.
//
// In the sharded layout every kanban key is in one shard, the kanban
// shard, of(kbShardName). kanban.Store lets a change write cards and
// events of several boards at once, all or nothing, and names a card by
// an id the package makes (kanban.NewCardID) that says nothing of its
// board; with the boards spread over shards, such a change could not be
// one script, and every call given a card's id would first have to ask
// every shard where the card is. Kept in one shard, kanban behaves as on
// one server, with no lookup and no refusal that depends on where the
// boards hash. What it costs is that one primary serves all of kanban,
// whose traffic is small beside the conversations' (a card's cycle is a
// handful of calls, paced by the agents that work it).
type kanbanStore struct{ db *DB }

var _ kanban.Store = kanbanStore{}

// Kanban returns the store of kanban boards.
func (db *DB) Kanban() kanban.Store { return kanbanStore{db: db} }

// kbShardName is the name whose shard holds every kanban key.
const kbShardName = "kanban"

// kbShard is the kanban shard.
func (db *DB) kbShard() int { return db.shards.of(kbShardName) }

// kbKey is one of the kanban keys: Kkb:<suffix>, K the kanban shard's
// prefix.
func (db *DB) kbKey(suffix string) string { return db.shards.pfx(db.kbShard()) + "kb:" + suffix }

func (s kanbanStore) Now(ctx context.Context) (time.Time, error) {
	return s.db.now(ctx, "redis.kanban.Now")
}

// now is the store's clock: the injected one, else the server's TIME.
func (db *DB) now(ctx context.Context, op string) (time.Time, error) {
	if err := db.check(op); err != nil {
		return time.Time{}, err
	}
	if db.clk != nil {
		return db.clk.Now(), nil
	}
	// Through the batcher, as the scripts go: under load the clock reads
	// of many changes share their round trips with the changes' calls.
	cmd := goredis.NewTimeCmd(ctx, "time")
	t, err := await(ctx, db.batch, cmd, cmd.Result)
	if err != nil {
		return time.Time{}, db.fail(op, err)
	}
	return t.UTC(), nil
}

func (s kanbanStore) PutBoard(ctx context.Context, b kanban.Board) error {
	const op = "redis.kanban.PutBoard"
	db := s.db
	if err := db.check(op); err != nil {
		return err
	}
	if err := kanban.CheckSlug(op, b.Slug); err != nil {
		return err
	}
	body, err := json.Marshal(b)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	return db.fail(op, db.client.HSet(ctx, db.kbKey("boards"), b.Slug, body).Err())
}

func (s kanbanStore) Boards(ctx context.Context) ([]kanban.Board, error) {
	const op = "redis.kanban.Boards"
	db := s.db
	if err := db.check(op); err != nil {
		return nil, err
	}
	m, err := db.client.HGetAll(ctx, db.kbKey("boards")).Result()
	if err != nil {
		return nil, db.fail(op, err)
	}
	out := make([]kanban.Board, 0, len(m))
	for _, body := range m {
		var b kanban.Board
		if err := json.Unmarshal([]byte(body), &b); err != nil {
			return nil, errs.Wrap(op, errs.Internal, err)
		}
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b kanban.Board) int { return strings.Compare(a.Slug, b.Slug) })
	return out, nil
}

func (s kanbanStore) Board(ctx context.Context, slug string) (kanban.Board, error) {
	const op = "redis.kanban.Board"
	db := s.db
	if err := db.check(op); err != nil {
		return kanban.Board{}, err
	}
	body, err := db.client.HGet(ctx, db.kbKey("boards"), slug).Result()
	if err == goredis.Nil {
		return kanban.Board{}, errs.E(op, errs.NotFound, "no board %q", slug)
	}
	if err != nil {
		return kanban.Board{}, db.fail(op, err)
	}
	var b kanban.Board
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		return kanban.Board{}, errs.Wrap(op, errs.Internal, err)
	}
	return b, nil
}

func (s kanbanStore) Apply(ctx context.Context, c kanban.Change) ([]kanban.Event, error) {
	const op = "redis.kanban.Apply"
	db := s.db
	if err := db.check(op); err != nil {
		return nil, err
	}
	if err := kanban.CheckChange(op, c); err != nil {
		return nil, err
	}
	// A stamped change is stamped by the script with the server's TIME
	// (or here, with the clock the store was given).
	stamp := ""
	if c.Stamp && db.clk != nil {
		c = c.Stamped(db.clk.Now())
	} else if c.Stamp {
		stamp = "1"
	}
	if err := s.fillTimes(ctx, &c); err != nil {
		return nil, err
	}
	// The arguments are made in one slice, sized for the change, the
	// instants section last: it is known once every encoding is.
	marks := kbMarks{stamp: stamp != ""} // the change's instants to stamp
	args := make([]any, 0, kbApplyArgs(c))
	args = append(args, db.shards.pfx(db.kbShard()), stamp)
	add := func(body []byte) error {
		f, m, err := marks.format(body)
		if err != nil {
			return errs.Wrap(op, errs.Invalid, err)
		}
		args = append(args, f, m)
		return nil
	}
	args = append(args, len(c.Cards))
	for _, w := range c.Cards {
		k := w.Card
		body, err := encodeKbCard(op, k)
		if err != nil {
			return nil, err
		}
		args = append(args, k.ID, k.Board, string(k.Status), k.IdempotencyKey, w.From)
		if err := add(body); err != nil {
			return nil, err
		}
	}
	args = append(args, len(c.Check))
	for _, v := range c.Check {
		args = append(args, v.ID, v.Version)
	}
	for _, ls := range [][]kanban.Link{c.Link, c.Unlink} {
		args = append(args, len(ls))
		for _, l := range ls {
			args = append(args, l.Parent, l.Child)
		}
	}
	args = append(args, len(c.Comments))
	for _, cm := range c.Comments {
		b, err := json.Marshal(cm)
		if err != nil {
			return nil, errs.Wrap(op, errs.Invalid, err)
		}
		args = append(args, cm.Card)
		if err := add(b); err != nil {
			return nil, err
		}
	}
	args = append(args, len(c.Attachments))
	for _, a := range c.Attachments {
		a.Path = ""
		b, err := json.Marshal(a)
		if err != nil {
			return nil, errs.Wrap(op, errs.Invalid, err)
		}
		args = append(args, a.Card, a.Name)
		if err := add(b); err != nil {
			return nil, err
		}
	}
	args = append(args, len(c.Runs))
	for _, r := range c.Runs {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, errs.Wrap(op, errs.Invalid, err)
		}
		args = append(args, r.ID, r.Card, r.Started.UnixMilli())
		if err := add(b); err != nil {
			return nil, err
		}
	}
	args = append(args, len(c.Events))
	for _, e := range c.Events {
		e.Cursor = ""
		b, err := json.Marshal(e)
		if err != nil {
			return nil, errs.Wrap(op, errs.Invalid, err)
		}
		args = append(args, e.Board, e.Card)
		if err := add(b); err != nil {
			return nil, err
		}
	}
	args = append(args, len(marks.offsets))
	for _, off := range marks.offsets {
		args = append(args, int64(off/time.Second), int64(off%time.Second))
	}
	v, err := db.runIn(ctx, op, scriptKbApply, db.kbShard(), nil, args...)
	if err != nil {
		return nil, err
	}
	if len(v) == 2 && str(v[0]) == "CONFLICT" {
		return nil, errs.E(op, errs.Conflict, "%s", str(v[1]))
	}
	if len(v) == 2 && str(v[0]) == "INVALID" {
		return nil, errs.E(op, errs.Invalid, "%s", str(v[1]))
	}
	want := 1 + len(c.Events)
	if stamp != "" {
		want += 2 // the server's TIME the script stamped with
	}
	if len(v) != want || str(v[0]) != "OK" {
		return nil, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	var now time.Time // the server's TIME the script stamped with
	if stamp != "" {
		now = time.Unix(num(v[want-2]), num(v[want-1])*int64(time.Microsecond)).UTC()
	}
	events := make([]kanban.Event, len(c.Events))
	for i, e := range c.Events {
		e.Cursor = str(v[1+i])
		if stamp != "" {
			e.At = kanban.StampTime(e.At, now)
		}
		events[i] = e
	}
	return events, nil
}

// fillTimes gives the comments, attachments and events of c that have
// no time the store's now: for a change the script stamps, StampBase.
func (s kanbanStore) fillTimes(ctx context.Context, c *kanban.Change) error {
	var now time.Time
	if c.Stamp {
		now = kanban.StampBase
	}
	stamp := func(t *time.Time) error {
		if !t.IsZero() {
			return nil
		}
		if now.IsZero() {
			n, err := s.Now(ctx)
			if err != nil {
				return err
			}
			now = n
		}
		*t = now
		return nil
	}
	for i := range c.Comments {
		if err := stamp(&c.Comments[i].At); err != nil {
			return err
		}
	}
	for i := range c.Attachments {
		if err := stamp(&c.Attachments[i].CreatedAt); err != nil {
			return err
		}
	}
	for i := range c.Events {
		if err := stamp(&c.Events[i].At); err != nil {
			return err
		}
	}
	return nil
}

// kbApplyArgs is how many arguments kb_apply is given for c, but for
// its instants section's items: its prefix and stamp, each section's
// count and items, and room for a few instants.
func kbApplyArgs(c kanban.Change) int {
	return 2 + 9 + 7*len(c.Cards) + 2*(len(c.Check)+len(c.Link)+len(c.Unlink)) +
		3*len(c.Comments) + 4*len(c.Attachments) + 5*len(c.Runs) + 4*len(c.Events) + 2*4
}

// kbInstants are the names of the members of a card, its claim and stop
// request, a run, an event, a comment and an attachment that are
// instants.
var kbInstants = map[string]bool{
	"created_at": true, "updated_at": true, "ready_at": true, "completed_at": true, "retry_at": true, "scheduled_at": true,
	"expires": true, "heartbeat": true, "started": true, "at": true, "started_at": true, "ended_at": true,
}

// kbMarks gathers the instants of a change kb_apply stamps (stamp
// "1"): each of 1970, kanban.StampBase's year, is its offset from
// StampBase, and kb_apply writes the server's time plus that offset in
// its place. A change not stamped gives its encodings as they are.
type kbMarks struct {
	stamp   bool
	offsets []time.Duration // the instants section, each once (a change has few)
}

// format is body as kb_apply takes it, and its marks: for an encoding
// with no instant to stamp, body itself and ""; else body as a
// string.format text, each % doubled and each instant to stamp a %s
// item, and one byte an item, the place of its instant's offset. An
// instant is a member named in kbInstants whose value is a time of
// 1970; a text that only reads as one is kept.
func (m *kbMarks) format(body []byte) (text []byte, marks string, err error) {
	if !m.stamp || !bytes.Contains(body, []byte(`":"1970-`)) {
		return body, "", nil
	}
	out := make([]byte, 0, len(body)+16)
	var few [8]byte
	places := few[:0]
	copied := 0 // body[:copied] is in out
	rest := 0   // where to look for the next instant
	for {
		i := bytes.Index(body[rest:], []byte(`":"1970-`))
		if i < 0 {
			break
		}
		i += rest
		name := body[bytes.LastIndexByte(body[:i], '"')+1 : i]
		end := bytes.IndexByte(body[i+3:], '"')
		if end < 0 {
			break
		}
		end += i + 3
		t, perr := time.Parse(time.RFC3339Nano, string(body[i+3:end]))
		rest = end
		if !kbInstants[string(name)] || perr != nil {
			continue
		}
		off := t.Sub(kanban.StampBase)
		place := slices.Index(m.offsets, off) + 1
		if place == 0 {
			if len(m.offsets) == 255 {
				return nil, "", fmt.Errorf("more than 255 instants to stamp in one change")
			}
			m.offsets = append(m.offsets, off)
			place = len(m.offsets)
		}
		out = appendFormatText(out, body[copied:i+3])
		out = append(out, "%s"...)
		places = append(places, byte(place))
		copied = end
	}
	if len(places) == 0 {
		return body, "", nil
	}
	return appendFormatText(out, body[copied:]), string(places), nil
}

// appendFormatText appends text to out as string.format prints it back:
// each % doubled.
func appendFormatText(out, text []byte) []byte {
	for {
		i := bytes.IndexByte(text, '%')
		if i < 0 {
			return append(out, text...)
		}
		out = append(out, text[:i+1]...)
		out = append(out, '%')
		text = text[i+1:]
	}
}

// encodeKbCard encodes k as stored: without its links and version.
func encodeKbCard(op string, k kanban.Card) ([]byte, error) {
	k.Parents, k.Children, k.Version = nil, nil, 0
	b, err := json.Marshal(k)
	if err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	return b, nil
}

func (s kanbanStore) Card(ctx context.Context, id string) (kanban.Card, error) {
	const op = "redis.kanban.Card"
	cards, err := s.read(ctx, op, "ids", id)
	if err == nil && len(cards) == 0 {
		err = errs.E(op, errs.NotFound, "no card %s", id)
	}
	if err != nil {
		return kanban.Card{}, err
	}
	return cards[0], nil
}

func (s kanbanStore) CardByKey(ctx context.Context, board, key string) (kanban.Card, error) {
	const op = "redis.kanban.CardByKey"
	db := s.db
	if err := db.check(op); err != nil {
		return kanban.Card{}, err
	}
	id, err := db.client.HGet(ctx, db.kbKey("key:"+board), key).Result()
	if err == goredis.Nil || key == "" {
		return kanban.Card{}, errs.E(op, errs.NotFound, "no card of board %s with key %s", board, key)
	}
	if err != nil {
		return kanban.Card{}, db.fail(op, err)
	}
	return s.Card(ctx, id)
}

func (s kanbanStore) Cards(ctx context.Context, q kanban.Query) ([]kanban.Card, error) {
	const op = "redis.kanban.Cards"
	if q.Board == "" {
		return nil, errs.E(op, errs.Invalid, "a card query needs a board")
	}
	args := []any{q.Board}
	for _, st := range q.StatusList() {
		args = append(args, string(st))
	}
	all, err := s.read(ctx, op, "board", args...)
	if err != nil {
		return nil, err
	}
	kanban.SortCards(all)
	return q.Trim(all), nil
}

// read runs kb_read and decodes its cards.
func (s kanbanStore) read(ctx context.Context, op, mode string, args ...any) ([]kanban.Card, error) {
	db := s.db
	i := db.kbShard()
	v, err := db.runIn(ctx, op, scriptKbRead, i, nil, append([]any{db.shards.pfx(i), mode}, args...)...)
	if err != nil {
		return nil, err
	}
	var out []kanban.Card
	for i := 0; i < len(v); {
		if i+3 > len(v) {
			return nil, errs.E(op, errs.Internal, "unexpected script reply of %d items", len(v))
		}
		var k kanban.Card
		if err := json.Unmarshal([]byte(str(v[i+2])), &k); err != nil {
			return nil, errs.Wrap(op, errs.Internal, err)
		}
		k.ID, k.Version = str(v[i]), num(v[i+1])
		i += 3
		for _, rel := range []*[]string{&k.Parents, &k.Children} {
			if i >= len(v) {
				return nil, errs.E(op, errs.Internal, "unexpected script reply of %d items", len(v))
			}
			n := int(num(v[i]))
			i++
			if i+n > len(v) {
				return nil, errs.E(op, errs.Internal, "unexpected script reply of %d items", len(v))
			}
			for _, x := range v[i : i+n] {
				*rel = append(*rel, str(x))
			}
			i += n
		}
		out = append(out, k)
	}
	return out, nil
}

func (s kanbanStore) Comments(ctx context.Context, card string) ([]kanban.Comment, error) {
	const op = "redis.kanban.Comments"
	db := s.db
	if err := db.check(op); err != nil {
		return nil, err
	}
	bodies, err := db.client.LRange(ctx, db.kbKey("cm:"+card), 0, -1).Result()
	if err != nil {
		return nil, db.fail(op, err)
	}
	return decodeAll[kanban.Comment](op, bodies)
}

func (s kanbanStore) Attachments(ctx context.Context, card string) ([]kanban.Attachment, error) {
	const op = "redis.kanban.Attachments"
	db := s.db
	if err := db.check(op); err != nil {
		return nil, err
	}
	m, err := db.client.HGetAll(ctx, db.kbKey("att:"+card)).Result()
	if err != nil {
		return nil, db.fail(op, err)
	}
	out, err := decodeAll[kanban.Attachment](op, slices.Collect(maps.Values(m)))
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b kanban.Attachment) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

func (s kanbanStore) Runs(ctx context.Context, card string) ([]kanban.Run, error) {
	const op = "redis.kanban.Runs"
	db := s.db
	if err := db.check(op); err != nil {
		return nil, err
	}
	ids, err := db.client.ZRange(ctx, db.kbKey("runs:"+card), 0, -1).Result()
	if err != nil {
		return nil, db.fail(op, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = db.kbKey("r:" + id)
	}
	vals, err := db.client.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, db.fail(op, err)
	}
	bodies := make([]string, 0, len(vals))
	for _, x := range vals {
		if x != nil {
			bodies = append(bodies, str(x))
		}
	}
	return decodeAll[kanban.Run](op, bodies)
}

func (s kanbanStore) Events(ctx context.Context, q kanban.EventQuery) ([]kanban.Event, error) {
	const op = "redis.kanban.Events"
	db := s.db
	if q.Board == "" {
		return nil, errs.E(op, errs.Invalid, "an event query needs a board")
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 500
	}
	keys := []string{db.kbKey("ev:" + q.Board)}
	if q.Card != "" {
		keys = append(keys, db.kbKey("evc:"+q.Card))
	}
	v, err := db.run(ctx, op, scriptKbEvents, keys, q.After, limit)
	if err != nil {
		if q.After != "" && errs.Is(err, errs.Internal) {
			return nil, errs.E(op, errs.Invalid, "cursor %q is not one this store gave", q.After)
		}
		return nil, err
	}
	out := make([]kanban.Event, 0, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		var e kanban.Event
		if err := json.Unmarshal([]byte(str(v[i+1])), &e); err != nil {
			return nil, errs.Wrap(op, errs.Internal, err)
		}
		e.Cursor = str(v[i])
		out = append(out, e)
	}
	return out, nil
}

func (s kanbanStore) PutSubscription(ctx context.Context, sub kanban.Subscription) (kanban.Subscription, error) {
	const op = "redis.kanban.PutSubscription"
	db := s.db
	if err := kanban.CheckSubscription(op, sub); err != nil {
		return sub, err
	}
	from := sub.Version
	sub.Version = 0
	body, err := json.Marshal(sub)
	if err != nil {
		return sub, errs.Wrap(op, errs.Invalid, err)
	}
	v, err := db.run(ctx, op, scriptKbSubPut, []string{db.kbKey("sub:" + sub.ID), db.kbKey("subs")}, sub.ID, from, sub.Board, body)
	if err != nil {
		return sub, err
	}
	switch {
	case len(v) > 0 && str(v[0]) == "CONFLICT" && from == 0:
		return sub, errs.E(op, errs.Conflict, "subscription %s exists", sub.ID)
	case len(v) > 0 && str(v[0]) == "CONFLICT":
		return sub, errs.E(op, errs.Conflict, "subscription %s moved on from version %d: read it again", sub.ID, from)
	case len(v) > 0 && str(v[0]) == "NOTFOUND":
		return sub, errs.E(op, errs.NotFound, "no subscription %s", sub.ID)
	}
	if err := status(op, v); err != nil {
		return sub, err
	}
	sub.Version = from + 1
	return sub, nil
}

func (s kanbanStore) Subscriptions(ctx context.Context, board string) ([]kanban.Subscription, error) {
	const op = "redis.kanban.Subscriptions"
	db := s.db
	v, err := db.run(ctx, op, scriptKbSubRead, []string{db.kbKey("subs")}, db.shards.pfx(db.kbShard()), board)
	if err != nil {
		return nil, err
	}
	out := make([]kanban.Subscription, 0, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		var sub kanban.Subscription
		if err := json.Unmarshal([]byte(str(v[i+1])), &sub); err != nil {
			return nil, errs.Wrap(op, errs.Internal, err)
		}
		sub.Version = num(v[i])
		out = append(out, sub)
	}
	slices.SortFunc(out, func(a, b kanban.Subscription) int {
		if c := strings.Compare(a.Board, b.Board); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

func (s kanbanStore) RemoveSubscription(ctx context.Context, id string) error {
	const op = "redis.kanban.RemoveSubscription"
	db := s.db
	if err := db.check(op); err != nil {
		return err
	}
	n, err := db.client.Del(ctx, db.kbKey("sub:"+id)).Result()
	if err != nil {
		return db.fail(op, err)
	}
	if n == 0 {
		return errs.E(op, errs.NotFound, "no subscription %s", id)
	}
	return db.fail(op, db.client.ZRem(ctx, db.kbKey("subs"), id).Err())
}

// decodeAll decodes each of bodies as a T.
func decodeAll[T any](op string, bodies []string) ([]T, error) {
	out := make([]T, 0, len(bodies))
	for _, b := range bodies {
		var v T
		if err := json.Unmarshal([]byte(b), &v); err != nil {
			return nil, errs.Wrap(op, errs.Internal, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func (s kanbanStore) PutLane(ctx context.Context, l kanban.LaneState) (kanban.LaneState, error) {
	const op = "redis.kanban.PutLane"
	db := s.db
	if err := kanban.CheckLaneState(op, l); err != nil {
		return l, err
	}
	from := l.Version
	l.Version = 0
	body, err := json.Marshal(l)
	if err != nil {
		return l, errs.Wrap(op, errs.Invalid, err)
	}
	// A lane's state is kept as a subscription is: a versioned hash in
	// an index; it has no board.
	v, err := db.run(ctx, op, scriptKbSubPut, []string{db.kbKey("lane:" + l.Lane), db.kbKey("lanes")}, l.Lane, from, "", body)
	if err != nil {
		return l, err
	}
	switch {
	case len(v) > 0 && str(v[0]) == "CONFLICT" && from == 0:
		return l, errs.E(op, errs.Conflict, "lane %s has a state", l.Lane)
	case len(v) > 0 && str(v[0]) == "CONFLICT":
		return l, errs.E(op, errs.Conflict, "lane %s moved on from version %d: read it again", l.Lane, from)
	case len(v) > 0 && str(v[0]) == "NOTFOUND":
		return l, errs.E(op, errs.NotFound, "lane %s has no state", l.Lane)
	}
	if err := status(op, v); err != nil {
		return l, err
	}
	l.Version = from + 1
	return l, nil
}

func (s kanbanStore) Lanes(ctx context.Context) ([]kanban.LaneState, error) {
	const op = "redis.kanban.Lanes"
	db := s.db
	v, err := db.run(ctx, op, scriptKbLaneRead, []string{db.kbKey("lanes")}, db.shards.pfx(db.kbShard()))
	if err != nil {
		return nil, err
	}
	out := make([]kanban.LaneState, 0, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		var l kanban.LaneState
		if err := json.Unmarshal([]byte(str(v[i+1])), &l); err != nil {
			return nil, errs.Wrap(op, errs.Internal, err)
		}
		l.Version = num(v[i])
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b kanban.LaneState) int { return strings.Compare(a.Lane, b.Lane) })
	return out, nil
}
