package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/tools"
)

// turnTimes is told when the pipeline's steps happen, by the wrappers
// below, and keeps what the phase under way measures: in the dispatch
// phase, each turn's time from the agent being called to its commit; in
// the fan-out, the fanPhase's times.
type turnTimes struct {
	started sync.Map // conv → time.Time: its agent turn last began
	tool    sync.Map // conv → time.Duration: its last tool call's handler
	waiting sync.Map // conv → chan turnTime: its next commit's times
	fan     atomic.Pointer[fanPhase]
}

// turnTime is one turn's time, from the agent being called to its
// commit returning, with two parts of it: its tool call's handler and
// its commit.
type turnTime struct {
	total, tool, commit time.Duration
}

// expectCommit returns the channel that gets the times of conv's next
// turn.
func (t *turnTimes) expectCommit(conv string) <-chan turnTime {
	ch := make(chan turnTime, 1)
	t.waiting.Store(conv, ch)
	return ch
}

func (t *turnTimes) toolCalled(conv string, took time.Duration) {
	t.tool.Store(conv, took)
}

func (t *turnTimes) turnStarted(in sessions.TurnInput, at time.Time) {
	conv := in.Conv
	if conv == "" {
		conv = in.Entry.Conv
	}
	t.started.Store(conv, at)
	if f := t.fan.Load(); f != nil && strings.HasPrefix(in.Entry.MessageID, "cmp_") {
		f.turnStarted(conv, in.Entry.MessageID, at)
	}
}

func (t *turnTimes) turnEnded(in sessions.TurnInput) {
	if f := t.fan.Load(); f != nil && strings.HasPrefix(in.Entry.MessageID, "cmp_") {
		f.turnEnded(in.Entry.MessageID)
	}
}

// committed is told of conv's commit, called at from and returned at.
func (t *turnTimes) committed(conv string, ws []sessions.Write, from, at time.Time) {
	if ch, ok := t.waiting.LoadAndDelete(conv); ok {
		start, _ := t.started.Load(conv)
		s, _ := start.(time.Time)
		tool, _ := t.tool.LoadAndDelete(conv)
		d, _ := tool.(time.Duration)
		ch.(chan turnTime) <- turnTime{total: at.Sub(s), tool: d, commit: at.Sub(from)}
	}
	if f := t.fan.Load(); f != nil && strings.HasPrefix(conv, f.prefix) {
		for _, w := range ws {
			if _, ok := w.(delegation.Dispatch); ok {
				f.dispatched(at)
				break
			}
		}
	}
}

func (t *turnTimes) childCall(at time.Time) {
	if f := t.fan.Load(); f != nil {
		f.childCall(at)
	}
}

func (t *turnTimes) ended(c *delegation.Completion, at time.Time) {
	if f := t.fan.Load(); f != nil {
		f.ended(c, at)
	}
}

func (t *turnTimes) delivered(in sessions.Inbound, at time.Time) {
	if f := t.fan.Load(); f != nil && strings.HasPrefix(in.Conv, f.prefix) {
		f.delivered(at)
	}
}

// fanPhase is one fan-out's record: the parents are the conversations
// whose keys start with prefix, n of them, one completion each.
type fanPhase struct {
	prefix string
	n      int
	done   chan struct{} // closed when every completion's parent turn has ended

	mu                           sync.Mutex
	firstDispatch, lastDispatch  time.Time
	lastChildCall, lastEnd       time.Time
	lastDelivered, lastStarted   time.Time
	dispatches, childCalls, ends int
	delivers                     int
	recorded                     map[string]time.Time // completion id → when its end was recorded
	started                      map[string]time.Time // completion id → when its parent turn began
	finished                     map[string]bool      // completion id → its parent turn ended
}

func newFanPhase(prefix string, n int) *fanPhase {
	return &fanPhase{
		prefix: prefix, n: n, done: make(chan struct{}),
		recorded: map[string]time.Time{}, started: map[string]time.Time{}, finished: map[string]bool{},
	}
}

func (f *fanPhase) dispatched(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dispatches == 0 || at.Before(f.firstDispatch) {
		f.firstDispatch = at
	}
	f.lastDispatch = later(f.lastDispatch, at)
	f.dispatches++
}

func (f *fanPhase) childCall(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastChildCall = later(f.lastChildCall, at)
	f.childCalls++
}

func (f *fanPhase) ended(c *delegation.Completion, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastEnd = later(f.lastEnd, at)
	f.ends++
	if c != nil && strings.HasPrefix(c.Conv, f.prefix) {
		f.recorded[c.ID] = at
	}
}

func (f *fanPhase) delivered(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastDelivered = later(f.lastDelivered, at)
	f.delivers++
}

// turnStarted notes the first start of a completion's turn; a retried
// turn starts again, and counts once.
func (f *fanPhase) turnStarted(conv, id string, at time.Time) {
	if !strings.HasPrefix(conv, f.prefix) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.started[id]; !ok {
		f.started[id] = at
		f.lastStarted = later(f.lastStarted, at)
	}
}

func (f *fanPhase) turnEnded(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.started[id]; !ok || f.finished[id] {
		return
	}
	f.finished[id] = true
	if len(f.finished) == f.n {
		close(f.done)
	}
}

// progress says how far the phase got, for an error.
func (f *fanPhase) progress() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("of %d parents %d dispatched; children made %d model calls and %d ends; %d completions were delivered, %d of their turns started and %d ended",
		f.n, f.dispatches, f.childCalls, f.ends, f.delivers, len(f.started), len(f.finished))
}

func (f *fanPhase) result() fanResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := fanResult{
		firstDispatch: f.firstDispatch, lastDispatch: f.lastDispatch,
		lastChildCall: f.lastChildCall, lastEnd: f.lastEnd,
		lastDelivered: f.lastDelivered, lastTurnStarted: f.lastStarted,
	}
	for id, at := range f.started {
		if rec, ok := f.recorded[id]; ok {
			r.completionLatencies = append(r.completionLatencies, at.Sub(rec))
		}
	}
	return r
}

// startedTurns is the agent as the turn worker runs it, noting when each
// turn begins and ends.
type startedTurns struct {
	sessions.TurnRunner
	rec *turnTimes
}

func (r startedTurns) Run(ctx context.Context, in sessions.TurnInput) (sessions.TurnOutput, error) {
	r.rec.turnStarted(in, time.Now())
	out, err := r.TurnRunner.Run(ctx, in)
	r.rec.turnEnded(in)
	return out, err
}

// timedTurns notes when each turn's commit returned, and whether it
// carried a dispatch. It wraps the gateway's own wrappers, so the time
// includes what they do (the hand-off to the delivery worker, the
// runner's wake).
type timedTurns struct {
	sessions.Store
	rec *turnTimes
}

func (s timedTurns) Finish(ctx context.Context, l sessions.Lease, f sessions.Finish) error {
	from := time.Now()
	err := s.Store.Finish(ctx, l, f)
	if err == nil {
		s.rec.committed(l.Conv, f.Writes, from, time.Now())
	}
	return err
}

func (s timedTurns) FinishAndClaim(ctx context.Context, l sessions.Lease, f sessions.Finish, worker string, ttl time.Duration) (*sessions.Turn, error) {
	from := time.Now()
	turn, err := s.Store.FinishAndClaim(ctx, l, f, worker, ttl)
	if err == nil {
		s.rec.committed(l.Conv, f.Writes, from, time.Now())
	}
	return turn, err
}

// timedEnds is the runner's store, noting when each child's end was
// recorded and the completion it made.
type timedEnds struct {
	delegation.Store
	rec *turnTimes
}

func (s timedEnds) End(ctx context.Context, c delegation.Claim, r delegation.Result) (*delegation.Completion, error) {
	comp, err := s.Store.End(ctx, c, r)
	if err == nil {
		s.rec.ended(comp, time.Now())
	}
	return comp, err
}

// timedInbox is the deliverer's inbox (the router), noting when each
// completion was in its parent's queue.
type timedInbox struct {
	delegation.Inbox
	rec *turnTimes
}

func (i timedInbox) Deliver(ctx context.Context, in sessions.Inbound) error {
	err := i.Inbox.Deliver(ctx, in)
	if err == nil {
		i.rec.delivered(in, time.Now())
	}
	return err
}

// timedTool is a tool whose handler's time is noted for its turn.
func timedTool(t tools.Tool, rec *turnTimes) tools.Tool {
	h := t.Handler
	t.Handler = func(ctx context.Context, turn *tools.Turn, args json.RawMessage) (tools.Result, error) {
		start := time.Now()
		res, err := h(ctx, turn, args)
		rec.toolCalled(turn.Conv, time.Since(start))
		return res, err
	}
	return t
}
