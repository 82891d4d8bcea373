package storetest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/instances"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/notes"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
)

// The suite runs against a small in-memory store written from the
// interface comments alone, so that a case failing on a real backend is
// known to be passable as written.
func TestSuiteAgainstMemory(t *testing.T) {
	RunAll(t, Backend{
		Name: "memory",
		New:  func(t *testing.T) Place { return &memPlace{data: newMemData()} },
		// Written for the turn queue, the outbox, leases and cursors; the other
		// domains are checked against the real backends alone.
		Features: Features{Lacks: []Domain{Delegations, Kanban, Controllers, Pools}},
	})
}

type memPlace struct{ data *memData }

func (p *memPlace) Open(t *testing.T, clk clock.Clock, lim sessions.Limits) Store {
	return &memStore{data: p.data, clk: clk, lim: lim.WithDefaults()}
}

func (p *memPlace) Restart(t *testing.T) {}

// memData is what a place keeps; every store opened on it shares it.
type memData struct {
	mu       sync.Mutex
	seq      int64
	convs    map[string]*memConv
	msgs     map[string]*memMsg
	idemKey  map[string]memSeen
	timeline map[string][]sessions.TimelineItem
	signals  []signals.Signal // kept whole: the suite never looks past an hour
	notes    map[string][]notes.Note
	leases   map[string]memLease
	workers  map[string]time.Time                   // outbox workers' heartbeats
	beats    map[string]time.Duration               // how long each worker's beat holds
	cursors  map[string]map[string]memReceiveCursor // by platform, then channel
	files    map[string][]byte
	appr     []*approvals.Approval // in the order of creation
	grants   map[memGrantKey]approvals.Grant
	insts    map[string]memInstance // by id
	cron     *memCronData
}

// memGrantKey is a grant's scope and pattern.
type memGrantKey struct{ conv, session, pattern string }

// memReceiveCursor is a channel's receive cursor and when it was put.
type memReceiveCursor struct {
	value string
	at    time.Time
}

type memLease struct {
	holder  string
	expires time.Time
	token   int64
}

func newMemData() *memData {
	return &memData{
		convs:    map[string]*memConv{},
		msgs:     map[string]*memMsg{},
		idemKey:  map[string]memSeen{},
		timeline: map[string][]sessions.TimelineItem{},
		leases:   map[string]memLease{},
		workers:  map[string]time.Time{},
		beats:    map[string]time.Duration{},
		notes:    map[string][]notes.Note{},
		cursors:  map[string]map[string]memReceiveCursor{},
		files:    map[string][]byte{},
		grants:   map[memGrantKey]approvals.Grant{},
		insts:    map[string]memInstance{},
		cron:     newMemCronData(),
	}
}

// nextCursor hands out the place's next number as a cursor or id.
func (d *memData) nextCursor() string {
	d.seq++
	return strconv.FormatInt(d.seq, 10)
}

// memCursor reads a cursor the memory store made.
func memCursor(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

type memSeen struct {
	id string
	at time.Time
}

type memConv struct {
	lanes    [sessions.Lanes][]*sessions.Entry
	inflight *sessions.Entry // delivered and not acked
	since    time.Time       // when inflight was handed out last
	token    int64
	held     bool
	expires  time.Time
	ready    bool
	readyAt  time.Time
	readySeq int64
	history  []chat.Message
	meta     map[string]string
	seen     map[string]memSeen
	active   time.Time // the last append or commit
	worker   string    // the lease's holder, while held
}

func (c *memConv) hasWork() bool {
	if c.inflight != nil {
		return true
	}
	for _, l := range c.lanes {
		if len(l) > 0 {
			return true
		}
	}
	return false
}

// take hands out the conversation's next entry, at now when it was not
// handed out before.
func (c *memConv) take(now time.Time) *sessions.Entry {
	if c.inflight == nil {
		for i, l := range c.lanes {
			if len(l) > 0 {
				c.inflight, c.lanes[i], c.since = l[0], l[1:], now
				break
			}
		}
	}
	return c.inflight
}

type memMsg struct {
	outbox.Message
	seq     int64
	dead    bool
	claimed bool
	token   int64
	expires time.Time
	worker  string
}

type memStore struct {
	data   *memData
	clk    clock.Clock
	lim    sessions.Limits
	closed bool
}

func (s *memStore) Sessions() sessions.Store              { return memSessions{s} }
func (s *memStore) Signals() signals.Store                { return memSignals{s} }
func (s *memStore) Timeline() sessions.Timeline           { return memTimeline{s} }
func (s *memStore) Conversations() sessions.Conversations { return memConversations{s} }
func (s *memStore) Notes() notes.Store                    { return memNotes{s} }
func (s *memStore) Outbox() outbox.Store                  { return memOutbox{s} }
func (s *memStore) Leases() lease.Store                   { return memLeases{s} }
func (s *memStore) Cursors() adapters.Cursors             { return memCursors{s} }
func (s *memStore) Files() media.Store                    { return memFiles{s} }
func (s *memStore) Approvals() approvals.Store            { return memApprovals{s} }
func (s *memStore) Instances() instances.Store            { return memInstances{s} }
func (s *memStore) Cron() cronjobs.Store                  { return memCron{s} }
func (s *memStore) Once() lease.OnceStore                 { return memOnce{s} }

// The domains the memory store lacks (TestSuiteAgainstMemory's Lacks):
// the suite never asks for them.
func (s *memStore) Delegations() delegation.Store  { return nil }
func (s *memStore) Kanban() kanban.Store           { return nil }
func (s *memStore) Controllers() controllers.Store { return nil }
func (s *memStore) Pools() llm.PoolStore           { return nil }

type memLeases struct{ s *memStore }

func (m memLeases) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (int64, error) {
	const op = "mem.Acquire"
	if err := lease.CheckAcquire(op, name, holder, ttl); err != nil {
		return 0, err
	}
	if err := m.s.lock(op); err != nil {
		return 0, err
	}
	defer m.s.data.mu.Unlock()
	now := m.s.clk.Now()
	l := m.s.data.leases[name]
	live := now.Before(l.expires)
	if live && l.holder != holder {
		return 0, nil
	}
	if !live {
		l.token++
	}
	l.holder, l.expires = holder, now.Add(ttl)
	m.s.data.leases[name] = l
	return l.token, nil
}

func (m memLeases) Check(ctx context.Context, name, holder string, token int64) (bool, error) {
	const op = "mem.Check"
	if err := lease.CheckRelease(op, name, holder); err != nil {
		return false, err
	}
	if err := m.s.lock(op); err != nil {
		return false, err
	}
	defer m.s.data.mu.Unlock()
	l := m.s.data.leases[name]
	return l.holder == holder && l.token == token && m.s.clk.Now().Before(l.expires), nil
}

func (m memLeases) Release(ctx context.Context, name, holder string) error {
	const op = "mem.Release"
	if err := lease.CheckRelease(op, name, holder); err != nil {
		return err
	}
	if err := m.s.lock(op); err != nil {
		return err
	}
	defer m.s.data.mu.Unlock()
	if l, ok := m.s.data.leases[name]; ok && l.holder == holder {
		l.expires = time.Time{}
		m.s.data.leases[name] = l
	}
	return nil
}

func (s *memStore) Close() error {
	s.data.mu.Lock()
	defer s.data.mu.Unlock()
	s.closed = true
	return nil
}

// lock takes the place's lock and reports Closed for a closed store.
func (s *memStore) lock(op string) error {
	s.data.mu.Lock()
	if s.closed {
		s.data.mu.Unlock()
		return errs.E(op, errs.Closed, "store closed")
	}
	return nil
}

func (s *memStore) conv(key string) *memConv {
	c := s.data.convs[key]
	if c == nil {
		c = &memConv{meta: map[string]string{}, seen: map[string]memSeen{}}
		s.data.convs[key] = c
	}
	return c
}

func (s *memStore) markReady(c *memConv) {
	if !c.ready {
		s.data.seq++
		c.ready, c.readyAt, c.readySeq = true, s.clk.Now(), s.data.seq
	}
}

type memSessions struct{ s *memStore }

func (m memSessions) Append(ctx context.Context, in sessions.Inbound) (sessions.AppendResult, error) {
	res, _, err := m.appendEntry("mem.Append", in, "", 0, false)
	return res, err
}

func (m memSessions) AppendClaim(ctx context.Context, in sessions.Inbound, worker string, ttl time.Duration) (sessions.AppendResult, *sessions.Turn, error) {
	return m.appendEntry("mem.AppendClaim", in, worker, ttl, true)
}

// appendEntry is Append, and with claim set AppendClaim.
func (m memSessions) appendEntry(op string, in sessions.Inbound, worker string, ttl time.Duration, claim bool) (sessions.AppendResult, *sessions.Turn, error) {
	in, _, err := sessions.EncodeInbound(op, in, m.s.lim)
	if err != nil {
		return sessions.AppendResult{}, nil, err
	}
	if err := m.s.lock(op); err != nil {
		return sessions.AppendResult{}, nil, err
	}
	defer m.s.data.mu.Unlock()
	now := m.s.clk.Now()
	c := m.s.conv(in.Conv)
	if in.MessageID != "" {
		if seen, ok := c.seen[in.MessageID]; ok && now.Sub(seen.at) < m.s.lim.DedupeWindow {
			return sessions.AppendResult{EntryID: seen.id, Duplicate: true}, nil, nil
		}
	}
	held := c.held && now.Before(c.expires)
	alone := !c.hasWork() && !held
	m.s.data.seq++
	e := &sessions.Entry{Inbound: in, ID: fmt.Sprintf("e%d", m.s.data.seq), EnqueuedAt: now}
	c.lanes[in.Lane()] = append(c.lanes[in.Lane()], e)
	c.active = now
	if in.MessageID != "" {
		c.seen[in.MessageID] = memSeen{id: e.ID, at: now}
	}
	res := sessions.AppendResult{EntryID: e.ID}
	if claim && alone {
		return res, m.grant(in.Conv, worker, ttl), nil
	}
	res.Meta, res.Held = m.metaOf(c, now), held
	if !c.held {
		m.s.markReady(c)
	}
	return res, nil, nil
}

func (m memSessions) Claim(ctx context.Context, worker string, ttl time.Duration) (*sessions.Turn, error) {
	if err := m.s.lock("mem.Claim"); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	return m.claim(worker, ttl), nil
}

func (m memSessions) ClaimMany(ctx context.Context, worker string, n int, ttl time.Duration) ([]*sessions.Turn, error) {
	if err := m.s.lock("mem.ClaimMany"); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	var turns []*sessions.Turn
	for range n {
		turn := m.claim(worker, ttl)
		if turn == nil {
			break
		}
		turns = append(turns, turn)
	}
	return turns, nil
}

// claim is Claim under the lock.
func (m memSessions) claim(worker string, ttl time.Duration) *sessions.Turn {
	now := m.s.clk.Now()
	type candidate struct {
		key string
		at  time.Time
		seq int64
	}
	var cands []candidate
	for key, c := range m.s.data.convs {
		switch {
		case !c.hasWork():
		case !c.held && c.ready:
			cands = append(cands, candidate{key, c.readyAt, c.readySeq})
		case c.held && !now.Before(c.expires):
			cands = append(cands, candidate{key, c.expires, 0})
		}
	}
	if len(cands) == 0 {
		return nil
	}
	best := slices.MinFunc(cands, func(a, b candidate) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.seq, b.seq), cmp.Compare(a.key, b.key))
	})
	return m.grant(best.key, worker, ttl)
}

// grant leases conv to worker and hands out its next entry, under the
// lock.
func (m memSessions) grant(conv, worker string, ttl time.Duration) *sessions.Turn {
	c := m.s.data.convs[conv]
	c.token++
	now := m.s.clk.Now()
	c.held, c.ready, c.expires, c.worker = true, false, now.Add(ttl), worker
	e := c.take(now)
	c.since = now // a grant hands it out anew
	e.Deliveries++
	return &sessions.Turn{
		Lease:       sessions.Lease{Conv: conv, Worker: worker, Token: c.token, Expires: c.expires},
		Entry:       *e,
		History:     slices.Clone(c.history),
		HistoryRead: true,
		// It keeps no controllers' states (Controllers is nil): none
		// has any.
		Uncontrolled: true,
	}
}

// held checks l under the lock.
func (m memSessions) held(op string, l sessions.Lease) (*memConv, error) {
	c := m.s.data.convs[l.Conv]
	if c == nil || !c.held || c.token != l.Token {
		return nil, errs.E(op, errs.LeaseLost, "lease on %q lost", l.Conv)
	}
	return c, nil
}

func (m memSessions) Next(ctx context.Context, l sessions.Lease) (*sessions.Entry, error) {
	const op = "mem.Next"
	if err := m.s.lock(op); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	c, err := m.held(op, l)
	if err != nil {
		return nil, err
	}
	e := c.take(m.s.clk.Now())
	if e == nil {
		return nil, nil
	}
	if e.Deliveries == 0 {
		e.Deliveries = 1
	}
	out := *e
	return &out, nil
}

func (m memSessions) Renew(ctx context.Context, l sessions.Lease, ttl time.Duration) (sessions.Lease, error) {
	const op = "mem.Renew"
	if err := m.s.lock(op); err != nil {
		return l, err
	}
	defer m.s.data.mu.Unlock()
	c, err := m.held(op, l)
	if err != nil {
		return l, err
	}
	c.expires = m.s.clk.Now().Add(ttl)
	l.Expires = c.expires
	return l, nil
}

func (m memSessions) Release(ctx context.Context, l sessions.Lease) error {
	const op = "mem.Release"
	if err := m.s.lock(op); err != nil {
		return err
	}
	defer m.s.data.mu.Unlock()
	c, err := m.held(op, l)
	if err != nil {
		return err
	}
	m.release(c)
	return nil
}

func (m memSessions) release(c *memConv) {
	c.held = false
	if c.hasWork() {
		m.s.markReady(c)
	}
}

func (m memSessions) Finish(ctx context.Context, l sessions.Lease, f sessions.Finish) error {
	const op = "mem.Finish"
	if err := m.checkFinish(op, f); err != nil {
		return err
	}
	if err := m.s.lock(op); err != nil {
		return err
	}
	handed, err := m.finish(op, l, f)
	m.s.data.mu.Unlock()
	if err != nil {
		return err
	}
	f.Handoff.Give(handed) // after the lock is given back, so that Claimed may use the store
	return nil
}

func (m memSessions) FinishAndClaim(ctx context.Context, l sessions.Lease, f sessions.Finish, worker string, ttl time.Duration) (*sessions.Turn, error) {
	const op = "mem.FinishAndClaim"
	if err := m.checkFinish(op, f); err != nil {
		return nil, err
	}
	if err := m.s.lock(op); err != nil {
		return nil, err
	}
	handed, err := m.finish(op, l, f)
	var turn *sessions.Turn
	if c := m.s.data.convs[l.Conv]; err == nil && (!f.ClaimIfLeft || c != nil && c.hasWork()) {
		turn = m.claim(worker, ttl)
	}
	m.s.data.mu.Unlock()
	if err != nil {
		return nil, err
	}
	f.Handoff.Give(handed) // after the lock is given back, so that Claimed may use the store
	return turn, nil
}

// checkFinish refuses what a Finish may not write, before the lock.
func (m memSessions) checkFinish(op string, f sessions.Finish) error {
	if _, err := sessions.EncodeMessages(op, f.History, m.s.lim); err != nil {
		return err
	}
	for _, msg := range f.Outbox {
		if _, err := outbox.Encode(op, &msg, m.s.lim.MaxEntryBytes); err != nil {
			return err
		}
	}
	return sessions.ValidateMeta(op, f.Meta, m.s.lim)
}

// finish is Finish under the lock. With f.Handoff, it claims the outbox
// messages due now for the handoff's worker as it enqueues them, and
// returns their claims.
func (m memSessions) finish(op string, l sessions.Lease, f sessions.Finish) ([]outbox.Claimed, error) {
	c, err := m.held(op, l)
	if err != nil {
		return nil, err
	}
	if c.inflight == nil || c.inflight.ID != f.EntryID {
		return nil, errs.E(op, errs.NotFound, "no unacked entry %q", f.EntryID)
	}
	if slices.Contains(f.Absorbed, f.EntryID) {
		return nil, errs.E(op, errs.Invalid, "entry %q is both acked and absorbed", f.EntryID)
	}
	if err := sessions.CheckWrites(op, f.Writes); err != nil {
		return nil, err
	}
	var usage []sessions.Usage
	var noteWrites []sessions.Write
	var released []string
	var created []cronjobs.Job
	for _, w := range f.Writes {
		// The in-memory store applies no other domain's writes: only
		// the sessions', the notes', the files' and the cron jobs' own.
		switch w := w.(type) {
		case sessions.Usage:
			if err := w.Check(op); err != nil {
				return nil, err
			}
			usage = append(usage, w)
		case notes.Add:
			if err := w.Check(op, m.s.lim.MaxEntryBytes); err != nil {
				return nil, err
			}
			noteWrites = append(noteWrites, w)
		case notes.Remove:
			if err := w.Check(op); err != nil {
				return nil, err
			}
			noteWrites = append(noteWrites, w)
		case media.ReleaseFiles:
			if err := w.Check(op); err != nil {
				return nil, err
			}
			released = append(released, w.IDs...)
		case cronjobs.Create:
			if err := cronjobs.CheckJob(op, w.Job); err != nil {
				return nil, err
			}
			created = append(created, w.Job)
		default:
			return nil, sessions.UnknownWrite(op, w)
		}
	}
	// Find every absorbed entry before removing any: a missing one
	// leaves everything as it was.
	lanes := c.lanes // an array: a copy to work on
	taken := map[string]bool{}
	for _, id := range f.Absorbed {
		if taken[id] {
			continue
		}
		taken[id] = true
		found := false
		for i, l := range lanes {
			if j := slices.IndexFunc(l, func(e *sessions.Entry) bool { return e.ID == id }); j >= 0 {
				lanes[i], found = slices.Delete(slices.Clone(l), j, j+1), true
				break
			}
		}
		if !found {
			return nil, errs.E(op, errs.NotFound, "absorbed entry %q is not queued", id)
		}
	}
	if err := sessions.CheckDropHistory(op, f); err != nil {
		return nil, err
	}
	c.lanes = lanes
	c.inflight = nil
	c.active = m.s.clk.Now()
	c.history = append(slices.Clone(c.history[min(f.DropHistory, len(c.history)):]), f.History...)
	now := m.s.clk.Now()
	var handed []outbox.Claimed
	for _, msg := range f.Outbox {
		id, dup := memOutbox(m).add(msg)
		if f.Handoff.Active() && !dup && !msg.NextAttempt.After(now) && !memOutbox(m).waits(m.s.data.msgs[id], f.Handoff.Worker, now) {
			handed = append(handed, memOutbox(m).hold(m.s.data.msgs[id], f.Handoff.Worker, f.Handoff.TTL))
		}
	}
	for k, v := range f.Meta {
		m.setMeta(l.Conv, k, v)
	}
	for _, w := range noteWrites {
		m.applyNote(w)
	}
	for _, id := range released {
		delete(m.s.data.files, id)
	}
	for _, j := range created {
		j.Version = 1
		m.s.data.cron.jobs[j.ID] = j
	}
	for _, u := range usage {
		prompt, completion := sessions.UsageKeys(u.Model)
		meta := m.s.conv(u.Conv).meta
		for _, kv := range []struct {
			k string
			n int
		}{{prompt, u.Prompt}, {completion, u.Completion}} {
			had, _ := strconv.Atoi(meta[kv.k])
			m.setMeta(u.Conv, kv.k, strconv.Itoa(had+kv.n))
		}
	}
	if f.Release {
		m.release(c)
	}
	return handed, nil
}

func (m memSessions) AppendHistory(ctx context.Context, l sessions.Lease, msgs ...chat.Message) error {
	const op = "mem.AppendHistory"
	if _, err := sessions.EncodeMessages(op, msgs, m.s.lim); err != nil {
		return err
	}
	if err := m.s.lock(op); err != nil {
		return err
	}
	defer m.s.data.mu.Unlock()
	c, err := m.held(op, l)
	if err != nil {
		return err
	}
	c.history = append(c.history, msgs...)
	return nil
}

func (m memSessions) History(ctx context.Context, conv string) ([]chat.Message, error) {
	if err := m.s.lock("mem.History"); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	return slices.Clone(m.s.conv(conv).history), nil
}

func (m memSessions) ClearHistory(ctx context.Context, conv string) error {
	if err := m.s.lock("mem.ClearHistory"); err != nil {
		return err
	}
	defer m.s.data.mu.Unlock()
	m.s.conv(conv).history = nil
	return nil
}

func (m memSessions) Meta(ctx context.Context, conv string) (map[string]string, error) {
	if err := m.s.lock("mem.Meta"); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	return m.metaOf(m.s.conv(conv), m.s.clk.Now()), nil
}

// metaOf is c's metadata at now, with the running turn its live lease
// tells, under the lock.
func (m memSessions) metaOf(c *memConv, now time.Time) map[string]string {
	out := maps.Clone(c.meta)
	if out == nil {
		out = map[string]string{}
	}
	if c.held && now.Before(c.expires) && c.inflight != nil {
		if mark := sessions.TurnMark(c.inflight.ID, c.since, c.inflight.Inbound); mark != "" {
			out[sessions.ConvMetaTurn] = mark
		}
	}
	return out
}

func (m memSessions) SetMeta(ctx context.Context, conv, key, value string) error {
	if err := m.s.lock("mem.SetMeta"); err != nil {
		return err
	}
	defer m.s.data.mu.Unlock()
	if err := sessions.ValidateMeta("mem.SetMeta", map[string]string{key: value}, m.s.lim); err != nil {
		return err
	}
	m.setMeta(conv, key, value)
	return nil
}

// setMeta is SetMeta under the lock.
func (m memSessions) setMeta(conv, key, value string) {
	if value == "" {
		delete(m.s.conv(conv).meta, key)
	} else {
		m.s.conv(conv).meta[key] = value
	}
}

type memOutbox struct{ s *memStore }

// add enqueues m under the lock: due at its NextAttempt when it has one,
// else now.
func (o memOutbox) add(m outbox.Message) (string, bool) {
	now := o.s.clk.Now()
	if m.IdempotencyKey != "" {
		if seen, ok := o.s.data.idemKey[m.IdempotencyKey]; ok && now.Sub(seen.at) < o.s.lim.DedupeWindow {
			return seen.id, true
		}
	}
	o.s.data.seq++
	m.ID = fmt.Sprintf("o%d", o.s.data.seq)
	m.CreatedAt, m.Attempts, m.LastError = now, 0, ""
	if m.NextAttempt.IsZero() {
		m.NextAttempt = now
	}
	o.s.data.msgs[m.ID] = &memMsg{Message: m, seq: o.s.data.seq}
	if m.IdempotencyKey != "" {
		o.s.data.idemKey[m.IdempotencyKey] = memSeen{id: m.ID, at: now}
	}
	return m.ID, false
}

func (o memOutbox) Enqueue(ctx context.Context, m outbox.Message) (string, bool, error) {
	const op = "mem.Enqueue"
	if _, err := outbox.Encode(op, &m, o.s.lim.MaxEntryBytes); err != nil {
		return "", false, err
	}
	if err := o.s.lock(op); err != nil {
		return "", false, err
	}
	defer o.s.data.mu.Unlock()
	id, dup := o.add(m)
	return id, dup, nil
}

func (o memOutbox) list(dead bool, limit int) []outbox.Message {
	var ms []*memMsg
	for _, m := range o.s.data.msgs {
		if m.dead == dead {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b *memMsg) int { return cmp.Compare(a.seq, b.seq) })
	var out []outbox.Message
	for _, m := range ms[:min(limit, len(ms))] {
		out = append(out, m.Message)
	}
	return out
}

func (o memOutbox) Claim(ctx context.Context, worker string, platforms []string, max int, ttl time.Duration) ([]outbox.Claimed, error) {
	if err := o.s.lock("mem.Claim"); err != nil {
		return nil, err
	}
	defer o.s.data.mu.Unlock()
	now := o.s.clk.Now()
	if until, ok := o.s.data.workers[worker]; ok && until.Before(now.Add(o.s.data.beats[worker])) {
		o.s.data.workers[worker] = now.Add(o.s.data.beats[worker])
	}
	for w, until := range o.s.data.workers {
		if !until.After(now) && w != worker {
			delete(o.s.data.workers, w)
			delete(o.s.data.beats, w)
			for _, m := range o.s.data.msgs {
				if m.claimed && m.worker == w && m.expires.After(now) {
					m.expires = now
				}
			}
		}
	}
	var due []*memMsg
	for _, m := range o.s.data.msgs {
		if !m.dead && !m.NextAttempt.After(now) && (!m.claimed || !m.expires.After(now)) && slices.Contains(platforms, m.Target.Platform) {
			due = append(due, m)
		}
	}
	slices.SortFunc(due, func(a, b *memMsg) int {
		return cmp.Or(a.NextAttempt.Compare(b.NextAttempt), cmp.Compare(a.seq, b.seq))
	})
	// A message behind one claimed in this pass may go in the next.
	var out []outbox.Claimed
	for progress := true; progress && len(out) < max; {
		progress = false
		left := due[:0]
		for _, m := range due {
			if len(out) == max || o.waits(m, worker, now) {
				left = append(left, m)
				continue
			}
			resend := m.claimed
			c := o.hold(m, worker, ttl)
			c.Resend = resend
			out = append(out, c)
			progress = true
		}
		due = left
	}
	return out, nil
}

// waits reports whether an earlier message to m's target is neither dead
// nor held by worker under a live claim, under the lock.
func (o memOutbox) waits(m *memMsg, worker string, now time.Time) bool {
	for _, e := range o.s.data.msgs {
		if e.seq < m.seq && !e.dead && e.Target == m.Target && !(e.claimed && e.worker == worker && e.expires.After(now)) {
			return true
		}
	}
	return false
}

func (o memOutbox) Beat(ctx context.Context, worker string, ttl time.Duration) error {
	if worker == "" {
		return errs.E("mem.Beat", errs.Invalid, "a heartbeat needs a worker name")
	}
	if err := o.s.lock("mem.Beat"); err != nil {
		return err
	}
	defer o.s.data.mu.Unlock()
	if ttl <= 0 {
		delete(o.s.data.workers, worker)
		delete(o.s.data.beats, worker)
	} else {
		o.s.data.workers[worker] = o.s.clk.Now().Add(ttl)
		o.s.data.beats[worker] = ttl
	}
	return nil
}

func (o memOutbox) KeepParts(ctx context.Context, c outbox.Claimed, p outbox.Parts) error {
	if _, err := outbox.EncodeParts("mem.KeepParts", p); err != nil {
		return err
	}
	if err := o.s.lock("mem.KeepParts"); err != nil {
		return err
	}
	defer o.s.data.mu.Unlock()
	m, err := o.claimed("mem.KeepParts", c)
	if err != nil {
		return err
	}
	m.Parts = p
	return nil
}

// hold claims m for worker for ttl (outbox.DefaultClaimTTL when zero or
// less) from now under a fresh token, under the lock.
func (o memOutbox) hold(m *memMsg, worker string, ttl time.Duration) outbox.Claimed {
	if ttl <= 0 {
		ttl = outbox.DefaultClaimTTL
	}
	o.s.data.seq++
	m.claimed, m.token, m.expires, m.worker = true, o.s.data.seq, o.s.clk.Now().Add(ttl), worker
	return outbox.Claimed{Message: m.Message, Token: m.token, Expires: m.expires}
}

// claimed finds the message c holds, under the lock.
func (o memOutbox) claimed(op string, c outbox.Claimed) (*memMsg, error) {
	m := o.s.data.msgs[c.ID]
	if m == nil || m.dead {
		return nil, errs.E(op, errs.NotFound, "no pending message %q", c.ID)
	}
	if !m.claimed || m.token != c.Token {
		return nil, errs.E(op, errs.LeaseLost, "claim on %q lost", c.ID)
	}
	return m, nil
}

func (o memOutbox) settle(op string, c outbox.Claimed, change func(m *memMsg)) error {
	if err := o.s.lock(op); err != nil {
		return err
	}
	defer o.s.data.mu.Unlock()
	m, err := o.claimed(op, c)
	if err != nil {
		return err
	}
	m.claimed = false
	change(m)
	return nil
}

func (o memOutbox) Ack(ctx context.Context, c outbox.Claimed) error {
	return o.settle("mem.Ack", c, func(m *memMsg) { delete(o.s.data.msgs, m.ID) })
}

func (o memOutbox) AckAll(ctx context.Context, cs []outbox.Claimed) ([]error, error) {
	const op = "mem.AckAll"
	if err := o.s.lock(op); err != nil {
		return nil, err
	}
	defer o.s.data.mu.Unlock()
	acked := make([]error, len(cs))
	for i, c := range cs {
		m, err := o.claimed(op, c)
		if err == nil {
			delete(o.s.data.msgs, m.ID)
		}
		acked[i] = err
	}
	return acked, nil
}

func (o memOutbox) Release(ctx context.Context, c outbox.Claimed, next time.Time, reason string) error {
	return o.settle("mem.Release", c, func(m *memMsg) {
		m.Attempts++
		m.LastError, m.NextAttempt = reason, next
	})
}

func (o memOutbox) Postpone(ctx context.Context, c outbox.Claimed, next time.Time) error {
	return o.settle("mem.Postpone", c, func(m *memMsg) { m.NextAttempt = next })
}

func (o memOutbox) Dead(ctx context.Context, c outbox.Claimed, reason string) error {
	return o.settle("mem.Dead", c, func(m *memMsg) { m.dead, m.LastError = true, reason })
}

func (o memOutbox) Pending(ctx context.Context, limit int) ([]outbox.Message, error) {
	if err := o.s.lock("mem.Pending"); err != nil {
		return nil, err
	}
	defer o.s.data.mu.Unlock()
	return o.list(false, limit), nil
}

func (o memOutbox) Unsent(ctx context.Context, target outbox.Target) (bool, error) {
	const op = "mem.Unsent"
	if err := target.Validate(); err != nil {
		return false, errs.Wrap(op, errs.Invalid, err)
	}
	if err := o.s.lock(op); err != nil {
		return false, err
	}
	defer o.s.data.mu.Unlock()
	for _, m := range o.s.data.msgs {
		if !m.dead && m.Target == target {
			return true, nil
		}
	}
	return false, nil
}

func (o memOutbox) DeadLetters(ctx context.Context, limit int) ([]outbox.Message, error) {
	if err := o.s.lock("mem.DeadLetters"); err != nil {
		return nil, err
	}
	defer o.s.data.mu.Unlock()
	return o.list(true, limit), nil
}

func (o memOutbox) Requeue(ctx context.Context, id string) error {
	const op = "mem.Requeue"
	if err := o.s.lock(op); err != nil {
		return err
	}
	defer o.s.data.mu.Unlock()
	m := o.s.data.msgs[id]
	if m == nil || !m.dead {
		return errs.E(op, errs.NotFound, "no dead message %q", id)
	}
	m.dead, m.Attempts, m.NextAttempt = false, 0, o.s.clk.Now()
	return nil
}

func (m memSessions) QueueDepth(ctx context.Context, limit int) (int, error) {
	const op = "mem.QueueDepth"
	if err := sessions.CheckQueueLimit(op, limit); err != nil {
		return 0, err
	}
	if err := m.s.lock(op); err != nil {
		return 0, err
	}
	defer m.s.data.mu.Unlock()
	n := 0
	for _, c := range m.s.data.convs {
		if c.inflight != nil {
			n++
		}
		for _, l := range c.lanes {
			n += len(l)
		}
	}
	return min(n, limit), nil
}

// memTimeline is the store's timelines.
type memTimeline struct{ s *memStore }

func (m memTimeline) AppendTimeline(ctx context.Context, item sessions.TimelineItem) (string, error) {
	const op = "mem.AppendTimeline"
	if err := item.Check(op, m.s.lim); err != nil {
		return "", err
	}
	if err := m.s.lock(op); err != nil {
		return "", err
	}
	defer m.s.data.mu.Unlock()
	tl := m.s.data.timeline[item.Conv]
	if i := slices.IndexFunc(tl, func(x sessions.TimelineItem) bool { return x.ID == item.ID }); i >= 0 {
		return tl[i].Cursor, nil
	}
	item.Cursor, item.At = m.s.data.nextCursor(), m.s.clk.Now()
	item.Meta, item.Files = maps.Clone(item.Meta), slices.Clone(item.Files)
	tl = append(tl, item)
	if keep := m.s.lim.TimelineMax; keep > 0 && len(tl) > keep {
		tl = slices.Clone(tl[len(tl)-keep:])
	}
	m.s.data.timeline[item.Conv] = tl
	return item.Cursor, nil
}

func (m memTimeline) ReadTimeline(ctx context.Context, conv, after string, limit int) ([]sessions.TimelineItem, error) {
	const op = "mem.ReadTimeline"
	if err := chat.ValidateConv(op, conv); err != nil {
		return nil, err
	}
	var from int64
	if after != "" {
		var ok bool
		if from, ok = memCursor(after); !ok {
			return nil, errs.E(op, errs.Invalid, "bad cursor %q", after)
		}
	}
	if err := m.s.lock(op); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	var out []sessions.TimelineItem
	for _, it := range m.s.data.timeline[conv] {
		if n, _ := memCursor(it.Cursor); n > from && (limit <= 0 || len(out) < limit) {
			out = append(out, it)
		}
	}
	return out, nil
}

func (m memTimeline) TimelineEnd(ctx context.Context, conv string) (string, error) {
	const op = "mem.TimelineEnd"
	if err := chat.ValidateConv(op, conv); err != nil {
		return "", err
	}
	if err := m.s.lock(op); err != nil {
		return "", err
	}
	defer m.s.data.mu.Unlock()
	if tl := m.s.data.timeline[conv]; len(tl) > 0 {
		return tl[len(tl)-1].Cursor, nil
	}
	return "", nil
}

// memSignals is the store's signal log.
type memSignals struct{ s *memStore }

func (m memSignals) Signal(ctx context.Context, sig signals.Signal) error {
	const op = "mem.Signal"
	if err := sig.Check(op, m.s.lim.MaxEntryBytes); err != nil {
		return err
	}
	if err := m.s.lock(op); err != nil {
		return err
	}
	defer m.s.data.mu.Unlock()
	sig.Cursor, sig.At = m.s.data.nextCursor(), m.s.clk.Now()
	m.s.data.signals = append(m.s.data.signals, sig)
	return nil
}

func (m memSignals) SignalsAfter(ctx context.Context, after string, limit int) ([]signals.Signal, string, error) {
	const op = "mem.SignalsAfter"
	if err := m.s.lock(op); err != nil {
		return nil, "", err
	}
	defer m.s.data.mu.Unlock()
	if after == "" {
		return nil, strconv.FormatInt(m.s.data.seq, 10), nil
	}
	from, ok := memCursor(after)
	if !ok {
		return nil, "", errs.E(op, errs.Invalid, "bad cursor %q", after)
	}
	var out []signals.Signal
	next := after
	for _, sig := range m.s.data.signals {
		if n, _ := memCursor(sig.Cursor); n > from && (limit <= 0 || len(out) < limit) {
			out = append(out, sig)
			next = sig.Cursor
		}
	}
	return out, next, nil
}

func memUser(op, user string) error {
	if strings.TrimSpace(user) == "" || strings.ContainsFunc(user, func(r rune) bool { return r < 0x20 }) {
		return errs.E(op, errs.Invalid, "bad user %q", user)
	}
	return nil
}

// memNotes is the store's notes.
type memNotes struct{ s *memStore }

func (m memNotes) AddNote(ctx context.Context, user, text string) (notes.Note, error) {
	const op = "mem.AddNote"
	if err := memUser(op, user); err != nil {
		return notes.Note{}, err
	}
	if strings.TrimSpace(text) == "" {
		return notes.Note{}, errs.E(op, errs.Invalid, "empty note")
	}
	if len(text) > m.s.lim.MaxEntryBytes {
		return notes.Note{}, errs.E(op, errs.TooLarge, "note over the limit")
	}
	if err := m.s.lock(op); err != nil {
		return notes.Note{}, err
	}
	defer m.s.data.mu.Unlock()
	n := notes.Note{ID: m.s.data.nextCursor(), Text: text, At: m.s.clk.Now()}
	m.s.data.notes[user] = append(m.s.data.notes[user], n)
	return n, nil
}

// applyNote applies a turn's NoteAdd or NoteRemove; the caller holds the
// lock.
func (m memSessions) applyNote(w sessions.Write) {
	switch w := w.(type) {
	case notes.Add:
		ns := m.s.data.notes[w.User]
		if !slices.ContainsFunc(ns, func(n notes.Note) bool { return n.ID == w.ID }) {
			m.s.data.notes[w.User] = append(ns, notes.Note{ID: w.ID, Text: w.Text, At: m.s.clk.Now()})
		}
	case notes.Remove:
		m.s.data.notes[w.User] = slices.DeleteFunc(m.s.data.notes[w.User], func(n notes.Note) bool { return n.ID == w.ID })
	}
}

func (m memNotes) Notes(ctx context.Context, user string) ([]notes.Note, error) {
	const op = "mem.Notes"
	if err := memUser(op, user); err != nil {
		return nil, err
	}
	if err := m.s.lock(op); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	return slices.Clone(m.s.data.notes[user]), nil
}

func (m memNotes) DeleteNote(ctx context.Context, user, id string) error {
	const op = "mem.DeleteNote"
	if err := memUser(op, user); err != nil {
		return err
	}
	if err := m.s.lock(op); err != nil {
		return err
	}
	defer m.s.data.mu.Unlock()
	ns := m.s.data.notes[user]
	i := slices.IndexFunc(ns, func(n notes.Note) bool { return n.ID == id })
	if i < 0 {
		return errs.E(op, errs.NotFound, "no note %q", id)
	}
	m.s.data.notes[user] = slices.Delete(ns, i, i+1)
	return nil
}

type memCursors struct{ s *memStore }

func (c memCursors) PutCursor(_ context.Context, platform, channel, value string) error {
	const op = "mem.PutCursor"
	if err := adapters.CheckCursor(op, platform, channel, value); err != nil {
		return err
	}
	if err := c.s.lock(op); err != nil {
		return err
	}
	defer c.s.data.mu.Unlock()
	byChannel := c.s.data.cursors[platform]
	if byChannel == nil {
		byChannel = map[string]memReceiveCursor{}
		c.s.data.cursors[platform] = byChannel
	}
	byChannel[channel] = memReceiveCursor{value: value, at: c.s.clk.Now()}
	return nil
}

func (c memCursors) Cursors(_ context.Context, platform string, within time.Duration) (map[string]string, error) {
	const op = "mem.Cursors"
	if err := adapters.CheckCursors(op, platform, within); err != nil {
		return nil, err
	}
	if err := c.s.lock(op); err != nil {
		return nil, err
	}
	defer c.s.data.mu.Unlock()
	since := c.s.clk.Now().Add(-within)
	out := map[string]string{}
	for channel, cur := range c.s.data.cursors[platform] {
		if cur.at.After(since) {
			out[channel] = cur.value
		}
	}
	return out, nil
}

type memFiles struct{ s *memStore }

func (f memFiles) PutFile(_ context.Context, id string, data []byte) error {
	const op = "mem.PutFile"
	if err := media.CheckFile(op, id, data); err != nil {
		return err
	}
	if err := f.s.lock(op); err != nil {
		return err
	}
	defer f.s.data.mu.Unlock()
	f.s.data.files[id] = bytes.Clone(data)
	return nil
}

func (f memFiles) File(_ context.Context, id string) ([]byte, error) {
	const op = "mem.File"
	if err := media.CheckFileID(op, id); err != nil {
		return nil, err
	}
	if err := f.s.lock(op); err != nil {
		return nil, err
	}
	defer f.s.data.mu.Unlock()
	data, ok := f.s.data.files[id]
	if !ok {
		return nil, errs.E(op, errs.NotFound, "no file %q", id)
	}
	return bytes.Clone(data), nil
}

func (f memFiles) DeleteFile(_ context.Context, id string) error {
	const op = "mem.DeleteFile"
	if err := media.CheckFileID(op, id); err != nil {
		return err
	}
	if err := f.s.lock(op); err != nil {
		return err
	}
	defer f.s.data.mu.Unlock()
	delete(f.s.data.files, id)
	return nil
}

type memApprovals struct{ s *memStore }

// find is the approval of id, or nil. The caller holds the lock.
func (m memApprovals) find(id string) *approvals.Approval {
	for _, a := range m.s.data.appr {
		if a.ID == id {
			return a
		}
	}
	return nil
}

func (m memApprovals) CreateApproval(_ context.Context, a approvals.Approval) error {
	const op = "mem.CreateApproval"
	if err := approvals.CheckApproval(op, a); err != nil {
		return err
	}
	if err := m.s.lock(op); err != nil {
		return err
	}
	defer m.s.data.mu.Unlock()
	if m.find(a.ID) != nil {
		return errs.E(op, errs.Conflict, "approval %q exists", a.ID)
	}
	for _, e := range m.s.data.appr {
		if e.Conv == a.Conv && e.Key == a.Key && e.Pending() {
			e.Decision, e.DecidedAt = approvals.Expired, a.CreatedAt
		}
	}
	m.s.data.appr = append(m.s.data.appr, &a)
	return nil
}

func (m memApprovals) Approval(_ context.Context, id string) (approvals.Approval, error) {
	const op = "mem.Approval"
	if err := m.s.lock(op); err != nil {
		return approvals.Approval{}, err
	}
	defer m.s.data.mu.Unlock()
	a := m.find(id)
	if a == nil {
		return approvals.Approval{}, errs.E(op, errs.NotFound, "no approval %q", id)
	}
	return *a, nil
}

func (m memApprovals) Decide(_ context.Context, id string, d approvals.Decision, by string, at time.Time, message string) (approvals.Approval, error) {
	const op = "mem.Decide"
	if err := approvals.CheckDecide(op, id, d); err != nil {
		return approvals.Approval{}, err
	}
	if err := m.s.lock(op); err != nil {
		return approvals.Approval{}, err
	}
	defer m.s.data.mu.Unlock()
	a := m.find(id)
	switch {
	case a == nil:
		return approvals.Approval{}, errs.E(op, errs.NotFound, "no approval %q", id)
	case !a.Pending():
		return *a, errs.E(op, errs.Conflict, "approval %q was decided already", id)
	}
	a.Decision, a.DecidedBy, a.DecidedAt = d, by, at
	if message != "" {
		a.MessageID = message
	}
	return *a, nil
}

func (m memApprovals) SetMessage(_ context.Context, id, message string) error {
	const op = "mem.SetMessage"
	if err := approvals.CheckMessage(op, id, message); err != nil {
		return err
	}
	if err := m.s.lock(op); err != nil {
		return err
	}
	defer m.s.data.mu.Unlock()
	a := m.find(id)
	if a == nil {
		return errs.E(op, errs.NotFound, "no approval %q", id)
	}
	a.MessageID = message
	return nil
}

func (m memApprovals) PendingApprovals(_ context.Context, conv string) ([]approvals.Approval, error) {
	const op = "mem.PendingApprovals"
	if err := m.s.lock(op); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	var out []approvals.Approval
	for _, a := range m.s.data.appr {
		if a.Pending() && (conv == "" || a.Conv == conv) {
			out = append(out, *a)
		}
	}
	return out, nil
}

func (m memApprovals) Decided(_ context.Context, conv string, n int) ([]approvals.Approval, error) {
	const op = "mem.Decided"
	if err := m.s.lock(op); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	var out []approvals.Approval
	for _, a := range slices.Backward(m.s.data.appr) {
		if !a.Pending() && (conv == "" || a.Conv == conv) {
			out = append(out, *a)
		}
	}
	// Newest decision first; of two at once, the later created.
	slices.SortStableFunc(out, func(a, b approvals.Approval) int { return b.DecidedAt.Compare(a.DecidedAt) })
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out, nil
}

func (m memApprovals) AddGrant(_ context.Context, g approvals.Grant) error {
	const op = "mem.AddGrant"
	if err := approvals.CheckGrant(op, g); err != nil {
		return err
	}
	if err := m.s.lock(op); err != nil {
		return err
	}
	defer m.s.data.mu.Unlock()
	m.s.data.grants[memGrantKey{g.Conv, g.Session, g.Pattern}] = g
	return nil
}

func (m memApprovals) Grants(_ context.Context, conv, session string) ([]approvals.Grant, error) {
	const op = "mem.Grants"
	if err := approvals.CheckScope(op, conv, session); err != nil {
		return nil, err
	}
	if err := m.s.lock(op); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	var out []approvals.Grant
	for k, g := range m.s.data.grants {
		if (k.conv == conv && k.session == session) || k.conv == "" {
			out = append(out, g)
		}
	}
	// The session's first, then the always grants, each by pattern.
	slices.SortFunc(out, func(a, b approvals.Grant) int {
		return cmp.Or(strings.Compare(b.Conv, a.Conv), strings.Compare(a.Pattern, b.Pattern))
	})
	return out, nil
}

func (m memApprovals) Revoke(_ context.Context, pattern string) (bool, error) {
	const op = "mem.Revoke"
	if err := approvals.CheckPattern(op, pattern); err != nil {
		return false, err
	}
	if err := m.s.lock(op); err != nil {
		return false, err
	}
	defer m.s.data.mu.Unlock()
	k := memGrantKey{pattern: pattern}
	_, ok := m.s.data.grants[k]
	delete(m.s.data.grants, k)
	return ok, nil
}

// memInstance is an instance's record and when it runs out.
type memInstance struct {
	in      instances.Instance
	expires time.Time
}

type memInstances struct{ s *memStore }

func (m memInstances) Beat(_ context.Context, in instances.Instance, ttl time.Duration) error {
	const op = "mem.Beat"
	if err := instances.CheckBeat(op, in, ttl); err != nil {
		return err
	}
	if err := m.s.lock(op); err != nil {
		return err
	}
	defer m.s.data.mu.Unlock()
	now := m.s.clk.Now()
	in.LastSeen = now
	m.s.data.insts[in.ID] = memInstance{in: in, expires: now.Add(ttl)}
	return nil
}

func (m memInstances) Leave(_ context.Context, id string) error {
	const op = "mem.Leave"
	if err := instances.CheckID(op, id); err != nil {
		return err
	}
	if err := m.s.lock(op); err != nil {
		return err
	}
	defer m.s.data.mu.Unlock()
	delete(m.s.data.insts, id)
	return nil
}

func (m memInstances) Instances(context.Context) ([]instances.Instance, error) {
	if err := m.s.lock("mem.Instances"); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	now := m.s.clk.Now()
	var out []instances.Instance
	for _, r := range m.s.data.insts {
		if now.Before(r.expires) {
			out = append(out, r.in)
		}
	}
	slices.SortFunc(out, func(a, b instances.Instance) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

type memConversations struct{ s *memStore }

func (m memConversations) summary(conv string, c *memConv, now time.Time) sessions.ConvSummary {
	sum := sessions.ConvSummary{Conv: conv, LastActive: c.active, Meta: maps.Clone(c.meta)}
	for _, l := range c.lanes {
		sum.Queued += len(l)
	}
	if c.inflight != nil {
		sum.Queued++
	}
	if c.held && now.Before(c.expires) {
		sum.Worker, sum.Expires = c.worker, c.expires
	}
	sum.Cursor = strconv.FormatInt(c.active.UnixNano(), 10) + ":" + conv
	return sum
}

func (m memConversations) Conversations(ctx context.Context, q sessions.ConvQuery) ([]sessions.ConvSummary, error) {
	const op = "mem.Conversations"
	if err := q.Check(op); err != nil {
		return nil, err
	}
	var before sessions.ConvSummary
	if q.Before != "" {
		n, conv, ok := strings.Cut(q.Before, ":")
		at, err := strconv.ParseInt(n, 10, 64)
		if !ok || err != nil || conv == "" {
			return nil, errs.E(op, errs.Invalid, "%q is not a conversations cursor", q.Before)
		}
		before = sessions.ConvSummary{Conv: conv, LastActive: time.Unix(0, at)}
	}
	if err := m.s.lock(op); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	now := m.s.clk.Now()
	out := []sessions.ConvSummary{}
	for conv, c := range m.s.data.convs {
		if c.active.IsZero() {
			continue
		}
		sum := m.summary(conv, c, now)
		if q.Before == "" || memNewer(before, sum) {
			out = append(out, sum)
		}
	}
	slices.SortFunc(out, func(a, b sessions.ConvSummary) int {
		if memNewer(a, b) {
			return -1
		}
		return 1
	})
	return out[:min(q.Limit, len(out))], nil
}

// memNewer reports whether a comes before b in the list: active later,
// or at the same time with the greater key.
func memNewer(a, b sessions.ConvSummary) bool {
	if !a.LastActive.Equal(b.LastActive) {
		return a.LastActive.After(b.LastActive)
	}
	return a.Conv > b.Conv
}

func (m memConversations) Conversation(ctx context.Context, conv string) (sessions.ConvSummary, error) {
	const op = "mem.Conversation"
	if err := chat.ValidateConv(op, conv); err != nil {
		return sessions.ConvSummary{}, err
	}
	if err := m.s.lock(op); err != nil {
		return sessions.ConvSummary{}, err
	}
	defer m.s.data.mu.Unlock()
	c := m.s.data.convs[conv]
	if c == nil || c.active.IsZero() {
		return sessions.ConvSummary{}, errs.E(op, errs.NotFound, "no conversation %q", conv)
	}
	return m.summary(conv, c, m.s.clk.Now()), nil
}

func (m memConversations) RecentHistory(ctx context.Context, conv string, n int) ([]chat.Message, int, error) {
	const op = "mem.RecentHistory"
	if err := sessions.CheckRecent(op, conv, n); err != nil {
		return nil, 0, err
	}
	if err := m.s.lock(op); err != nil {
		return nil, 0, err
	}
	defer m.s.data.mu.Unlock()
	var h []chat.Message
	if c := m.s.data.convs[conv]; c != nil {
		h = c.history
	}
	return slices.Clone(h[max(0, len(h)-n):]), len(h), nil
}
