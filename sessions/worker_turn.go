package sessions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/tracing"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/signals"
)

// Causes of a cancelled turn context. stopCause carries the stop's reason.
var (
	errInterrupted = errs.E("sessions.turn", errs.Conflict, "interrupted by a new message")
	errLeaseLost   = errs.E("sessions.turn", errs.LeaseLost, "the turn's lease was lost")
)

type stopCause struct{ reason string }

func (s *stopCause) Error() string { return "stopped by /stop" }

// steerBuffer is how many steered messages a turn holds before it takes
// them; more wait in the queue and run as turns of their own.
const steerBuffer = 16

// A commit the store could not make (unreachable, out of room) is tried
// again while the turn's lease still holds, each pause commitPauseStep
// longer than the one before, up to commitPauseMax: a store back within
// the lease's time takes the turn's result without the turn running
// again. The tries end a lease's time after the first refusal however
// the lease is renewed meanwhile (a store that takes renewals and not the
// commit), by the time the pauses take.
const (
	commitPauseStep = 100 * time.Millisecond
	commitPauseMax  = time.Second
)

// activeTurn is one turn this process runs.
type activeTurn struct {
	w *TurnWorker
	// t is the turn as claimed, its lease and entry; its History, which
	// came with the claim when HistoryRead is set, is the runner's once
	// handed to it.
	t         *Turn
	claimedAt time.Time // by the store's clock: a signal older than this was for an earlier turn
	started   time.Time // by the worker's clock, for the turn's duration
	// settled is set once the runner returned: the turn only commits
	// now, and /stop or /status no longer see it running.
	settled atomic.Bool
	// lost is set once the turn knows another holder has its lease.
	lost atomic.Bool
	// until is when the lease runs out as the turn last knew it, Unix
	// nanoseconds by the store's clock: its claim's expiry, then each
	// renewal's.
	until    atomic.Int64
	control  bool     // a control entry: no agent, no signals
	controls Controls // what the claim found of the controllers' states
	// claimed is set when the turn's commit also claimed for this worker
	// (FinishAndClaim), and next is the turn it claimed, if any: the
	// goroutine runs it next.
	claimed bool
	next    *Turn
	// wrote are the other domains' writes the turn's commit carried, once
	// it committed (a refused result's replacement carries none).
	wrote []Write

	// The fields are in an order that packs them: 10,000 turns waiting
	// on the model hold 10,000 of them.

	// Guarded by mu.
	ended       bool // timers must not fire any more
	steerClosed bool
	// due is where the turn's lease renewal is in the worker's timers,
	// plus one; 0 when not queued. Guarded by the timers' mutex.
	due int32

	logOnce sync.Once
	log     *slog.Logger // made by logger, on first use

	// span is the turn's herald.turn span, ended with the turn.
	span trace.Span

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu          sync.Mutex
	timers      sync.WaitGroup // callbacks scheduled or running
	steer       SteerQueue
	steered     []string // entry ids fed into steer, in order
	steeredMsgs []string // their messages' ids, in the same order
}

// runTurn runs t, then each turn that a commit claimed in the same step
// (FinishAndClaim), holding the one slot throughout, so a busy worker
// goes from turn to turn without a claim of its own.
func (w *TurnWorker) runTurn(t *Turn) {
	defer w.turns.Done()
	for {
		at := w.runOne(t)
		if at.next != nil {
			t = at.next
			continue
		}
		<-w.slots
		if !at.claimed {
			// The conversation may have more waiting, and a slot is
			// free. A commit that claimed found nothing ready: an
			// Append wakes the claim loop when that changes.
			w.Wake()
		}
		return
	}
}

// runOne runs one turn and returns it ended, with the turn its commit
// claimed, if any.
func (w *TurnWorker) runOne(t *Turn) *activeTurn {
	at := w.begin(t)
	defer w.end(at)

	deliveries := at.t.Entry.Deliveries
	if deliveries > 1 {
		w.takeover(at)
	}
	switch {
	case w.maxDeliveries > 0 && deliveries > w.maxDeliveries:
		w.drop(at)
	case at.control:
		w.runControl(at)
	default:
		w.runAgent(at)
	}
	return at
}

// takeover notes a turn whose entry was handed out before. It is apart
// from runOne so that its log line's locals are off the goroutine's
// stack while the turn waits on the model.
func (w *TurnWorker) takeover(at *activeTurn) {
	at.logger().Info("taking over an entry handed out before", "deliveries", at.t.Entry.Deliveries)
	if f := w.metrics.Takeover; f != nil {
		f()
	}
}

// controlsOf is what t's claim found of its controllers' states.
func controlsOf(t *Turn) Controls {
	switch {
	case !t.HistoryRead:
		return ControlsUnknown
	case t.Uncontrolled:
		return ControlsNone
	}
	return ControlsSome
}

// begin registers the turn, so signals reach it, and starts its timers.
func (w *TurnWorker) begin(t *Turn) *activeTurn {
	at := &activeTurn{
		w:         w,
		t:         t,
		controls:  controlsOf(t),
		claimedAt: t.Lease.Expires.Add(-w.ttl),
		started:   w.clock.Now(),
		control:   t.Entry.Meta[MetaControl] != "",
	}
	at.until.Store(t.Lease.Expires.UnixNano())
	// The turn continues the trace its entry carries (a completion's
	// turn, its delegation's), if any.
	kind := cmp.Or(t.Entry.Kind, KindUser)
	if at.control {
		kind = "control"
	}
	ctx, span := tracing.Start(tracing.Extract(w.hard, t.Entry.Meta), tracing.SpanTurn,
		attribute.String("herald.conversation", t.Lease.Conv), attribute.String("herald.entry.kind", string(kind)))
	at.span = span
	at.ctx, at.cancel = context.WithCancelCause(ctx)
	w.mu.Lock()
	// A turn of the same conversation that is still cleaning up is
	// replaced: it no longer holds the lease.
	w.running[at.t.Lease.Conv] = at
	w.mu.Unlock()
	at.mu.Lock()
	at.scheduleRenew(w.ttl / 3)
	at.mu.Unlock()
	return at
}

// end stops the turn's timers and unregisters it.
func (w *TurnWorker) end(at *activeTurn) {
	at.mu.Lock()
	at.ended = true
	if w.timers.remove(at) {
		at.timers.Done()
	}
	at.mu.Unlock()
	at.timers.Wait()
	at.cancel(context.Canceled)
	at.span.End()
	w.mu.Lock()
	if w.running[at.t.Lease.Conv] == at {
		delete(w.running, at.t.Lease.Conv)
	}
	w.mu.Unlock()
}

// logger logs with the turn's conversation, entry and lease token. It is
// made when first needed: a turn that goes well logs one line, which
// names them itself.
func (at *activeTurn) logger() *slog.Logger {
	at.logOnce.Do(func() { at.log = at.w.log.With(at.logAttrs()...) })
	return at.log
}

func (at *activeTurn) logAttrs() []any {
	return []any{"conv", at.t.Lease.Conv, "entry", at.t.Entry.ID, "token", at.t.Lease.Token}
}

func (at *activeTurn) info() RunningTurn {
	return RunningTurn{EntryID: at.t.Entry.ID, Since: at.claimedAt, Text: excerpt(at.t.Entry.Text)}
}

// scheduleRenew arms the next renewal. Called with at.mu held.
func (at *activeTurn) scheduleRenew(after time.Duration) {
	at.timers.Add(1)
	at.w.timers.add(at, after)
}

func (at *activeTurn) renew() {
	defer at.timers.Done()
	at.mu.Lock()
	if at.ended {
		at.mu.Unlock()
		return
	}
	at.mu.Unlock()
	every := at.w.ttl / 3
	ctx, cancel := context.WithTimeout(at.w.base, every)
	renewed, err := at.w.store.Renew(ctx, at.t.Lease, at.w.ttl)
	cancel()
	if err == nil {
		at.until.Store(renewed.Expires.UnixNano())
	}
	at.mu.Lock()
	defer at.mu.Unlock()
	if at.ended {
		return
	}
	switch {
	case err == nil:
		at.scheduleRenew(every)
	case errs.Is(err, errs.LeaseLost):
		// A commit being tried again stops trying.
		at.until.Store(0)
		// Once the turn commits, its own Finish releases the lease, and
		// a failed commit tells of a lost one itself.
		if !at.settled.Load() {
			at.loseLease("renewal", err)
			at.cancel(errLeaseLost)
		}
	default:
		// The store may be back before the lease runs out; try sooner.
		at.logger().Warn("renewing the turn's lease failed; retrying", "err", err)
		at.scheduleRenew(every / 3)
	}
}

// loseLease records that the turn lost its lease, counting it once.
func (at *activeTurn) loseLease(when string, err error) {
	if at.lost.CompareAndSwap(false, true) {
		at.logger().Warn("the turn's lease was lost; it commits nothing", "found_at", when, "err", err)
		at.w.countLeaseLost()
	}
}

// signal applies s to the turn, unless s was for an earlier turn or is
// about the entry this turn runs. A zero s.At comes from this process
// (no shared store) and is about what runs now.
func (at *activeTurn) signal(s signals.Signal) {
	if at.control || (s.EntryID != "" && s.EntryID == at.t.Entry.ID) {
		return
	}
	if !s.At.IsZero() && s.At.Before(at.claimedAt) {
		return
	}
	switch s.Kind {
	case signals.Stop:
		at.logger().Info("stopping the turn", "reason", s.Text)
		at.cancel(&stopCause{reason: s.Text})
	case signals.Interrupt:
		at.logger().Info("interrupting the turn for a new message", "by", s.EntryID)
		at.cancel(errInterrupted)
	case signals.Steer:
		at.offerSteer(s.EntryID, s.MessageID, s.Text)
	}
}

// offerSteer feeds a steered message to the turn, once per entry.
func (at *activeTurn) offerSteer(entryID, messageID, text string) {
	at.mu.Lock()
	defer at.mu.Unlock()
	if at.steerClosed || entryID == "" || slices.Contains(at.steered, entryID) {
		return
	}
	if !at.steer.Offer(text, steerBuffer) {
		at.logger().Warn("too many steered messages; this one runs as its own turn", "by", entryID)
		return
	}
	at.steered = append(at.steered, entryID)
	at.steeredMsgs = append(at.steeredMsgs, messageID)
	at.logger().Info("steering the turn", "by", entryID)
}

// closeSteer stops taking steered messages and returns the entries whose
// text the turn took (the ones not left in the queue), and their
// messages' ids.
func (at *activeTurn) closeSteer() (entries, messages []string) {
	at.mu.Lock()
	defer at.mu.Unlock()
	at.steerClosed = true
	n := len(at.steered) - len(at.steer.Close())
	return slices.Clone(at.steered[:n]), slices.Clone(at.steeredMsgs[:n])
}

func (w *TurnWorker) runAgent(at *activeTurn) {
	r := w.beforeRun(at)
	if r == nil {
		return
	}
	out, runErr := w.run(at, &r.in)
	w.afterRun(at, r, out, runErr)
}

// agentRun is what a turn's agent run was given: runAgent keeps only
// it, on the heap, while the turn waits on the model.
type agentRun struct {
	in     TurnInput // its Origin is where the replies go
	starts []int
	stream TurnStream
	watch  TurnWatch
	// published says the model's pieces go to waiters in this process
	// (Deltas), who are told when the turn ends.
	published bool
}

// beforeRun loads what the turn's agent runs on, or returns nil when the
// turn ends here (the history could not be read, the session is stale).
func (w *TurnWorker) beforeRun(at *activeTurn) *agentRun {
	if f := w.metrics.Started; f != nil {
		f()
	}
	e := at.t.Entry
	conv := at.t.Lease.Conv
	if w.log.Enabled(at.ctx, slog.LevelDebug) {
		at.logger().Debug("turn started", "deliveries", e.Deliveries)
	}

	history, err := w.history(at)
	if err != nil {
		at.logger().Error("loading the history failed; the entry waits for another run", "err", err)
		w.countFailed("history")
		w.retryLater(at, "history")
		return nil
	}
	origin, err := ReplyTarget(e.Inbound)
	if err != nil {
		at.logger().Warn("the entry has no reply target; its replies are dropped", "err", err)
	}
	if w.staleSession(at, origin) {
		return nil
	}
	// Where the stored history may start is known before the runner, which
	// may change its copy, has it.
	starts := w.historyStarts(history)
	in := TurnInput{Conv: conv, Entry: e, History: history, Origin: origin, Steer: &at.steer, Controls: at.controls}
	var stream TurnStream
	if w.stream != nil && err == nil {
		stream = w.stream(at.ctx, conv, e, origin)
	}
	var published bool
	in.Delta, published = w.deltaFor(conv, e, stream)
	var watch TurnWatch
	if w.watch != nil && err == nil {
		watch = w.watch(at.ctx, conv, origin)
		in.Progress = watch.Progress
	}
	return &agentRun{in: in, starts: starts, stream: stream, watch: watch, published: published}
}

// afterRun commits the turn the agent ran to out and runErr.
func (w *TurnWorker) afterRun(at *activeTurn, r *agentRun, out *TurnOutput, runErr error) {
	f, stop := w.finishOf(at, r, out, runErr)
	if f == nil {
		return
	}
	if w.commit(at, *f) {
		w.finished(at, out, stop, len(f.Absorbed))
	} else if r.stream != nil && at.lost.Load() {
		r.stream.End(false)
	}
}

// finishOf is the commit of the turn the agent ran to *out and runErr,
// and the /stop that ended it, if one did; nil when the turn ends
// without a commit (its lease lost, handed back, to run again). It and
// finished are apart from afterRun so that their locals are off the
// goroutine's stack while the commit encodes the turn.
func (w *TurnWorker) finishOf(at *activeTurn, r *agentRun, out *TurnOutput, runErr error) (*Finish, *stopCause) {
	e, conv, origin, starts, stream, watch := r.in.Entry, at.t.Lease.Conv, r.in.Origin, r.starts, r.stream, r.watch
	if watch != nil {
		watch.End()
	}
	at.settled.Store(true)
	absorbed, absorbedMsgs := at.closeSteer()
	cause := context.Cause(at.ctx)
	if r.published {
		w.deltas.End(conv, e.MessageID, runErr == nil && !errors.Is(cause, errLeaseLost))
	}
	var stop *stopCause
	var streamed map[string]string
	if stream != nil {
		streamed = stream.End(replyToCome(runErr, at.ctx.Err(), cause))
	}
	switch {
	case errors.Is(cause, errLeaseLost):
		return nil, nil
	case runErr == nil:
	case errors.As(cause, &stop), errors.Is(cause, errInterrupted):
		// What the turn did is history the next turn builds on.
		if out.End == "" {
			out.End = TurnInterrupted
		}
	case at.ctx.Err() != nil:
		at.logger().Info("turn cancelled by the worker stopping; handing its entry back")
		w.handBack(at.t.Lease, "shutdown")
		return nil, nil
	default:
		at.logger().Error("the turn failed; the entry waits for another run", "err", runErr)
		w.countFailed("runner")
		w.retryLater(at, "runner failed")
		return nil, nil
	}
	msgs := withStreamed(out.Outbox, origin, e.MessageID, streamed)
	// Only a run the signal ended says so, and only a user's message is
	// waited on: a synthetic entry has no one waiting for its answer.
	var ended error
	if runErr != nil {
		ended = cause
	}
	awaited := e.MessageID
	if e.Kind == KindSynthetic {
		awaited = ""
	}
	if text := w.endNotice(origin, awaited, ended, stop, msgs); text != "" {
		msgs = append(slices.Clone(msgs), outbox.Message{Target: origin, Text: text, ReplyTo: e.MessageID, Kind: KindNotice})
	}
	msgs = w.steeredNotices(origin, absorbedMsgs, msgs)
	writes := out.Writes
	usage := out.Usage
	if usage == nil {
		usage = []Usage{{Model: out.Model, Prompt: out.InputTokens, Completion: out.OutputTokens}}
	}
	for _, u := range usage {
		if u.Prompt > 0 || u.Completion > 0 {
			u.Conv = conv
			writes = append(slices.Clip(writes), u)
		}
	}
	f := &Finish{EntryID: e.ID, Absorbed: absorbed, History: out.History, Outbox: w.outboxOf(at, msgs), Release: true,
		DropHistory: w.historyDrop(starts, len(out.History)), Writes: writes, Meta: out.Meta}
	if out.End != "" {
		at.span.SetAttributes(attribute.String("herald.turn.end", string(out.End)))
	}
	return f, stop
}

// finished tells of a turn committed: the listeners of its writes, the
// log, the metrics.
func (w *TurnWorker) finished(at *activeTurn, out *TurnOutput, stop *stopCause, absorbed int) {
	if len(at.wrote) > 0 && w.committed != nil {
		w.committed(Committed{Conv: at.t.Lease.Conv, Writes: at.wrote, Stopped: stop != nil})
	}
	took := w.clock.Now().Sub(at.started)
	w.log.Info("turn finished", append(at.logAttrs(),
		"end", string(out.End), "model_calls", out.ModelCalls, "prompt_tokens", out.InputTokens, "completion_tokens", out.OutputTokens,
		"took_ms", took.Milliseconds(), "absorbed", absorbed)...)
	if f := w.metrics.Finished; f != nil {
		f(out.End, took)
	}
}

// replyToCome reports whether a turn that ran to runErr, its context
// ended with ctxErr for cause, may still have its reply sent from this
// process: when it ran through, or when it failed and runs here again.
// A turn stopped or interrupted commits none; one whose lease was lost,
// or handed back as the worker stops, runs again elsewhere, whose reply
// is shown and sent there.
func replyToCome(runErr, ctxErr, cause error) bool {
	var stop *stopCause
	switch {
	case errors.Is(cause, errLeaseLost):
		return false
	case runErr == nil:
		return true
	case errors.As(cause, &stop), errors.Is(cause, errInterrupted):
		return false
	default:
		return ctxErr == nil
	}
}

// withStreamed adds meta, what the turn's stream said of itself, to the
// messages of msgs to origin in answer to message msgID: the reply.
func withStreamed(msgs []outbox.Message, origin outbox.Target, msgID string, meta map[string]string) []outbox.Message {
	if len(meta) == 0 || msgID == "" {
		return msgs
	}
	msgs = slices.Clone(msgs)
	for i, m := range msgs {
		if m.Target != origin || m.ReplyTo != msgID {
			continue
		}
		m.Meta = maps.Clone(m.Meta)
		if m.Meta == nil {
			m.Meta = map[string]string{}
		}
		maps.Copy(m.Meta, meta)
		msgs[i] = m
	}
	return msgs
}

// deltaFor is the turn's TurnInput.Delta: the streamed text goes to the
// waiters in this process on the reply to a user's message (Deltas),
// which published reports, and to stream; nil when neither takes it, and
// the model is then not asked to stream.
func (w *TurnWorker) deltaFor(conv string, e Entry, stream TurnStream) (delta func(string), published bool) {
	var publish func(string)
	if e.Kind != KindSynthetic && w.deltas.Listening(conv, e.MessageID) {
		publish = func(text string) { w.deltas.Publish(conv, e.MessageID, text) }
	}
	switch {
	case stream == nil:
		return publish, publish != nil
	case publish == nil:
		return stream.Delta, false
	}
	return func(text string) {
		publish(text)
		stream.Delta(text)
	}, true
}

// staleSession acks, with a notice holding its text, a synthetic entry
// bound to a session (MetaSession) that its conversation has left since
// (/new): it is shown, not run. It reports whether it did. An entry whose
// conversation's session cannot be read runs: running it beats losing it.
func (w *TurnWorker) staleSession(at *activeTurn, origin outbox.Target) bool {
	want, bound := at.t.Entry.Meta[MetaSession]
	if !bound || at.t.Entry.Kind != KindSynthetic {
		return false
	}
	ctx, cancel := w.storeCtx()
	meta, err := w.store.Meta(ctx, at.t.Lease.Conv)
	cancel()
	if err != nil || meta[ConvMetaSession] == want {
		return false
	}
	at.settled.Store(true)
	at.logger().Info("a synthetic entry for a session started anew since is shown, not run")
	notice := outbox.Message{Target: origin, Text: noticeStaleSession + at.t.Entry.Text, Kind: KindNotice}
	w.commit(at, Finish{EntryID: at.t.Entry.ID, Outbox: w.outboxOf(at, []outbox.Message{notice}), Release: true})
	return true
}

// endNotice is the text of the notice a turn that a signal ended tells
// its origin, or "" for none. /stop is always answered ("Stopped."). A
// turn a newer message interrupted, or /new stopped, tells only an
// origin whose clients wait for an answer to each message
// (TurnWorkerOptions.AnswerEach), and only when what it queued holds no
// reply to its message: no reply will name that message, and without a
// notice its client would wait out its limit.
func (w *TurnWorker) endNotice(origin outbox.Target, msgID string, cause error, stop *stopCause, msgs []outbox.Message) string {
	switch {
	case stop != nil && stop.reason != stopReasonNew:
		return noticeStopped
	case stop == nil && !errors.Is(cause, errInterrupted):
		return ""
	case msgID == "" || !w.awaitsEach(origin):
		return ""
	case slices.ContainsFunc(msgs, func(m outbox.Message) bool { return m.ReplyTo == msgID && m.Kind != KindNotice }):
		return ""
	case stop != nil:
		return noticeStoppedByNew
	}
	return noticeInterrupted
}

// awaitsEach reports whether origin's clients wait for an answer to each
// message (TurnWorkerOptions.AnswerEach).
func (w *TurnWorker) awaitsEach(origin outbox.Target) bool {
	return w.answerEach != nil && w.answerEach(origin)
}

// steeredNotices adds to msgs, for an origin that awaits an answer to
// each message (TurnWorkerOptions.AnswerEach), a notice naming each
// message the turn took in by steering: that message runs no turn of its
// own, and this turn's reply names this turn's message only.
func (w *TurnWorker) steeredNotices(origin outbox.Target, steered []string, msgs []outbox.Message) []outbox.Message {
	if len(steered) == 0 || !w.awaitsEach(origin) {
		return msgs
	}
	out := slices.Clip(msgs) // appending copies: msgs may be the runner's
	for _, id := range steered {
		if id != "" {
			out = append(out, outbox.Message{Target: origin, Text: noticeSteered, ReplyTo: id, Kind: KindNotice})
		}
	}
	return out
}

// isSteeredNotice reports whether m is a notice steeredNotices added.
func isSteeredNotice(m outbox.Message) bool { return m.Kind == KindNotice && m.Text == noticeSteered }

// historyStarts returns, when the stored history is bounded and history
// could reach the bound with a turn's messages, where a kept part of it
// may start: the index of each message that is not a tool result, then
// len(history). Otherwise it returns nil and keeps everything.
func (w *TurnWorker) historyStarts(history []chat.Message) []int {
	if w.historyMax <= 0 || len(history) == 0 || len(history) < w.historyMax/2 {
		return nil
	}
	starts := make([]int, 0, len(history)+1)
	for i, m := range history {
		if m.Role != "tool" {
			starts = append(starts, i)
		}
	}
	return append(starts, len(history))
}

// historyDrop is how many of the stored history's oldest messages the
// commit drops so that, with added more, it keeps at most historyMax: the
// first start at or past the excess, so that the kept part never begins
// with a tool result cut from its call. The turn's own messages are never
// dropped, even past the bound.
func (w *TurnWorker) historyDrop(starts []int, added int) int {
	if len(starts) == 0 {
		return 0
	}
	stored := starts[len(starts)-1]
	over := stored + added - w.historyMax
	switch {
	case over <= 0:
		return 0
	case over >= stored:
		return stored
	}
	i, _ := slices.BinarySearch(starts, over)
	return starts[i]
}

// history is the conversation's history for the turn: the one its claim
// brought, else read now.
func (w *TurnWorker) history(at *activeTurn) ([]chat.Message, error) {
	if at.t.HistoryRead {
		h := at.t.History
		at.t.History = nil // the runner owns it now
		return h, nil
	}
	ctx, cancel := w.storeCtx()
	defer cancel()
	return w.store.History(ctx, at.t.Lease.Conv)
}

// run runs the runner, turning a panic into an error: one bad turn must
// not take the process down.
func (w *TurnWorker) run(at *activeTurn, in *TurnInput) (out *TurnOutput, err error) {
	defer w.recovered(at, &out, &err)
	out, err = w.runner.Run(at.ctx, in)
	return out, err
}

// recovered is run's deferred call: a runner's panic becomes an error,
// and no output an empty one. It is a function of its own, not a
// closure in run, so that its locals (the panic's log line) are off the
// goroutine's stack while the turn waits on the model.
func (w *TurnWorker) recovered(at *activeTurn, out **TurnOutput, err *error) {
	if p := recover(); p != nil {
		at.logger().Error("the turn runner panicked", "panic", p, "stack", string(debug.Stack()))
		*out, *err = nil, fmt.Errorf("turn runner panicked: %v", p)
	}
	if *out == nil {
		*out = &TurnOutput{}
	}
}

// outboxOf readies a turn's messages for Finish: each gets its
// conversation, and a message without a valid target is dropped (it would
// make the whole commit fail). They need no idempotency key: Finish
// enqueues them in the same step as it acks the entry, so a turn run
// again, after a crash or a lost reply, either finds its entry still
// queued and nothing enqueued, or commits nothing.
func (w *TurnWorker) outboxOf(at *activeTurn, msgs []outbox.Message) []outbox.Message {
	out := make([]outbox.Message, 0, len(msgs))
	for _, m := range msgs {
		if m.Conv == "" {
			m.Conv = at.t.Lease.Conv
		}
		// Its delivery continues the turn's trace.
		m.Meta = tracing.Inject(at.ctx, m.Meta)
		if err := m.Target.Validate(); err != nil {
			at.logger().Warn("dropping a message without a valid target", "kind", m.Kind, "err", err)
			continue
		}
		out = append(out, m)
	}
	return out
}

// commit finishes the turn with f. A steered entry gone from the queue
// does not keep the turn from committing; a result the store refuses
// (too large) is replaced by a notice saying so, so the entry does not
// fail the same way forever. It reports whether f, or its replacement,
// was committed.
func (w *TurnWorker) commit(at *activeTurn, f Finish) bool {
	replaced := false
	refusals := 0            // tries the store could not make
	var paused time.Duration // the pauses after them
	for {
		ctx, cancel := w.storeCtx()
		err := w.finish(ctx, at, f)
		cancel()
		switch {
		case err == nil:
			if refusals > 0 {
				at.logger().Info("the turn committed once the store took it", "refused", refusals)
			}
			at.wrote = f.Writes
			return true
		case errs.Is(err, errs.LeaseLost):
			at.loseLease("commit", err)
			return false
		case errs.Is(err, errs.NotFound) && len(f.Absorbed) > 0:
			// The steered entries still queued run as turns of their own,
			// which answer them: the notices naming them go too.
			at.logger().Warn("a steered entry left the queue; committing without it", "err", err)
			f.Absorbed = nil
			f.Outbox = slices.DeleteFunc(slices.Clone(f.Outbox), isSteeredNotice)
			continue
		case (errs.Is(err, errs.TooLarge) || errs.Is(err, errs.Invalid)) && !replaced:
			at.logger().Error("the store refused the turn's result; committing a notice instead", "err", err)
			f = w.refusedFinish(at, f, err)
			replaced = true
			continue
		case errs.Is(err, errs.Unavailable) && at.retryCommit(commitPause(refusals+1), paused):
			if refusals++; refusals == 1 {
				at.logger().Warn("committing the turn failed; retrying while its lease holds", "err", err)
			}
			pause := commitPause(refusals)
			paused += pause
			w.pause(pause)
			continue
		}
		at.logger().Error("committing the turn failed; the entry waits for another run", "err", err)
		w.countFailed("commit")
		w.retryLater(at, "commit failed")
		return false
	}
}

// commitPause is the wait after a commit's nth refusal.
func commitPause(n int) time.Duration {
	return min(time.Duration(n)*commitPauseStep, commitPauseMax)
}

// retryCommit reports whether a commit the store refused is worth
// another try after pause, the pauses before it having taken paused: the
// worker is not stopping hard, the lease, as last renewed, holds past the
// pause (after it another worker may take the entry and run it again; a
// commit of this one would then find its lease lost), and the pauses
// stay within a lease's time.
func (at *activeTurn) retryCommit(pause, paused time.Duration) bool {
	if at.w.hard.Err() != nil || paused+pause >= at.w.ttl {
		return false
	}
	return at.w.clock.Now().Add(pause).UnixNano() < at.until.Load()
}

// finish commits f and, unless the worker is stopping, claims the next
// ready turn in the same step (FinishAndClaim), which at.next then holds:
// any ready turn while other conversations may wait (mayWait), else only
// when this one has entries left. Nothing is written, nor claimed, when
// it fails.
func (w *TurnWorker) finish(ctx context.Context, at *activeTurn, f Finish) error {
	if w.stoppingNow() {
		return w.store.Finish(ctx, at.t.Lease, f)
	}
	// Cleared before the claim, as claimSome clears it (and when it was
	// clear already, the commit looks for nothing else).
	f.ClaimIfLeft = !w.mayWait.Swap(false)
	next, err := w.store.FinishAndClaim(ctx, at.t.Lease, f, w.name, w.ttl)
	if err != nil || next != nil {
		// A failed commit claimed nothing, and a claim that found work
		// may have left more: either way other turns may wait.
		w.mayWait.Store(true)
	}
	if err != nil {
		return err
	}
	at.claimed = true
	if next != nil && w.stoppingNow() {
		w.handBack(next.Lease, "the worker stopped while claiming")
		next = nil
	}
	at.next = next
	return nil
}

// refusedFinish acks the entry with a notice in place of a result the
// store refused. Steered entries are not absorbed: their text was in the
// dropped history, so they run on their own.
func (w *TurnWorker) refusedFinish(at *activeTurn, f Finish, why error) Finish {
	target, _ := ReplyTarget(at.t.Entry.Inbound)
	text := noticeNotSaved
	if errs.Is(why, errs.TooLarge) {
		text = noticeTooLarge
	}
	notice := outbox.Message{Target: target, Text: text, ReplyTo: at.t.Entry.MessageID, Kind: KindNotice}
	return Finish{
		EntryID: f.EntryID,
		Outbox:  w.outboxOf(at, []outbox.Message{notice}),
		Release: f.Release,
	}
}

// drop acks an entry that was handed out too often without an ack, with a
// notice, so it stops taking workers down.
func (w *TurnWorker) drop(at *activeTurn) {
	at.settled.Store(true)
	at.logger().Error("dropping an entry handed out too often without an ack", "deliveries", at.t.Entry.Deliveries)
	target, _ := ReplyTarget(at.t.Entry.Inbound)
	notice := outbox.Message{
		Target: target, ReplyTo: at.t.Entry.MessageID, Kind: KindNotice,
		Text: noticeDropped(at.t.Entry.Deliveries - 1),
	}
	if w.commit(at, Finish{EntryID: at.t.Entry.ID, Outbox: w.outboxOf(at, []outbox.Message{notice}), Release: true}) {
		w.countFailed("dropped")
	}
}

// runControl runs a control entry: the Run of the command that queued it.
func (w *TurnWorker) runControl(at *activeTurn) {
	e := at.t.Entry
	name := e.Meta[MetaControl]
	target, _ := ReplyTarget(e.Inbound)
	_, args, _ := ParseCommand(e.Text)
	ct := &ControlTurn{Store: w.store, Lease: at.t.Lease, Entry: e, Name: name, Args: args, Target: target}
	cmd, ok := w.commands.Lookup(name)
	if !ok || cmd.Run == nil {
		// Queued by a process that knows a command this one does not:
		// answering beats leaving it to block the conversation.
		at.logger().Warn("no command runs this control entry; acking it", "command", name)
		ct.Reply(noticeUnknownCommand(name))
	} else if err := w.runCommand(at, cmd, ct); err != nil {
		at.settled.Store(true)
		at.logger().Error("a queued command failed; the entry waits for another run", "command", name, "err", err)
		w.countFailed("control")
		w.retryLater(at, "command failed")
		return
	}
	at.settled.Store(true)
	msgs := make([]outbox.Message, 0, len(ct.replies))
	for _, text := range ct.replies {
		msgs = append(msgs, outbox.Message{Target: target, Text: withActsOn(e.Inbound, text), ReplyTo: e.MessageID, Kind: KindCommand})
	}
	fin := Finish{EntryID: e.ID, Outbox: w.outboxOf(at, msgs), Release: true, Meta: ct.meta}
	if ct.clear {
		fin.DropHistory = DropAllHistory
	}
	if w.commit(at, fin) {
		at.logger().Info("queued command done", "command", name)
	}
}

func (w *TurnWorker) runCommand(at *activeTurn, cmd Command, ct *ControlTurn) (err error) {
	defer func() {
		if p := recover(); p != nil {
			at.logger().Error("a queued command panicked", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("command /%s panicked: %v", cmd.Name, p)
		}
	}()
	ctx, cancel := w.storeCtx()
	defer cancel()
	return cmd.Run(ctx, ct)
}
