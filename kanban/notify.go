package kanban

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// KindNotification is the outbox kind of a board's notifications.
const KindNotification = "kanban"

// DefaultNotifyEvents are the kinds a subscription with none sends.
var DefaultNotifyEvents = []string{EventCompleted, EventBlocked, EventGaveUp, EventCrashed, EventTimedOut, EventReview, EventApproved, EventUnblocked}

// NotifyEvents are the event kinds a subscription may name.
var NotifyEvents = []string{
	EventCreated, EventMoved, EventClaimed, EventSpawned, EventCompleted,
	EventBlocked, EventUnblocked, EventGaveUp, EventCrashed, EventTimedOut,
	EventReclaimed, EventRateLimited, EventReview, EventApproved, EventChanges,
	EventCommented, EventLinked, EventUnlinked, EventAssigned, EventPromoted,
	EventArchived, EventCheckFailed, EventSkippedUnassigned, EventSkippedNonspawnable,
	EventStranded, EventEdited, EventStopAsked,
}

// ParseNotifyEvents reads a subscription's event kinds from words, each
// a kind or a list of them separated by commas or spaces; repeats count
// once, and none is nil (the default set). Errors: Invalid, naming the
// kinds there are.
func ParseNotifyEvents(words ...string) ([]string, error) {
	var kinds []string
	for _, w := range words {
		for _, e := range strings.FieldsFunc(strings.ToLower(w), func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
			if !slices.Contains(NotifyEvents, e) {
				return nil, errs.E("kanban.ParseNotifyEvents", errs.Invalid, "%q is not an event kind; the kinds are %s", e, strings.Join(NotifyEvents, ", "))
			}
			if !slices.Contains(kinds, e) {
				kinds = append(kinds, e)
			}
		}
	}
	return kinds, nil
}

// newSubscriptionID returns a new subscription id: sub_ and 16 random
// hex digits.
func newSubscriptionID() string { return "sub_" + randomHex(8) }

// Subscribe stores s as a new subscription that hears of its board's
// events from now on: with a new id, the board's latest cursor, and the
// store's time as its making. Errors: the store's.
func Subscribe(ctx context.Context, st Store, s Subscription) (Subscription, error) {
	cursor, err := lastCursor(ctx, st, s.Board)
	if err != nil {
		return s, err
	}
	now, err := st.Now(ctx)
	if err != nil {
		return s, err
	}
	s.ID, s.Cursor, s.CreatedAt = newSubscriptionID(), cursor, now
	return st.PutSubscription(ctx, s)
}

// lastCursor is the cursor of board's latest event, "" when it has
// none: a subscription made with it hears of what happens from now on.
func lastCursor(ctx context.Context, s Store, board string) (string, error) {
	const page = 500
	after := ""
	for {
		evs, err := s.Events(ctx, EventQuery{Board: board, After: after, Limit: page})
		if err != nil {
			return "", err
		}
		if len(evs) > 0 {
			after = evs[len(evs)-1].Cursor
		}
		if len(evs) < page {
			return after, nil
		}
	}
}

// DefaultNotifyPoll is how often a notifier reads the boards' events.
const DefaultNotifyPoll = 2 * time.Second

// NotifierOptions configure NewNotifier.
type NotifierOptions struct {
	Store  Store        // required
	Outbox outbox.Store // required
	// Resolve turns a subscription's target into where its messages go
	// (a home channel is looked up when a message is sent, so a change
	// of it applies at once). Required.
	Resolve func(target string) ([]outbox.Target, error)
	Poll    time.Duration // 0: DefaultNotifyPoll
	Clock   clock.Clock
	Logger  *slog.Logger
}

// Notifier sends each subscription the events of its board it asked
// for, in order, each once: a message is queued in the outbox under a
// key made of the subscription and the event's cursor (so a second
// notifier, or this one after a restart, queues nothing twice), then the
// subscription's cursor moves past it (compare-and-set, so two never
// both move it). A subscription whose target cannot be resolved keeps
// its cursor, and is tried again. It is a component: Start, Shutdown.
type Notifier struct {
	opts NotifierOptions
	log  *slog.Logger
	wake chan struct{}

	loop   bgloop.Loop
	mu     sync.Mutex
	failed map[string]string // subscription → the reason last logged
}

// NewNotifier returns a notifier. Errors: Invalid.
func NewNotifier(opts NotifierOptions) (*Notifier, error) {
	if opts.Store == nil || opts.Outbox == nil || opts.Resolve == nil {
		return nil, errs.E("kanban.NewNotifier", errs.Invalid, "the notifier needs the store, the outbox and a target resolver")
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultNotifyPoll
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Notifier{opts: opts, log: opts.Logger, wake: make(chan struct{}, 1), failed: map[string]string{}}, nil
}

// Start starts the loop; it runs until Shutdown. Errors: Conflict
// (started before).
func (n *Notifier) Start(context.Context) error {
	return n.loop.Start(context.Background(), "kanban.Notifier.Start", n.run)
}

// Shutdown stops the loop.
func (n *Notifier) Shutdown(ctx context.Context) error { return n.loop.Stop(ctx) }

// Wake makes the notifier read the events now.
func (n *Notifier) Wake() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *Notifier) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := n.Send(ctx); err != nil && ctx.Err() == nil {
			n.log.Warn("sending kanban notifications failed; they are tried again", "err", err)
		}
		t := n.opts.Clock.NewTimer(n.opts.Poll)
		select {
		case <-t.C():
		case <-n.wake:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// Send queues what every subscription has not been sent yet.
func (n *Notifier) Send(ctx context.Context) error {
	subs, err := n.opts.Store.Subscriptions(ctx, "")
	if err != nil {
		return err
	}
	for _, s := range subs {
		if err := n.send(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// send queues s's events after its cursor, a page at a time, and moves
// its cursor past them.
func (n *Notifier) send(ctx context.Context, s Subscription) error {
	kinds := s.Events
	if len(kinds) == 0 {
		kinds = DefaultNotifyEvents
	}
	for {
		evs, err := n.opts.Store.Events(ctx, EventQuery{Board: s.Board, After: s.Cursor, Limit: 100})
		if err != nil || len(evs) == 0 {
			return err
		}
		targets, err := n.opts.Resolve(s.Target)
		if err != nil {
			n.once(s.ID, "a kanban subscription's target cannot be reached; its notifications wait", "subscription", s.ID, "target", s.Target, "err", err)
			return nil
		}
		n.clear(s.ID)
		for _, e := range evs {
			if !slices.Contains(kinds, e.Kind) {
				continue
			}
			text, err := n.text(ctx, e)
			if err != nil {
				return err
			}
			for _, t := range targets {
				m := outbox.Message{Target: t, Text: text, Kind: KindNotification,
					IdempotencyKey: "kanban:" + s.ID + ":" + e.Cursor + ":" + t.String()}
				if _, _, err := n.opts.Outbox.Enqueue(ctx, m); err != nil {
					return err
				}
			}
		}
		s.Cursor = evs[len(evs)-1].Cursor
		next, err := n.opts.Store.PutSubscription(ctx, s)
		if errs.Is(err, errs.Conflict) || errs.Is(err, errs.NotFound) {
			return nil // another notifier moved it, or it was removed
		}
		if err != nil {
			return err
		}
		s = next
	}
}

// text is how a notification reads.
func (n *Notifier) text(ctx context.Context, e Event) (string, error) {
	title := e.Card
	if k, err := n.opts.Store.Card(ctx, e.Card); err == nil {
		title = fmt.Sprintf("%s %q", k.ID, k.Title)
	} else if !errs.Is(err, errs.NotFound) {
		return "", err
	}
	what := map[string]string{
		EventCompleted: "is done", EventBlocked: "is blocked", EventGaveUp: "was given up on",
		EventCrashed: "crashed", EventTimedOut: "timed out", EventReview: "waits for review",
		EventUnblocked: "was unblocked", EventApproved: "was approved", EventChanges: "needs changes",
		EventArchived: "was archived",
	}[e.Kind]
	if what == "" {
		what = strings.ReplaceAll(e.Kind, "_", " ")
	}
	s := fmt.Sprintf("[%s] %s %s", e.Board, title, what)
	if e.Text != "" {
		s += ": " + tail(e.Text, 500)
	}
	return s, nil
}

// once logs a subscription's failure the first time it is seen.
func (n *Notifier) once(id, msg string, args ...any) {
	n.mu.Lock()
	seen := n.failed[id] == msg
	n.failed[id] = msg
	n.mu.Unlock()
	if !seen {
		n.log.Warn(msg, args...)
	}
}

func (n *Notifier) clear(id string) {
	n.mu.Lock()
	delete(n.failed, id)
	n.mu.Unlock()
}
