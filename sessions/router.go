package sessions

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"time"
	"unicode/utf8"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/signals"
)

// Keys of Inbound.Meta that herald itself reads.
const (
	// MetaTarget is where replies to the message go, as
	// "platform:chat[:thread]", when the conversation key alone does not
	// say it (a thread, a DM channel opened for the user).
	MetaTarget = "target"
	// MetaSystem is a system prompt the sender gave for this message
	// alone (the local API's "system" messages): the agent sends it after
	// its own system prompt, for this turn's model calls, and keeps it
	// out of the history.
	MetaSystem = "herald.system"
	// MetaControl marks a control entry: a queued command that the turn
	// worker hands to the command's Run instead of the agent. The router
	// drops it from what adapters deliver, so no message can pose as one.
	MetaControl = "herald.control"
	// MetaSession binds a synthetic entry to the conversation's session
	// it was made for (ConvMetaSession; "" is the first session): when
	// the conversation was started anew before its turn, it is shown to
	// the chat as a notice instead of run in a session that never asked
	// for it. The router drops it from user entries.
	MetaSession = "herald.session"
	// MetaPressed marks a press of a message's button (outbox.Button):
	// the entry's text is the button's Data, its sender the person who
	// pressed, and this key's value the platform's id of the message
	// whose button it was. Only adapters set it.
	MetaPressed = "herald.pressed"
)

// Keys of a conversation's metadata (Store.Meta) that the router and the
// turn worker read.
const (
	// ConvMetaBusyInputMode overrides the configured busy-input mode for
	// one conversation.
	ConvMetaBusyInputMode = "busy_input_mode"
	// ConvMetaTurn tells the conversation's running turn (a RunningTurn
	// in JSON), so a router in another process can tell /stop and
	// /status what runs. The store makes it from the conversation's
	// live lease and the entry handed out under it (TurnMark): no
	// process writes it, and it ends with the lease.
	ConvMetaTurn = "turn"
	// ConvMetaSession names the conversation's session: /new sets a new
	// one. Background work records it when dispatched, so a result that
	// comes back to a session started anew since is told apart.
	ConvMetaSession = "session"
	// ConvMetaFallback says a fallback model answered the conversation's
	// latest model call (an llm.ChainState in JSON: which, why the main
	// model did not, when); the turn's commit writes it, and clears it
	// when the main model answered. /status reads it.
	ConvMetaFallback = "model_fallback"
)

// KindCommand is the outbox kind of a command's answer; KindNotice is
// the kind of what a turn says about itself ("Stopped.").
const (
	KindCommand = "command"
	KindNotice  = "notice"
)

// BusyInputMode is what a message does when it arrives while its
// conversation's turn runs (display.busy_input_mode).
type BusyInputMode string

const (
	// BusyInterrupt cancels the running turn at its next safe point; the
	// new message runs next, with what the stopped turn did in its history.
	BusyInterrupt BusyInputMode = "interrupt"
	// BusyQueue waits until the running turn ends.
	BusyQueue BusyInputMode = "queue"
	// BusySteer feeds the text into the running turn after its next tool
	// result; a turn that ends before that leaves it to run on its own.
	BusySteer BusyInputMode = "steer"
)

// ParseBusyInputMode reads a mode name. Errors: Invalid.
func ParseBusyInputMode(s string) (BusyInputMode, error) {
	switch m := BusyInputMode(s); m {
	case BusyInterrupt, BusyQueue, BusySteer:
		return m, nil
	}
	return "", errs.E("sessions.ParseBusyInputMode", errs.Invalid, "busy-input mode %q is not interrupt, queue or steer", s)
}

// RunningTurn tells what a conversation's running turn answers.
type RunningTurn struct {
	EntryID string    `json:"entry"`
	Since   time.Time `json:"since"`          // when its lease was granted, by the store's clock
	Text    string    `json:"text,omitempty"` // the start of the entry's text
}

// TurnMark is the ConvMetaTurn a store's Meta tells while a live lease
// holds the conversation with entry in, id entryID, handed out under it
// since since: the running turn in JSON, or "" for a control entry,
// which runs no agent and takes no signal.
func TurnMark(entryID string, since time.Time, in Inbound) string {
	if _, ok := in.Meta[MetaControl]; ok {
		return ""
	}
	b, err := json.Marshal(RunningTurn{EntryID: entryID, Since: since, Text: excerpt(in.Text)})
	if err != nil {
		return ""
	}
	return string(b)
}

// TurnMarkOf is TurnMark of an entry as a store keeps it, body its
// encoding (EncodeInbound). An entry that does not decode still tells
// that a turn runs, and which: its text is left out.
func TurnMarkOf(entryID string, since time.Time, body []byte) string {
	var in Inbound
	_ = json.Unmarshal(body, &in)
	return TurnMark(entryID, since, in)
}

// excerptRunes bounds RunningTurn.Text: enough to recognise the message.
const excerptRunes = 60

func excerpt(s string) string {
	if utf8.RuneCountInString(s) <= excerptRunes {
		return s
	}
	r := []rune(s)
	return string(r[:excerptRunes-1]) + "…"
}

// ReplyTarget is where replies to in go: in.Meta[MetaTarget] when the
// adapter set it, else the conversation key read as a target.
// Errors: Invalid.
func ReplyTarget(in Inbound) (outbox.Target, error) {
	if t := in.Meta[MetaTarget]; t != "" {
		return outbox.ParseTarget(t)
	}
	return outbox.ParseTarget(in.Conv)
}

// RouterMetrics are hooks the gateway hangs its counters on; nil fields
// are skipped.
type RouterMetrics struct {
	Appended  func(kind Kind)         // an inbound was queued
	Duplicate func()                  // an inbound was a redelivery and added nothing
	Command   func(name string)       // a command was handled
	Signaled  func(kind signals.Kind) // a signal was sent to the running turn
}

// RouterOptions configure NewRouter.
type RouterOptions struct {
	Store  Store        // the turn queue; required
	Outbox outbox.Store // where command answers go; required
	// Signals carries stop, interrupt and steer to the process running a
	// conversation's turn. Nil reaches only the turns of Turns (one
	// process, no shared store).
	Signals signals.Store
	// Commands are the chat commands; nil means DefaultCommands(). Share
	// one registry with the turn worker.
	Commands *Commands
	// BusyInputMode is the default for conversations that set none;
	// empty means BusyInterrupt.
	BusyInputMode BusyInputMode
	// Turns is this process's turn worker, when it runs one: messages
	// are queued through it (TakeNow), so that one it has a turn free
	// for runs at once; it is woken when a message waits, and its
	// running turns are known without a store read.
	Turns *TurnWorker
	// Tailer is this process's signal tailer, poked after a signal so a
	// turn running here hears it at once.
	Tailer *signals.Tailer
	Clock  clock.Clock  // nil means the wall clock
	Logger *slog.Logger // nil means slog.Default()
	// Metrics are optional counters.
	Metrics RouterMetrics
}

// Router takes what adapters receive: it answers commands and queues
// messages, and tells a running turn about a new message as the
// conversation's busy-input mode says. It implements adapters.Inbox.
type Router struct {
	store    Store
	outbox   outbox.Store
	signals  signals.Store
	commands *Commands
	mode     BusyInputMode
	turns    *TurnWorker
	tailer   *signals.Tailer
	clock    clock.Clock
	log      *slog.Logger
	metrics  RouterMetrics
}

// NewRouter returns a router. Errors: Invalid (no store or outbox, an
// unknown busy-input mode).
func NewRouter(opts RouterOptions) (*Router, error) {
	const op = "sessions.NewRouter"
	if opts.Store == nil || opts.Outbox == nil {
		return nil, errs.E(op, errs.Invalid, "a router needs a store and an outbox")
	}
	r := &Router{
		store:    opts.Store,
		outbox:   opts.Outbox,
		signals:  opts.Signals,
		commands: opts.Commands,
		mode:     opts.BusyInputMode,
		turns:    opts.Turns,
		tailer:   opts.Tailer,
		clock:    opts.Clock,
		log:      opts.Logger,
		metrics:  opts.Metrics,
	}
	if r.mode == "" {
		r.mode = BusyInterrupt
	}
	if _, err := ParseBusyInputMode(string(r.mode)); err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	if r.commands == nil {
		r.commands = DefaultCommands()
	}
	if r.clock == nil {
		r.clock = clock.Real{}
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r, nil
}

// Commands returns the router's command registry.
func (r *Router) Commands() *Commands { return r.commands }

// Deliver takes one inbound. A message that starts with a known command
// is handled as that command; any other message (an unknown /word
// included) is queued for the agent. A redelivery of a message already
// queued succeeds and adds nothing. A nil error means the message is
// durable or answered: the adapter may tell the platform it got it.
// Errors: Invalid (bad conversation key, unknown kind, no reply target),
// TooLarge, and the store's errors.
func (r *Router) Deliver(ctx context.Context, in Inbound) error {
	_, err := r.DeliverReport(ctx, in)
	return err
}

// DeliverReport is Deliver, and also says whether in was a redelivery:
// its message id was seen within the dedupe window, so nothing was
// queued or answered again, and no stop of /stop or /new sent again. The
// local API uses it to find the answer it owes a retried completion.
func (r *Router) DeliverReport(ctx context.Context, in Inbound) (duplicate bool, err error) {
	if err := admit(&in); err != nil {
		return false, err
	}
	if in.Kind == KindSynthetic {
		// Synthetic entries wait for a turn boundary: they never touch
		// a running turn.
		return r.appendEntry(ctx, &in)
	}
	if duplicate, handled, err := r.deliverCommand(ctx, &in); handled {
		return duplicate, err
	}
	return r.route(ctx, &in, "")
}

// admit checks in for Deliver and drops from its metadata what only
// herald may set. It and deliverCommand are apart from DeliverReport so
// that their locals are off the goroutine's stack while the append waits
// on the store.
func admit(in *Inbound) error {
	const op = "sessions.Router.Deliver"
	if err := chat.ValidateConv(op, in.Conv); err != nil {
		return err
	}
	switch in.Kind {
	case "", KindUser, KindSynthetic:
	default:
		return errs.E(op, errs.Invalid, "unknown entry kind %q", in.Kind)
	}
	if _, err := ReplyTarget(*in); err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	if _, ok := in.Meta[MetaControl]; ok {
		in.Meta = maps.Clone(in.Meta)
		delete(in.Meta, MetaControl)
	}
	if _, ok := in.Meta[MetaSession]; ok && in.Kind != KindSynthetic {
		in.Meta = maps.Clone(in.Meta)
		delete(in.Meta, MetaSession)
	}
	if _, ok := in.Meta[MetaActsOn]; ok {
		in.Meta = maps.Clone(in.Meta)
		delete(in.Meta, MetaActsOn)
	}
	return nil
}

// deliverCommand notes in as its conversation's latest message and,
// when it is a known chat command, handles it (handled true).
func (r *Router) deliverCommand(ctx context.Context, in *Inbound) (duplicate, handled bool, err error) {
	r.noteLatest(ctx, *in)
	if name, args, ok := ParseCommand(in.Text); ok {
		if cmd, ok := r.commands.Lookup(name); ok {
			duplicate, err = r.command(ctx, cmd, r.toLatest(ctx, *in), args)
			return duplicate, true, err
		}
	}
	return false, false, nil
}

func (r *Router) command(ctx context.Context, cmd Command, in Inbound, args string) (duplicate bool, err error) {
	if f := r.metrics.Command; f != nil {
		f(cmd.Name)
	}
	r.log.InfoContext(ctx, "command", "conv", in.Conv, "command", cmd.Name, "message_id", in.MessageID)
	if cmd.OutOfBand {
		target, _ := ReplyTarget(in) // checked by Deliver
		c := &CommandCall{Router: r, In: in, Name: cmd.Name, Args: args, Target: target}
		err := cmd.Handle(ctx, c)
		return c.Redelivered(), err
	}
	in.Meta = maps.Clone(in.Meta)
	if in.Meta == nil {
		in.Meta = map[string]string{}
	}
	in.Meta[MetaControl] = cmd.Name
	return r.route(ctx, &in, "")
}

// route queues in and, when a turn of the conversation runs, tells it
// as mode says; an empty mode means the conversation's own (/queue and
// /steer force theirs). The conversation's metadata comes back from the
// append, so a message costs the store one call.
func (r *Router) route(ctx context.Context, in *Inbound, mode BusyInputMode) (duplicate bool, err error) {
	res, started, err := r.append(ctx, in)
	if err != nil || res.Duplicate || started {
		// A turn that started with the append runs this very entry.
		return res.Duplicate, err
	}
	r.tellRunning(ctx, in, mode, &res)
	return false, nil
}

// tellRunning tells a running turn of in's conversation of in, queued
// as res says, as mode says. It is apart from route so that its locals
// are off the goroutine's stack while the append waits on the store.
func (r *Router) tellRunning(ctx context.Context, in *Inbound, mode BusyInputMode, res *AppendResult) {
	meta := res.Meta
	if mode == "" {
		mode = r.busyMode(meta)
	}
	if mode == BusyQueue {
		return
	}
	// The wake above may have started the turn of this very entry. A
	// lease in another process with no entry handed out yet is known only
	// as held: its turn is told all the same (a turn ignores a signal
	// about its own entry, or older than its claim).
	rt, running := r.runningTurnIn(in.Conv, meta)
	if running && rt.EntryID == res.EntryID || !running && !res.Held {
		return
	}
	s := signals.Signal{Conv: in.Conv, Kind: signals.Interrupt, EntryID: res.EntryID}
	if mode == BusySteer {
		if len(in.Attachments) > 0 || in.Meta[MetaControl] != "" {
			// A steer carries text only; a message with files, or a
			// command, keeps its place in the queue whole instead.
			return
		}
		s.Kind, s.Text, s.MessageID = signals.Steer, in.Text, in.MessageID
	}
	// The message is durable already; a signal that does not go out only
	// means the message waits for the running turn.
	if err := r.signal(ctx, s); err != nil {
		r.log.WarnContext(ctx, "signal to the running turn failed; the message waits its turn",
			"conv", in.Conv, "entry", res.EntryID, "signal", string(s.Kind), "err", err)
	}
}

// appendEntry queues in without telling a running turn.
func (r *Router) appendEntry(ctx context.Context, in *Inbound) (duplicate bool, err error) {
	res, _, err := r.append(ctx, in)
	return res.Duplicate, err
}

// append queues in. When this process runs turns and has one free, the
// store may start in's turn in the same call (AppendClaim), and started
// says it did: the entry runs here at once, without a claim of its own.
func (r *Router) append(ctx context.Context, in *Inbound) (res AppendResult, started bool, err error) {
	if r.turns != nil {
		res, started, err = r.turns.TakeNow(ctx, r.store, *in)
	} else {
		res, err = r.store.Append(ctx, *in)
	}
	if err != nil {
		return res, false, err
	}
	if res.Duplicate {
		r.countDuplicate(ctx, in)
		return res, false, nil
	}
	r.appended(in, !started)
	return res, started, nil
}

// appendControl queues a control entry for command name, answered by the
// command's Run at its turn.
func (r *Router) appendControl(ctx context.Context, in Inbound, name string, prio Priority) (duplicate bool, err error) {
	in.Meta = maps.Clone(in.Meta)
	if in.Meta == nil {
		in.Meta = map[string]string{}
	}
	in.Meta[MetaControl] = name
	in.Kind, in.Priority = KindUser, prio
	return r.appendEntry(ctx, &in)
}

// appended counts a queued entry and, when it waits, wakes the turn
// worker to claim it.
func (r *Router) appended(in *Inbound, waits bool) {
	if f := r.metrics.Appended; f != nil {
		kind := in.Kind
		if kind == "" {
			kind = KindUser
		}
		f(kind)
	}
	if waits && r.turns != nil {
		r.turns.Wake()
	}
}

func (r *Router) countDuplicate(ctx context.Context, in *Inbound) {
	r.log.DebugContext(ctx, "redelivered message ignored", "conv", in.Conv, "message_id", in.MessageID)
	if f := r.metrics.Duplicate; f != nil {
		f()
	}
}

// signal sends s to whoever runs s.Conv's turn: through the store when
// there is one, else straight to this process's turns.
func (r *Router) signal(ctx context.Context, s signals.Signal) error {
	if f := r.metrics.Signaled; f != nil {
		f(s.Kind)
	}
	r.log.InfoContext(ctx, "signal", "conv", s.Conv, "signal", string(s.Kind), "entry", s.EntryID)
	if r.signals == nil {
		if r.turns != nil {
			r.turns.HandleSignal(s) // a zero At: it applies to what runs now
		}
		return nil
	}
	if err := r.signals.Signal(ctx, s); err != nil {
		return err
	}
	if r.tailer != nil {
		r.tailer.Poke()
	}
	return nil
}

// meta reads the conversation's metadata. A failed read leaves the
// defaults: queuing the message matters more than its mode.
func (r *Router) meta(ctx context.Context, conv string) map[string]string {
	meta, err := r.store.Meta(ctx, conv)
	if err != nil {
		r.log.WarnContext(ctx, "reading conversation metadata failed; using the defaults", "conv", conv, "err", err)
		return nil
	}
	return meta
}

func (r *Router) busyMode(meta map[string]string) BusyInputMode {
	if m, err := ParseBusyInputMode(meta[ConvMetaBusyInputMode]); err == nil {
		return m
	}
	return r.mode
}

// runningTurn tells whether a turn of conv runs, and what it answers.
func (r *Router) runningTurn(ctx context.Context, conv string) (RunningTurn, bool) {
	if r.turns != nil {
		if rt, ok := r.turns.RunningTurn(conv); ok {
			return rt, true
		}
	}
	return r.runningTurnIn(conv, r.meta(ctx, conv))
}

// runningTurnIn is runningTurn with the metadata already read. This
// process's own turns are known exactly; another process's by the lease
// the metadata tells of (ConvMetaTurn).
func (r *Router) runningTurnIn(conv string, meta map[string]string) (RunningTurn, bool) {
	if r.turns != nil {
		if rt, ok := r.turns.RunningTurn(conv); ok {
			return rt, true
		}
	}
	raw := meta[ConvMetaTurn]
	if raw == "" {
		return RunningTurn{}, false
	}
	var rt RunningTurn
	if err := json.Unmarshal([]byte(raw), &rt); err != nil {
		return RunningTurn{}, true // a mark we cannot read still says a turn runs
	}
	return rt, true
}

// notify answers in at once with text, through the outbox. The message
// id makes the answer's idempotency key, so a redelivered command is not
// answered twice.
func (r *Router) notify(ctx context.Context, in Inbound, target outbox.Target, text string) (duplicate bool, err error) {
	m := outbox.Message{Target: target, Conv: in.Conv, Text: withActsOn(in, text), ReplyTo: in.MessageID, Kind: KindCommand}
	if in.MessageID != "" {
		m.IdempotencyKey = "command:" + in.Conv + ":" + in.MessageID
	}
	_, duplicate, err = r.outbox.Enqueue(ctx, m)
	return duplicate, err
}
