package delegation

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/tracing"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// Defaults for DelivererOptions.
const (
	DefaultDeliverPoll     = time.Second
	DefaultDeliverClaimTTL = 30 * time.Second
	deliverBatch           = 16
	maxDeliverBackoff      = time.Minute
)

// KindCompletion is the outbox kind of a completion posted to the chat
// as a notice (for a conversation started anew since its dispatch).
const KindCompletion = "completion"

// Inbox takes a synthetic entry into its conversation's queue, as the
// router does (sessions.Router.Deliver): deduplicated by its message id.
type Inbox interface {
	Deliver(ctx context.Context, in sessions.Inbound) error
}

// DelivererOptions configure NewDeliverer.
type DelivererOptions struct {
	Store  Store        // required
	Inbox  Inbox        // required: where completions become turns
	Outbox outbox.Store // required: where a reset conversation's completion is posted
	// Meta reads a conversation's metadata (its session); required.
	Meta     func(ctx context.Context, conv string) (map[string]string, error)
	Name     string        // required
	ClaimTTL time.Duration // 0 means DefaultDeliverClaimTTL
	Poll     time.Duration // 0 means DefaultDeliverPoll
	Clock    clock.Clock
	Logger   *slog.Logger
}

// Deliverer brings completions back to their conversations: it claims a
// pending completion (any instance may), appends it to the parent's
// turn queue as a synthetic user-role message keyed by the completion's
// id, so a second delivery adds no second turn, and acks it only after
// the append. A delivery that fails is retried with backoff, forever: a
// completion is never given up on. It is a component: Start, Shutdown.
type Deliverer struct {
	opts DelivererOptions
	log  *slog.Logger
	wake chan struct{}
	loop bgloop.Loop
}

// NewDeliverer returns a deliverer. Errors: Invalid (a required option
// missing).
func NewDeliverer(opts DelivererOptions) (*Deliverer, error) {
	if opts.Store == nil || opts.Inbox == nil || opts.Outbox == nil || opts.Meta == nil || opts.Name == "" {
		return nil, errs.E("delegation.NewDeliverer", errs.Invalid, "a deliverer needs a store, an inbox, an outbox, a metadata reader and a name")
	}
	if opts.ClaimTTL <= 0 {
		opts.ClaimTTL = DefaultDeliverClaimTTL
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultDeliverPoll
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	d := &Deliverer{opts: opts, log: opts.Logger, wake: make(chan struct{}, 1)}
	if d.log == nil {
		d.log = slog.Default()
	}
	return d, nil
}

// Wake makes the deliverer look for pending completions now.
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Start runs the delivery loop until Shutdown. Errors: Conflict.
func (d *Deliverer) Start(ctx context.Context) error {
	return d.loop.Start(ctx, "delegation.Deliverer.Start", d.run)
}

// Shutdown stops the loop; a completion it claimed and did not deliver
// waits for its claim to run out, then any instance delivers it.
func (d *Deliverer) Shutdown(ctx context.Context) error { return d.loop.Stop(ctx) }

// run delivers what is due, then waits for a Wake, Poll at most.
func (d *Deliverer) run(ctx context.Context) {
	for {
		for d.DeliverDue(ctx) == deliverBatch {
		}
		t := d.opts.Clock.NewTimer(d.opts.Poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-d.wake:
		case <-t.C():
		}
		t.Stop()
	}
}

// DeliverDue claims the completions due and delivers each; it returns
// how many it claimed.
func (d *Deliverer) DeliverDue(ctx context.Context) int {
	claims, err := d.opts.Store.ClaimCompletions(ctx, d.opts.Name, deliverBatch, d.opts.ClaimTTL)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("claiming completions failed", "err", err)
		}
		return 0
	}
	for _, c := range claims {
		d.deliver(ctx, c)
	}
	return len(claims)
}

// deliver appends one completion to its conversation (or posts it as a
// notice to a conversation started anew), then acks it.
func (d *Deliverer) deliver(ctx context.Context, c CompletionClaim) {
	comp := c.Completion
	log := d.log.With("completion", comp.ID, "conv", comp.Conv)
	err := d.hand(ctx, comp)
	if errs.Is(err, errs.TooLarge) || errs.Is(err, errs.Invalid) {
		// The queue will never take it: it is shown to the chat, with why,
		// rather than retried forever.
		log.Error("the conversation's queue refused a completion; posting it as a notice", "err", err)
		err = d.notice(ctx, comp, "A background task finished, but its results could not be handed to the conversation ("+err.Error()+"):\n\n")
	}
	if err == nil {
		if err = d.opts.Store.AckCompletion(ctx, c); err == nil {
			log.Info("completion delivered", "results", len(comp.Results))
			return
		}
		if errs.Is(err, errs.LeaseLost) {
			// Another deliverer has it: its append is deduplicated.
			return
		}
	}
	if ctx.Err() != nil {
		return
	}
	after := min(time.Duration(1<<min(comp.Attempts, 6))*time.Second, maxDeliverBackoff)
	log.Warn("delivering a completion failed; retrying", "err", err, "attempts", comp.Attempts+1, "in", after)
	if rerr := d.opts.Store.RetryCompletion(ctx, c, after, err.Error()); rerr != nil && !errs.Is(rerr, errs.LeaseLost) {
		log.Warn("giving a completion back failed; its claim runs out", "err", rerr)
	}
}

func (d *Deliverer) hand(ctx context.Context, comp Completion) error {
	meta, err := d.opts.Meta(ctx, comp.Conv)
	if err != nil {
		return err
	}
	if meta[sessions.ConvMetaSession] != comp.Session {
		// The conversation was started anew: the session that asked
		// for the work is gone, so the result is shown, not run.
		return d.notice(ctx, comp, "A background task finished after this conversation was started anew:\n\n")
	}
	in := sessions.Inbound{
		Conv: comp.Conv, Kind: sessions.KindSynthetic, MessageID: comp.ID, User: comp.User,
		Text: CompletionText(comp),
		// Bound to the session that dispatched: a /new between now and
		// its turn shows it instead of running it.
		// Its turn continues the trace of the turn that dispatched.
		Meta: tracing.Inject(tracing.Extract(ctx, comp.Trace),
			map[string]string{sessions.MetaTarget: comp.Origin.String(), sessions.MetaSession: comp.Session}),
	}
	return d.opts.Inbox.Deliver(ctx, in)
}

// notice posts comp to its chat, headed by head, once (keyed by its id).
func (d *Deliverer) notice(ctx context.Context, comp Completion, head string) error {
	text := head + CompletionText(comp)
	if len(text) > noticeMax {
		text = text[:noticeMax] + "\n[cut]"
	}
	_, _, err := d.opts.Outbox.Enqueue(ctx, outbox.Message{
		Target: comp.Origin, Conv: comp.Conv, Kind: KindCompletion, Text: text, IdempotencyKey: comp.ID,
	})
	return err
}

// Bounds of what a completion's text may take encoded (JSON escapes
// "<" as six bytes): within the queue's entry limit
// (sessions.DefaultMaxEntryBytes, 256 KiB) with room for the rest of the
// entry, and a notice's share of the outbox's.
const (
	completionMax = 200 << 10
	noticeMax     = 64 << 10
)

// CompletionText is a completion as the parent model reads it: each
// child's status and its summary verbatim, unless together they would
// not fit in a queued entry: then each summary is cut to an equal share,
// saying so.
func CompletionText(c Completion) string {
	text := completionText(c, 0)
	if len(c.Results) == 0 || encodedLen(text) <= completionMax {
		return text
	}
	for share := completionMax / len(c.Results); share > 64; share = share * 3 / 4 {
		if text = completionText(c, share); encodedLen(text) <= completionMax {
			break
		}
	}
	return text
}

// encodedLen is what s takes in JSON.
func encodedLen(s string) int {
	b, _ := json.Marshal(s)
	return len(b)
}

// completionText is the text with each summary cut to share bytes (0:
// whole).
func completionText(c Completion, share int) string {
	var b strings.Builder
	done := len(c.Results)
	if c.Unit == "" {
		fmt.Fprintf(&b, "[Background results: delegation %s finished, %d of %d sub-agents]\n", c.Delegation, done, c.Total)
	} else {
		fmt.Fprintf(&b, "[Background results: delegation %s, %s finished (%d of the delegation's %d sub-agents)]\n", c.Delegation, c.Unit, done, c.Total)
	}
	for _, r := range c.Results {
		fmt.Fprintf(&b, "\n### Task %d (%s): %s\n", r.TaskIndex+1, r.ChildID, excerpt(r.Goal, 300))
		b.WriteString(ResultFacts(r))
		if r.Summary != "" {
			b.WriteString("\n" + cutBytes(r.Summary, share) + "\n")
		}
	}
	return b.String()
}

// cutBytes is s cut to at most n bytes on a character boundary, saying
// so; n of 0 or less keeps it whole.
func cutBytes(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "\n[summary cut so that every task's result fits in one message]"
}

// ResultFacts is what the parent needs to act on a child's result,
// beside its summary, one fact a line: its status and exit reason, its
// error, the timeout or stall that ended it, the worktree its changes
// are in, and what it spent.
func ResultFacts(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status: %s", r.Status)
	if r.ExitReason != "" {
		fmt.Fprintf(&b, ", exit: %s", r.ExitReason)
	}
	if r.Truncated {
		b.WriteString(" (truncated: it used its delegation.max_iterations model calls)")
	}
	if r.SchemaValid != nil {
		fmt.Fprintf(&b, ", schema_valid: %t", *r.SchemaValid)
		if len(r.SchemaErrors) > 0 {
			b.WriteString(" (" + strings.Join(r.SchemaErrors, "; ") + ")")
		}
	}
	if r.Error != "" {
		b.WriteString("\nerror: " + r.Error)
	}
	if r.Status == StatusTimedOut {
		fmt.Fprintf(&b, "\ntimeout: stopped after %d s; the limit is %d s (delegation.child_timeout_seconds), %s",
			r.TimedOutAfterSeconds, r.TimeoutSeconds, strings.ReplaceAll(r.TimeoutPhase, "_", " "))
	}
	if r.Status == StatusStalled {
		fmt.Fprintf(&b, "\nstall: no progress for %d s %s (threshold %d s), then %d s of grace to stop",
			r.StalledAfterQuietSecs, strings.ReplaceAll(r.StallPhase, "_", " "), r.StallThresholdSeconds, r.StallGraceSeconds)
	}
	if r.RetryAfterSeconds > 0 {
		fmt.Fprintf(&b, "\nretry_after: %d s (the model provider's)", r.RetryAfterSeconds)
	}
	if r.FreeSlots != nil {
		fmt.Fprintf(&b, "\nfree_slots: %d", *r.FreeSlots)
	}
	if w := r.Worktree; w != nil {
		b.WriteString("\nworktree: " + worktreeFacts(w))
	}
	if r.PendingSteer != "" {
		b.WriteString("\nsteers that did not land: " + strings.ReplaceAll(r.PendingSteer, "\n", " / "))
	}
	fmt.Fprintf(&b, "\nspent: %d API calls, %s input and %s output tokens", r.APICalls, thousands(r.InputTokens), thousands(r.OutputTokens))
	if r.Model != "" {
		b.WriteString(" on " + r.Model)
	}
	if r.CostUSD != nil {
		fmt.Fprintf(&b, ", $%.4f", *r.CostUSD)
	}
	fmt.Fprintf(&b, ", %s", time.Duration(r.DurationSeconds*float64(time.Second)).Round(time.Second))
	b.WriteString("\n")
	return b.String()
}

// worktreeFacts says where a child's changes are: the branch to merge,
// or why there are none to merge.
func worktreeFacts(w *Worktree) string {
	switch {
	case w.Skipped != "":
		return "none (it worked in the shared workspace: " + w.Skipped + ")"
	case w.Pruned:
		return "removed with its branch " + w.Branch + ": it changed nothing"
	}
	var left []string
	if w.Commits > 0 {
		left = append(left, fmt.Sprintf("%d commits on branch %s", w.Commits, w.Branch))
	} else {
		left = append(left, "no commits on branch "+w.Branch)
	}
	if w.Dirty {
		left = append(left, "uncommitted changes")
	} else {
		left = append(left, "nothing uncommitted")
	}
	return w.Path + " (kept: " + strings.Join(left, ", ") + "; merge or remove it)"
}
