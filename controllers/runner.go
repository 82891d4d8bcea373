package controllers

import (
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// The metadata of a controller's entry: which controller queued it,
// which of its ticks (a goal's continuation number) it is, and the
// version of the state it fired from. A state is not written while its
// entry waits (see Scheduler.fire), so an entry runs only while its
// state is still at that version: any change since (its own tick's
// turn, a command, a rollback) makes it stale, and a second entry of one
// tick is stale once the first has run.
const (
	MetaController = "herald.controller" // "goal", "heartbeat" or "loop:<id>"
	MetaTick       = "herald.tick"
	MetaVersion    = "herald.version"
)

// DefaultJudgeTimeout bounds one call of the judge (goal.judge_timeout).
const DefaultJudgeTimeout = 30 * time.Second

// releaseTimeout bounds the store's answer after a tick's turn was cut
// short, when the turn's own context has ended.
const releaseTimeout = 10 * time.Second

// KindNotice is the outbox kind of what a controller tells its chat.
const KindNotice = "controller"

// JudgeFunc asks the auxiliary model one question and returns its
// answer. An error is the call's failure (the judge fails open on it).
type JudgeFunc func(ctx context.Context, system, user string) (string, error)

// RunnerOptions configure NewRunner.
type RunnerOptions struct {
	Agent sessions.TurnRunner // required: runs the turn itself
	Store Store               // required
	// Judge answers the goal's and the loops' --until questions; nil:
	// every call fails, and the judge fails open.
	Judge        JudgeFunc
	JudgeTimeout time.Duration // 0: DefaultJudgeTimeout
	LoopMaxTicks int           // loop.max_ticks; 0: no cap
	// Ended reports whether what a goal waits on (a delegation, a
	// process) has ended; nil: it has.
	Ended func(ctx context.Context, conv string, w Wait) bool
	// NoGoalFor is how long the runner takes a conversation found with
	// no goal to still have none, sparing the read after each of its
	// turns; 0: DefaultNoGoalFor, negative: it reads after every turn.
	NoGoalFor time.Duration
	// Dropped, when set, is told of each controller's entry dropped
	// unrun as stale, by its controller's kind. It must return quickly.
	Dropped func(kind Kind)
	Clock   clock.Clock
	Logger  *slog.Logger
}

// DefaultNoGoalFor is RunnerOptions.NoGoalFor's default. A goal set
// meanwhile on another instance is judged after its own continuations
// at once, and after the conversation's other turns within this.
const DefaultNoGoalFor = 5 * time.Second

// noGoalMax bounds the conversations the runner remembers as having no
// goal; past it, it forgets them all.
const noGoalMax = 100_000

// Runner runs turns with the controllers around them (a
// sessions.TurnRunner): before a controller's entry, it drops one that
// went stale (its goal paused, cleared or judged since; its loop
// stopped; a heartbeat whose conversation was not idle); after a turn,
// the goal's judge decides what comes next, and a tick's loop or
// heartbeat moves on. What it decides is committed with the turn
// (Put), so it happens once, with the turn, or not at all.
//
// A fire that queues an entry leaves its controller's state as it was,
// still due: the entry's turn is the one writer that moves it on, so a
// state the turn read at its start is the one it commits over.
type Runner struct {
	opts RunnerOptions

	mu     sync.Mutex
	noGoal map[string]time.Time // conversation → until when it is taken to have no goal
}

// NewRunner returns a runner. Errors: Invalid (no agent or store).
func NewRunner(opts RunnerOptions) (*Runner, error) {
	if opts.Agent == nil || opts.Store == nil {
		return nil, errs.E("controllers.NewRunner", errs.Invalid, "the controllers' runner needs the agent and the store")
	}
	if opts.JudgeTimeout <= 0 {
		opts.JudgeTimeout = DefaultJudgeTimeout
	}
	if opts.NoGoalFor == 0 {
		opts.NoGoalFor = DefaultNoGoalFor
	}
	if opts.Ended == nil {
		opts.Ended = endedAlways
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Runner{opts: opts, noGoal: map[string]time.Time{}}, nil
}

// entryOf reads which controller queued e and which tick it is; ok is
// false for an entry no controller queued.
func entryOf(conv string, e sessions.Entry) (k Key, tick int, version int64, ok bool) {
	name := e.Meta[MetaController]
	if name == "" {
		return Key{}, 0, 0, false
	}
	tick, err := strconv.Atoi(e.Meta[MetaTick])
	if err != nil {
		return Key{}, 0, 0, false
	}
	version, err = strconv.ParseInt(e.Meta[MetaVersion], 10, 64)
	if err != nil {
		return Key{}, 0, 0, false
	}
	kind, id, _ := strings.Cut(name, ":")
	return Key{Conv: conv, Kind: Kind(kind), ID: id}, tick, version, true
}

// entryName is the MetaController value of k's entries.
func entryName(k Key) string {
	if k.ID == "" {
		return string(k.Kind)
	}
	return string(k.Kind) + ":" + k.ID
}

// Run runs in's turn with the controllers around it.
func (r *Runner) Run(ctx context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error) {
	tick, out := r.before(ctx, in)
	if out != nil {
		return out, nil
	}
	out, err := r.opts.Agent.Run(ctx, in)
	r.after(ctx, tick, in, out, err)
	return out, err
}

// before reads the controller of a tick's entry, when the entry is one:
// out is the turn's output when the entry went stale, run no further.
// Run's steps before and after the agent are functions of their own so
// that their locals are off the goroutine's stack while the turn waits
// on the model.
func (r *Runner) before(ctx context.Context, in *sessions.TurnInput) (tick *State, out *sessions.TurnOutput) {
	conv := convOf(in)
	k, n, v, ok := entryOf(conv, in.Entry)
	if !ok {
		return nil, nil
	}
	st, current, rollback := r.current(ctx, k, n, v, *in)
	if !current {
		// Dropped unrun: no history, no reply. A tick that never ran
		// gives its turn back to its controller.
		out = &sessions.TurnOutput{End: sessions.TurnDone}
		if rollback != nil {
			out.Writes = []sessions.Write{Put{State: *rollback}}
		}
		r.opts.Logger.Info("a controller's entry went stale before its turn; dropped unrun", "conv", conv, "controller", k.Name(), "tick", n)
		if r.opts.Dropped != nil {
			r.opts.Dropped(k.Kind)
		}
		return nil, out
	}
	return &st, nil
}

// convOf is in's conversation.
func convOf(in *sessions.TurnInput) string {
	if in.Conv == "" {
		return in.Entry.Conv
	}
	return in.Conv
}

// after judges the turn the agent ran (out, err) for its conversation's
// controllers and the tick it ran, if any.
func (r *Runner) after(ctx context.Context, tick *State, in *sessions.TurnInput, out *sessions.TurnOutput, err error) {
	conv, origin := convOf(in), in.Origin
	if err != nil || out.End == sessions.TurnInterrupted || out.End == sessions.TurnModelError {
		// Not judged: a turn cut short says nothing of the goal, and one
		// the model failed would only fail again. A tick cut short is
		// over all the same, and gives its place back.
		if tick != nil {
			// The turn's context may have ended (that is what cut it
			// short): what follows is read beyond it.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
			defer cancel()
			if now, nerr := r.opts.Store.Now(sctx); nerr == nil {
				if s, tell, ok := released(*tick, out.End == sessions.TurnModelError, now); ok {
					out.Writes = append(out.Writes, Put{State: s})
					out.Outbox = r.tell(out.Outbox, conv, origin, tell)
				}
			}
		}
		return
	}
	reply := replyOf(out)
	if tick != nil && tick.Kind != KindGoal {
		if s, tell, ok := r.ticked(ctx, *tick, reply); ok {
			out.Writes = append(out.Writes, Put{State: s})
			out.Outbox = r.tell(out.Outbox, conv, origin, tell)
		}
	}
	if s, tell, ok := r.judged(ctx, conv, tick, in.Controls, reply); ok {
		out.Writes = append(out.Writes, Put{State: s})
		out.Outbox = r.tell(out.Outbox, conv, origin, tell)
	}
}

// released is the state of a tick's controller after a turn of the
// tick that did not run through (cut short, failed on the model, or
// dropped unrun as not idle), and what to tell the chat: a goal's
// continuation is no longer owed (the next judgement owes the next; one
// the model failed pauses the goal, which would only fail again); a
// loop's or heartbeat's tick is over uncounted, and it is due again an
// interval on.
func released(st State, failed bool, now time.Time) (State, string, bool) {
	var (
		v    any
		tell string
	)
	switch st.Kind {
	case KindGoal:
		var g Goal
		if json.Unmarshal(st.Data, &g) != nil {
			return State{}, "", false
		}
		g.Owed = false
		if failed {
			g.Status, g.Reason = GoalPaused, "Paused: the model failed on a continuation. /goal resume goes on."
			tell = g.Reason
		}
		v, st.DueAt = g, time.Time{}
	case KindLoop:
		var l Loop
		if json.Unmarshal(st.Data, &l) != nil {
			return State{}, "", false
		}
		v, st.DueAt = l, now.Add(l.Interval)
	case KindHeartbeat:
		var h Heartbeat
		if json.Unmarshal(st.Data, &h) != nil {
			return State{}, "", false
		}
		v, st.DueAt = h, h.Due(now)
	default:
		return State{}, "", false
	}
	st, err := with(st, v, st.DueAt)
	return st, tell, err == nil
}

// tell adds a notice of text to msgs, when there is one.
func (r *Runner) tell(msgs []outbox.Message, conv string, to outbox.Target, text string) []outbox.Message {
	if text == "" {
		return msgs
	}
	return append(msgs, outbox.Message{Target: to, Conv: conv, Text: text, Kind: KindNotice})
}

// replyOf is a turn's reply to its chat, "" when it has none.
func replyOf(out *sessions.TurnOutput) string {
	for i := len(out.Outbox) - 1; i >= 0; i-- {
		if out.Outbox[i].Kind == "reply" {
			return out.Outbox[i].Text
		}
	}
	return ""
}

// current reads the controller of a tick's entry: current is false when
// the entry went stale, and rollback, then, is the state to write back
// for a tick that never ran (a heartbeat whose conversation was busy).
func (r *Runner) current(ctx context.Context, k Key, tick int, version int64, in sessions.TurnInput) (st State, current bool, rollback *State) {
	st, err := r.opts.Store.Controller(ctx, k)
	if err != nil || st.Version != version {
		// Gone (a stopped loop), unreadable, or changed since it fired:
		// a controller's turn runs only on the state it fired from.
		return State{}, false, nil
	}
	switch k.Kind {
	case KindGoal:
		var g Goal
		return st, json.Unmarshal(st.Data, &g) == nil && g.Status == GoalActive && g.Owed && g.Turns == tick, nil
	case KindLoop:
		var l Loop
		return st, json.Unmarshal(st.Data, &l) == nil && l.Status == LoopActive && l.Ticks == tick-1, nil
	case KindHeartbeat:
		var h Heartbeat
		if json.Unmarshal(st.Data, &h) != nil || h.Off || h.Ticks != tick-1 {
			return st, false, nil
		}
		if idleSince(in.History, in.Entry.EnqueuedAt) {
			return st, true, nil
		}
		// Another turn ran after the tick was queued: the conversation
		// was not idle, and the tick is rolled back.
		now, err := r.opts.Store.Now(ctx)
		if err != nil {
			return st, false, nil
		}
		if back, _, ok := released(st, false, now); ok {
			return st, false, &back
		}
	}
	return st, false, nil
}

// idleSince reports whether no message of history is later than at.
func idleSince(history []chat.Message, at time.Time) bool {
	return len(history) == 0 || !history[len(history)-1].At.After(at)
}

// ticked is a loop's or heartbeat's state after its tick's turn, which
// replied reply, and what to tell the chat.
func (r *Runner) ticked(ctx context.Context, st State, reply string) (State, string, bool) {
	now, err := r.opts.Store.Now(ctx)
	if err != nil {
		r.opts.Logger.Warn("reading the store's clock after a controller's tick failed; its state is left as it was", "err", err)
		return State{}, "", false
	}
	switch st.Kind {
	case KindLoop:
		var l Loop
		if json.Unmarshal(st.Data, &l) != nil {
			return State{}, "", false
		}
		l = l.Ticked(reply, r.opts.LoopMaxTicks)
		if l.Status == LoopActive && l.Until != "" && r.met(ctx, l.Until, reply) {
			l.Status, l.Reason = LoopDone, "The loop ended: its condition is met ("+l.Until+")."
		}
		due, tell := now.Add(l.Interval), ""
		if l.Status != LoopActive {
			due, tell = time.Time{}, "Loop "+st.ID+": "+l.Reason
		}
		st, err = with(st, l, due)
		return st, tell, err == nil
	case KindHeartbeat:
		var h Heartbeat
		if json.Unmarshal(st.Data, &h) != nil {
			return State{}, "", false
		}
		h.Ticks++
		if now.Sub(st.DueAt) >= h.Interval {
			// It ran a tick or more late (no instance ran, or the
			// conversation was busy): its timer starts again from now
			// rather than catching up.
			h.Anchor = now
		}
		st, err = with(st, h, h.Due(now))
		return st, "", err == nil
	}
	return State{}, "", false
}

// met asks the judge whether a loop's condition holds after a tick that
// replied reply. It fails open: an error or an unreadable answer is not
// met, and the loop goes on.
func (r *Runner) met(ctx context.Context, cond, reply string) bool {
	system, user := UntilPrompt(cond, reply)
	answer, err := r.ask(ctx, system, user)
	if err != nil {
		r.opts.Logger.Warn("the loop's --until judge failed; the loop goes on", "err", err)
		return false
	}
	met, ok := ParseMet(answer)
	return ok && met
}

// ask calls the judge within its timeout.
func (r *Runner) ask(ctx context.Context, system, user string) (string, error) {
	if r.opts.Judge == nil {
		return "", errs.E("controllers.judge", errs.Unavailable, "no model is configured for the judge")
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.JudgeTimeout)
	defer cancel()
	return r.opts.Judge(ctx, system, user)
}

// knownGoalless reports whether conv was found with no goal within
// NoGoalFor.
func (r *Runner) knownGoalless(conv string) bool {
	if r.opts.NoGoalFor < 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.noGoal[conv]
	if ok && r.opts.Clock.Now().Before(until) {
		return true
	}
	delete(r.noGoal, conv)
	return false
}

// goalless notes that conv was found with no goal.
func (r *Runner) goalless(conv string) {
	if r.opts.NoGoalFor < 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.noGoal) >= noGoalMax {
		clear(r.noGoal)
	}
	r.noGoal[conv] = r.opts.Clock.Now().Add(r.opts.NoGoalFor)
}

// Forget drops what the runner remembers of conv having no goal: one was
// set in this process.
func (r *Runner) Forget(conv string) {
	r.mu.Lock()
	delete(r.noGoal, conv)
	r.mu.Unlock()
}

// judged is the goal's state after a turn, and what to tell the chat;
// ok is false when the goal is not to change (none, not active, waiting
// on what has not ended). tick is the turn's controller's state when the
// turn was a controller's tick; controls is what the turn's claim found
// of the conversation's controllers' states: none means no goal to read,
// some that the goal is read whatever this runner remembers, unknown
// that it is read unless the conversation was found without one lately.
func (r *Runner) judged(ctx context.Context, conv string, tick *State, controls sessions.Controls, reply string) (State, string, bool) {
	if (tick == nil || tick.Kind != KindGoal) &&
		(controls == sessions.ControlsNone || controls == sessions.ControlsUnknown && r.knownGoalless(conv)) {
		// A conversation without a goal: most turns end here, with
		// none of judge's locals on the stack.
		return State{}, "", false
	}
	return r.judge(ctx, conv, tick, reply)
}

// judge is judged for a turn whose conversation may have a goal.
func (r *Runner) judge(ctx context.Context, conv string, tick *State, reply string) (State, string, bool) {
	st := State{}
	if tick != nil && tick.Kind == KindGoal {
		st = *tick
	} else {
		var err error
		if st, err = r.opts.Store.Controller(ctx, Key{Conv: conv, Kind: KindGoal}); err != nil {
			if errs.Is(err, errs.NotFound) {
				r.goalless(conv)
			} else {
				r.opts.Logger.Warn("reading the goal after a turn failed; it is not judged this turn", "conv", conv, "err", err)
			}
			return State{}, "", false
		}
	}
	var goal Goal
	if json.Unmarshal(st.Data, &goal) != nil || goal.Status != GoalActive {
		return State{}, "", false
	}
	was := goal
	if w := goal.Wait; w != nil {
		switch {
		case w.Thing() == "":
			// A timed wait ends by its due time, not by a turn.
			return State{}, "", false
		case !r.opts.Ended(ctx, conv, *w):
			return State{}, "", false
		}
		goal.Wait = nil
	}
	// The continuation this turn was, if it was, has run.
	if tick != nil && tick.Kind == KindGoal {
		goal.Owed = false
	}
	now, err := r.opts.Store.Now(ctx)
	if err != nil {
		r.opts.Logger.Warn("reading the store's clock after a turn failed; the goal is not judged this turn", "conv", conv, "err", err)
		return State{}, "", false
	}
	system, user := JudgePrompt(goal, reply)
	answer, jerr := r.ask(ctx, system, user)
	j, ok := ParseJudgement(answer)
	if jerr != nil {
		r.opts.Logger.Warn("the goal's judge failed; the goal goes on", "conv", conv, "err", jerr)
	} else if !ok {
		r.opts.Logger.Warn("the goal's judge gave an unreadable answer; the goal goes on", "conv", conv, "answer", trimRunes(answer, 200))
	}
	owed := goal.Owed
	if owed {
		// A continuation is owed already (this was a user's turn before
		// it ran): it is counted, and the budget is weighed without it.
		goal.Turns--
	}
	step := Decide(goal, j, ok, jerr != nil, now)
	next := step.Goal
	due := time.Time{}
	switch {
	case step.Continue && owed:
		// Still owed: the same continuation, due as it was.
		due = st.DueAt
	case step.Continue:
		next.Owed = true
	case !step.WaitUntil.IsZero() || step.Delegation != "" || step.Process != "":
		next.Owed = false
		next.Wait = &Wait{Until: step.WaitUntil, Delegation: step.Delegation, Process: step.Process}
	default:
		next.Owed = false
	}
	if due.IsZero() {
		due = next.due(now)
	}
	if reflect.DeepEqual(next, was) && due.Equal(st.DueAt) {
		// Nothing changed (a user's turn with a continuation owed
		// already): no write, so the continuation queued stays current.
		return State{}, step.Tell, false
	}
	st, err = with(st, next, due)
	return st, step.Tell, err == nil
}
