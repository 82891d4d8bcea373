package redis

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

var _ sessions.Store = (*sessionStore)(nil)

// sessionStore is the conversation side of DB: turn queues, leases,
// history and metadata.
type sessionStore struct{ db *DB }

func (s *sessionStore) Append(ctx context.Context, in sessions.Inbound) (sessions.AppendResult, error) {
	res, _, err := s.appendEntry(ctx, "redis.Append", in, "", 0)
	return res, err
}

func (s *sessionStore) AppendClaim(ctx context.Context, in sessions.Inbound, worker string, ttl time.Duration) (sessions.AppendResult, *sessions.Turn, error) {
	if ttl <= 0 {
		ttl = sessions.DefaultLeaseTTL
	}
	return s.appendEntry(ctx, "redis.AppendClaim", in, worker, ttl)
}

// appendEntry runs q_append, which leases the conversation to
// worker when it is not empty and the new entry is the next to run.
func (s *sessionStore) appendEntry(ctx context.Context, op string, in sessions.Inbound, worker string, ttl time.Duration) (sessions.AppendResult, *sessions.Turn, error) {
	c, err := s.appendCall(op, &in, worker, ttl)
	if err != nil {
		return sessions.AppendResult{}, nil, err
	}
	v, err := s.db.run(ctx, op, scriptQAppend, c.keys, c.args...)
	if err != nil {
		return sessions.AppendResult{}, nil, err
	}
	return s.appendReply(op, &in, worker, c, v)
}

// appendCall is q_append's keys and arguments for an entry, and the
// history this process knows of its conversation, sent so that the
// script need not send it back (see histcache.go). appendCall and
// appendReply are apart from appendEntry so that their locals are off
// the goroutine's stack while the call waits on Redis.
type appendCall struct {
	keys       []string
	args       []any
	known      histEntry
	knownToken string
}

// appendCall encodes *in, which it leaves as the entry keeps it, and
// makes its call to q_append.
func (s *sessionStore) appendCall(op string, in *sessions.Inbound, worker string, ttl time.Duration) (*appendCall, error) {
	enc, data, err := sessions.EncodeInbound(op, *in, s.db.lim)
	if err != nil {
		return nil, err
	}
	*in = enc
	tag, pfx := convTag(in.Conv), s.db.convPfx(in.Conv)
	lane := in.Lane()
	c := &appendCall{keys: []string{
		convKeyIn(pfx, tag, "state"),
		readyKey(pfx),
		convKeyIn(pfx, tag, "q"+strconv.Itoa(lane)),
		convKeyIn(pfx, tag, "meta"),
		convKeyIn(pfx, tag, "hist"),
		activeKey(pfx),
		convKeyIn(pfx, tag, "ctl"),
	}}
	if in.MessageID != "" {
		c.keys = append(c.keys, convKeyIn(pfx, tag, "dd:"+in.MessageID))
	}
	knownLen := 0
	if worker != "" {
		if e, ok := s.db.hist.get(in.Conv); ok {
			c.known, c.knownToken, knownLen = e, strconv.FormatInt(e.token, 10), len(e.msgs)
		}
	}
	c.args = []any{tag, lane, data, s.db.nowArg(), s.db.windowArg(), worker, durMS(ttl), c.knownToken, knownLen, pfx}
	return c, nil
}

// appendReply reads q_append's reply v to c for the entry in.
func (s *sessionStore) appendReply(op string, in *sessions.Inbound, worker string, c *appendCall, v []any) (sessions.AppendResult, *sessions.Turn, error) {
	// 3: a duplicate; 4: queued, with the metadata and whether a lease
	// held the conversation; 7: the same, with the entry the lease has
	// handed out following; 8: queued and leased, the turn following.
	if len(v) < 3 || len(v) > 8 || len(v) == 5 || len(v) == 6 {
		return sessions.AppendResult{}, nil, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	res := sessions.AppendResult{EntryID: str(v[0]), Duplicate: num(v[1]) == 1}
	switch len(v) {
	case 3:
		return res, nil, nil
	case 4, 7:
		res.Meta = metaReply(v[2], v[4:])
		res.Held = num(v[3]) == 1
		return res, nil, nil
	}
	turn := &sessions.Turn{
		Lease:        sessions.Lease{Conv: in.Conv, Worker: worker, Token: num(v[3]), Expires: msTime(v[4])},
		Entry:        sessions.Entry{Inbound: *in, ID: res.EntryID, EnqueuedAt: msTime(v[5]), Deliveries: 1},
		HistoryRead:  true,
		Uncontrolled: num(v[7]) == 0,
	}
	if same, ok := v[6].(int64); ok && same == 1 && c.knownToken != "" {
		known := c.known
		known.token = turn.Lease.Token
		s.db.hist.put(in.Conv, known)
		s.db.hist.served.Add(1)
		turn.History = known.copy()
		return res, turn, nil
	}
	var err error
	if turn.History, err = s.db.readHistory(op, in.Conv, turn.Lease.Token, v[6]); err != nil {
		return res, nil, err
	}
	return res, turn, nil
}

func (s *sessionStore) Claim(ctx context.Context, worker string, ttl time.Duration) (*sessions.Turn, error) {
	turns, err := s.claim(ctx, "redis.Claim", worker, 1, ttl)
	if err != nil || len(turns) == 0 {
		return nil, err
	}
	return turns[0], nil
}

func (s *sessionStore) ClaimMany(ctx context.Context, worker string, n int, ttl time.Duration) ([]*sessions.Turn, error) {
	return s.claim(ctx, "redis.ClaimMany", worker, n, ttl)
}

func (s *sessionStore) Next(ctx context.Context, l sessions.Lease) (*sessions.Entry, error) {
	const op = "redis.Next"
	if err := chat.ValidateConv(op, l.Conv); err != nil {
		return nil, err
	}
	tag, pfx := convTag(l.Conv), s.db.convPfx(l.Conv)
	v, err := s.db.run(ctx, op, scriptQNext, []string{convKeyIn(pfx, tag, "state")},
		pfx, tag, l.Token, s.db.nowArg())
	if err != nil {
		return nil, err
	}
	if err := status(op, v); err != nil {
		return nil, err
	}
	if len(v) == 1 {
		return nil, nil
	}
	return decodeEntry(op, v[1:])
}

func (s *sessionStore) Renew(ctx context.Context, l sessions.Lease, ttl time.Duration) (sessions.Lease, error) {
	const op = "redis.Renew"
	if err := chat.ValidateConv(op, l.Conv); err != nil {
		return l, err
	}
	if ttl <= 0 {
		ttl = sessions.DefaultLeaseTTL
	}
	tag, pfx := convTag(l.Conv), s.db.convPfx(l.Conv)
	v, err := s.db.run(ctx, op, scriptQRenew,
		[]string{convKeyIn(pfx, tag, "state"), readyKey(pfx)},
		tag, l.Token, durMS(ttl), s.db.nowArg())
	if err != nil {
		return l, err
	}
	if err := status(op, v); err != nil {
		return l, err
	}
	if len(v) != 3 {
		return l, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	l.Worker = str(v[1])
	l.Expires = msTime(v[2])
	return l, nil
}

func (s *sessionStore) Release(ctx context.Context, l sessions.Lease) error {
	const op = "redis.Release"
	if err := chat.ValidateConv(op, l.Conv); err != nil {
		return err
	}
	tag, pfx := convTag(l.Conv), s.db.convPfx(l.Conv)
	v, err := s.db.run(ctx, op, scriptQRelease,
		[]string{convKeyIn(pfx, tag, "state"), readyKey(pfx)},
		tag, l.Token, s.db.nowArg())
	if err != nil {
		return err
	}
	return status(op, v)
}

func (s *sessionStore) Finish(ctx context.Context, l sessions.Lease, f sessions.Finish) error {
	const op = "redis.Finish"
	enc, err := encodeFinish(op, l, &f, s.db.lim)
	if err != nil {
		return err
	}
	v, err := s.finish(ctx, op, l, f, enc, "", 0, "")
	if err != nil {
		return err
	}
	return handOff(op, f, v)
}

func (s *sessionStore) FinishAndClaim(ctx context.Context, l sessions.Lease, f sessions.Finish, worker string, ttl time.Duration) (*sessions.Turn, error) {
	const op = "redis.FinishAndClaim"
	enc, err := encodeFinish(op, l, &f, s.db.lim)
	if err != nil {
		return nil, err
	}
	if ttl <= 0 {
		ttl = sessions.DefaultLeaseTTL
	}
	// q_finish claims in the conversation's shard only (one slot): it
	// is told the oldest due conversation of the other shards, and
	// claims only one ready before it (claim.go). Asked to claim only
	// when the conversation has entries left, which it mostly has not,
	// it reads no other shard first: it answers whether to claim, and
	// the claim is a call of its own.
	var heads []readyHead
	bound := ""
	own := s.db.shards.of(l.Conv)
	switch {
	case worker == "" || !s.db.shards.sharded():
	case f.ClaimIfLeft:
		bound = claimAfter
	default:
		if err := s.db.check(op); err != nil {
			return nil, err
		}
		if heads, err = s.db.peekReady(ctx, op, 1, own); err != nil {
			return nil, err
		}
		bound = boundArg(heads)
	}
	v, err := s.finish(ctx, op, l, f, enc, worker, ttl, bound)
	if err != nil {
		return nil, err
	}
	if err := handOff(op, f, v); err != nil {
		return nil, err
	}
	switch {
	case len(v) == 3 && str(v[2]) == "ELSEWHERE":
		// The commit stands whatever this claim meets, so its failure
		// reads as nothing ready, as a Claim that found nothing would.
		if bound == claimAfter {
			if heads, err = s.db.peekReady(ctx, op, 1, -1); err != nil {
				return nil, nil
			}
		} else {
			// Another shard's conversation is ready longest. Should
			// another claim take it first, this shard's is next: it
			// goes last.
			heads = append(heads, readyHead{shard: own, score: math.MaxInt64})
		}
		turns, err := s.claimHeads(ctx, op, heads, worker, 1, ttl)
		if err != nil || len(turns) == 0 {
			return nil, nil
		}
		return turns[0], nil
	case len(v) > 2:
		return s.db.decodeTurn(op, worker, v[2:])
	}
	return nil, nil
}

// flag is a script's yes-or-no argument: "1" or "0".
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// handOff passes the outbox claims a committed finish made (the second
// item of its reply) to f.Handoff.
func handOff(op string, f sessions.Finish, v []any) error {
	if len(v) < 2 {
		return errs.E(op, errs.Internal, "unexpected finish reply %v", v)
	}
	h, ok := v[1].([]any)
	if !ok || (len(h) != 0 && len(h) != 3+2*len(f.Outbox)) {
		return errs.E(op, errs.Internal, "unexpected handoff in the finish reply: %v", v[1])
	}
	if !f.Handoff.Active() {
		return nil
	}
	if len(h) == 0 {
		f.Handoff.Claimed(nil)
		return nil
	}
	token, expires, at := num(h[0]), msTime(h[1]), msTime(h[2])
	claims := make([]outbox.Claimed, 0, len(f.Outbox))
	for i, m := range f.Outbox {
		if num(h[4+2*i]) != 1 {
			continue
		}
		m.ID, m.CreatedAt, m.NextAttempt, m.Attempts, m.LastError = str(h[3+2*i]), at, at, 0, ""
		claims = append(claims, outbox.Claimed{Message: m, Token: token, Expires: expires})
	}
	f.Handoff.Claimed(claims)
	return nil
}

// finish runs q_finish, which also claims the next turn for
// worker when worker is not empty (one ready before bound, as boundArg
// makes it, or none when bound is claimAfter), and returns its reply once its status
// is OK, after the writes it forwarded ran at their homes (forward.go).
// finished is a Finish's history and outbox encoded (encodeFinish).
type finished struct {
	hist [][]byte
	msgs []any
}

// encodeFinish checks f's conversation and encodes its history and
// outbox. Its callers call it before finish, whose frame is large, so
// that the goroutine's stack holds the two frames' locals and the JSON
// encoder's frames one at a time, not all at once.
func encodeFinish(op string, l sessions.Lease, f *sessions.Finish, lim sessions.Limits) (finished, error) {
	if err := chat.ValidateConv(op, l.Conv); err != nil {
		return finished{}, err
	}
	hist, err := sessions.EncodeMessages(op, f.History, lim)
	if err != nil {
		return finished{}, err
	}
	msgs, err := encodeOutbox(op, f.Outbox, lim)
	if err != nil {
		return finished{}, err
	}
	return finished{hist: hist, msgs: msgs}, nil
}

// finish commits f, encoded as enc.
func (s *sessionStore) finish(ctx context.Context, op string, l sessions.Lease, f sessions.Finish, enc finished, worker string, ttl time.Duration, bound string) ([]any, error) {
	hist, msgs := enc.hist, enc.msgs
	absorbed, err := absorbedIDs(op, f)
	if err != nil {
		return nil, err
	}
	if err := sessions.ValidateMeta(op, f.Meta, s.db.lim); err != nil {
		return nil, err
	}
	if err := sessions.CheckDropHistory(op, f); err != nil {
		return nil, err
	}
	ops, err := s.db.writeOps(op, f.Writes)
	if err != nil {
		return nil, err
	}
	tag, pfx := convTag(l.Conv), s.db.convPfx(l.Conv)
	ops, fwd := splitForwarded(pfx, ops)
	args := make([]any, 0, 18+len(absorbed)+len(hist)+len(msgs)+2*len(f.Meta)+len(fwd))
	args = append(args, pfx, tag, l.Token, f.EntryID, flag(f.Release), s.db.nowArg(), s.db.windowArg(),
		worker, durMS(ttl), len(absorbed))
	for _, id := range absorbed {
		args = append(args, id)
	}
	args = append(args, len(hist))
	for _, h := range hist {
		args = append(args, h)
	}
	args = append(args, len(f.Outbox))
	args = append(args, msgs...)
	args = append(args, len(f.Meta))
	for k, v := range f.Meta {
		args = append(args, k, v)
	}
	if f.Handoff.Active() {
		args = append(args, f.Handoff.Worker, durMS(f.Handoff.ClaimTTL()))
	} else {
		args = append(args, "", 0)
	}
	args = append(args, flag(f.ClaimIfLeft), f.DropHistory)
	args = appendOps(args, ops)
	args = append(args, len(fwd))
	for _, w := range fwd {
		args = append(args, w.member)
	}
	args = append(args, bound)
	base, known := s.db.hist.take(l.Conv, l.Token)
	v, err := s.db.run(ctx, op, scriptQFinish,
		[]string{convKeyIn(pfx, tag, "state"), readyKey(pfx), convKeyIn(pfx, tag, "hist"), convKeyIn(pfx, tag, "meta"), activeKey(pfx)},
		args...)
	if err != nil {
		return nil, err
	}
	if err := status(op, v); err != nil {
		return nil, err
	}
	s.db.wroteHistory(op, l.Conv, base.dropped(f.DropHistory), known, f.History, hist)
	// The commit stands: a forwarded write that fails here is the
	// sweep's to apply again.
	_ = s.db.applyForwarded(ctx, op, pfx, fwd, s.db.nowArg())
	return v, nil
}

func (s *sessionStore) AppendHistory(ctx context.Context, l sessions.Lease, msgs ...chat.Message) error {
	const op = "redis.AppendHistory"
	if err := chat.ValidateConv(op, l.Conv); err != nil {
		return err
	}
	hist, err := sessions.EncodeMessages(op, msgs, s.db.lim)
	if err != nil {
		return err
	}
	tag, pfx := convTag(l.Conv), s.db.convPfx(l.Conv)
	args := make([]any, 0, 1+len(hist))
	args = append(args, l.Token)
	for _, h := range hist {
		args = append(args, h)
	}
	base, known := s.db.hist.take(l.Conv, l.Token)
	v, err := s.db.run(ctx, op, scriptQHistory,
		[]string{convKeyIn(pfx, tag, "state"), convKeyIn(pfx, tag, "hist")}, args...)
	if err != nil {
		return err
	}
	if err := status(op, v); err != nil {
		return err
	}
	s.db.wroteHistory(op, l.Conv, base, known, msgs, hist)
	return nil
}

func (s *sessionStore) History(ctx context.Context, conv string) ([]chat.Message, error) {
	const op = "redis.History"
	if err := s.db.check(op); err != nil {
		return nil, err
	}
	if err := chat.ValidateConv(op, conv); err != nil {
		return nil, err
	}
	cmd := goredis.NewSliceCmd(ctx, "lrange", s.db.convKey(convTag(conv), "hist"), 0, -1)
	raw, err := await(ctx, s.db.batch, cmd, cmd.Result)
	if err != nil {
		return nil, s.db.fail(op, err)
	}
	return decodeHistory(op, raw)
}

func (s *sessionStore) QueueDepth(ctx context.Context, limit int) (int, error) {
	const op = "redis.QueueDepth"
	if err := s.db.check(op); err != nil {
		return 0, err
	}
	if err := sessions.CheckQueueLimit(op, limit); err != nil {
		return 0, err
	}
	// Each shard counts up to the limit, all at once; the sum stops at
	// it too.
	counts := make([]int, s.db.shards.count())
	err := inShards(ctx, s.db.shards.all(), func(ctx context.Context, i int) error {
		pfx := s.db.shards.pfx(i)
		v, err := s.db.run(ctx, op, scriptQDepth, []string{readyKey(pfx)}, pfx, limit)
		if err != nil {
			return err
		}
		if len(v) != 1 {
			return errs.E(op, errs.Internal, "unexpected script reply %v", v)
		}
		counts[i] = int(num(v[0]))
		return nil
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	return min(n, limit), nil
}

func (s *sessionStore) ClearHistory(ctx context.Context, conv string) error {
	const op = "redis.ClearHistory"
	if err := s.db.check(op); err != nil {
		return err
	}
	if err := chat.ValidateConv(op, conv); err != nil {
		return err
	}
	s.db.hist.drop(conv)
	tag, pfx := convTag(conv), s.db.convPfx(conv)
	v, err := s.db.run(ctx, op, scriptQClearHistory, []string{convKeyIn(pfx, tag, "state"), convKeyIn(pfx, tag, "hist")})
	if err != nil {
		return err
	}
	return status(op, v)
}

func (s *sessionStore) Meta(ctx context.Context, conv string) (map[string]string, error) {
	const op = "redis.Meta"
	if err := s.db.check(op); err != nil {
		return nil, err
	}
	if err := chat.ValidateConv(op, conv); err != nil {
		return nil, err
	}
	tag, pfx := convTag(conv), s.db.convPfx(conv)
	v, err := s.db.run(ctx, op, scriptQMeta,
		[]string{convKeyIn(pfx, tag, "state"), convKeyIn(pfx, tag, "meta")}, pfx, tag, s.db.nowArg())
	if err != nil {
		return nil, err
	}
	if len(v) != 1 && len(v) != 4 {
		return nil, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	return metaReply(v[0], v[1:]), nil
}

// metaReply makes the metadata a script read: flat, its field/value
// list, and the entry a live lease holds the conversation with, as
// running (lib_queue.lua) returns it (id, data, ms handed out at), or
// nothing. A running-turn mark an older version stored is not returned;
// the lease's entry makes the one there is.
func metaReply(flat any, turn []any) map[string]string {
	list, _ := flat.([]any)
	m := make(map[string]string, len(list)/2+1)
	for i := 0; i+1 < len(list); i += 2 {
		m[str(list[i])] = str(list[i+1])
	}
	delete(m, sessions.ConvMetaTurn)
	if len(turn) != 3 {
		return m
	}
	var since time.Time
	if ms := num(turn[2]); ms > 0 {
		since = time.UnixMilli(ms).UTC()
	}
	if mark := sessions.TurnMarkOf(str(turn[0]), since, []byte(str(turn[1]))); mark != "" {
		m[sessions.ConvMetaTurn] = mark
	}
	return m
}

func (s *sessionStore) SetMeta(ctx context.Context, conv, key, value string) error {
	const op = "redis.SetMeta"
	if err := s.db.check(op); err != nil {
		return err
	}
	if err := chat.ValidateConv(op, conv); err != nil {
		return err
	}
	if err := sessions.ValidateMeta(op, map[string]string{key: value}, s.db.lim); err != nil {
		return err
	}
	k := s.db.convKey(convTag(conv), "meta")
	cmd := goredis.NewIntCmd(ctx, "hset", k, key, value)
	if value == "" {
		cmd = goredis.NewIntCmd(ctx, "hdel", k, key)
	}
	_, err := await(ctx, s.db.batch, cmd, cmd.Result)
	return s.db.fail(op, err)
}

// absorbedIDs checks f.Absorbed and drops repeats: an id named twice is
// still one entry taken in. The entry being acked is no absorbed entry,
// so naming it is a malformed Finish.
func absorbedIDs(op string, f sessions.Finish) ([]string, error) {
	if len(f.Absorbed) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(f.Absorbed))
	for _, id := range f.Absorbed {
		if id == f.EntryID {
			return nil, errs.E(op, errs.Invalid, "entry %q is both acked and absorbed", id)
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// turnItems is how many items of a script's reply make one claimed turn.
const turnItems = 9

// decodeTurn reads a claim's reply: {conversation tag, lease token,
// expires ms, entry id, data, enqueued ms, deliveries, {encoded history
// message, …}, 1 when it has a session controller's state else 0}.
func (db *DB) decodeTurn(op, worker string, v []any) (*sessions.Turn, error) {
	if len(v) != turnItems {
		return nil, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	turn := &sessions.Turn{
		Lease:        sessions.Lease{Conv: convFromTag(str(v[0])), Worker: worker, Token: num(v[1]), Expires: msTime(v[2])},
		HistoryRead:  true,
		Uncontrolled: num(v[8]) == 0,
	}
	if err := decodeEntryInto(op, v[3:7], &turn.Entry); err != nil {
		return nil, err
	}
	var err error
	if turn.History, err = db.readHistory(op, turn.Lease.Conv, turn.Lease.Token, v[7]); err != nil {
		return nil, err
	}
	return turn, nil
}

// readHistory decodes the history a grant of token read, keeps it for the
// conversation's next turn and returns a copy for this one.
func (db *DB) readHistory(op, conv string, token int64, v any) ([]chat.Message, error) {
	msgs, size, err := decodeHistorySized(op, v)
	if err != nil {
		return nil, err
	}
	e := histEntry{token: token, msgs: msgs, size: size}
	db.hist.put(conv, e)
	return e.copy(), nil
}

// wroteHistory is called once a write under token appended hist (the
// encoded messages) to conv's history: the entry taken before the write,
// base when ok, goes back extended.
func (db *DB) wroteHistory(op, conv string, base histEntry, ok bool, msgs []chat.Message, hist [][]byte) {
	if !ok {
		return
	}
	size := 0
	for _, h := range hist {
		size += messageSize(len(h))
	}
	added, ok := asRead(msgs)
	if !ok {
		// Decoded from what was stored, the messages are what a read
		// returns.
		raw := make([]any, len(hist))
		for i, h := range hist {
			raw[i] = string(h)
		}
		var err error
		if added, _, err = decodeHistorySized(op, raw); err != nil {
			return
		}
	}
	db.hist.putBack(conv, base.extended(added, size))
}

// asRead returns msgs as a read of the history would return them, with
// their times' monotonic readings stripped, no empty tool call lists and
// tool calls of their own, and reports whether it could: a string that
// is not valid UTF-8, or a time whose zone is not a whole number of
// minutes off UTC, comes back from its encoding changed, which only
// decoding it tells exactly.
func asRead(msgs []chat.Message) ([]chat.Message, bool) {
	out := slices.Clone(msgs)
	for i := range out {
		m := &out[i]
		if !utf8.ValidString(m.Role) || !utf8.ValidString(m.Content) || !utf8.ValidString(m.ToolCallID) || !utf8.ValidString(m.Name) {
			return nil, false
		}
		for _, c := range m.ToolCalls {
			if !utf8.ValidString(c.ID) || !utf8.ValidString(c.Name) || !utf8.ValidString(c.Arguments) {
				return nil, false
			}
		}
		if _, offset := m.At.Zone(); offset%60 != 0 {
			return nil, false
		}
		m.At = m.At.Round(0)
		m.ToolCalls = slices.Clone(m.ToolCalls)
		if len(m.ToolCalls) == 0 {
			m.ToolCalls = nil
		}
	}
	return out, true
}

// decodeHistory decodes a history list as LRANGE answers it, read alone
// or by a script with a claim.
func decodeHistory(op string, v any) ([]chat.Message, error) {
	msgs, _, err := decodeHistorySized(op, v)
	return msgs, err
}

// decodeHistorySized is decodeHistory that also returns about how much
// memory the messages take.
func decodeHistorySized(op string, v any) ([]chat.Message, int, error) {
	hist, ok := v.([]any)
	if !ok {
		return nil, 0, errs.E(op, errs.Internal, "unexpected history in the reply: %v", v)
	}
	msgs := make([]chat.Message, len(hist))
	size := 0
	for i, h := range hist {
		b := str(h)
		size += messageSize(len(b))
		if err := json.Unmarshal([]byte(b), &msgs[i]); err != nil {
			return nil, 0, errs.Wrap(op, errs.Internal, err)
		}
	}
	return msgs, size, nil
}

// decodeEntry reads {entry id, data, enqueued ms, deliveries}.
func decodeEntry(op string, v []any) (*sessions.Entry, error) {
	e := &sessions.Entry{}
	if err := decodeEntryInto(op, v, e); err != nil {
		return nil, err
	}
	return e, nil
}

func decodeEntryInto(op string, v []any, e *sessions.Entry) error {
	if len(v) != 4 {
		return errs.E(op, errs.Internal, "unexpected entry reply %v", v)
	}
	*e = sessions.Entry{ID: str(v[0]), EnqueuedAt: msTime(v[2]), Deliveries: int(num(v[3]))}
	if err := json.Unmarshal([]byte(str(v[1])), &e.Inbound); err != nil {
		return errs.Wrap(op, errs.Internal, err)
	}
	return nil
}

// encodeOutbox validates outbox messages and lays them out as the scripts
// read them: encoded message, platform, idempotency key, next attempt.
func encodeOutbox(op string, msgs []outbox.Message, lim sessions.Limits) ([]any, error) {
	out := make([]any, 0, 4*len(msgs))
	for i := range msgs {
		m := &msgs[i]
		b, err := outbox.Encode(op, m, lim.MaxEntryBytes)
		if err != nil {
			return nil, err
		}
		next := ""
		if !m.NextAttempt.IsZero() {
			next = strconv.FormatInt(m.NextAttempt.UnixMilli(), 10)
		}
		out = append(out, b, m.Target.String(), m.IdempotencyKey, next)
	}
	return out, nil
}
