package gateway

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// Defaults for DeliveryOptions.
const (
	DefaultSenders     = 8
	DefaultBatch       = 256
	DefaultClaimTTL    = time.Minute
	DefaultSendTimeout = 20 * time.Second
	DefaultMaxAttempts = 12
	DefaultBackoffMin  = time.Second
	DefaultBackoffMax  = 5 * time.Minute
	DefaultRouteRetry  = 5 * time.Second
	DefaultPollMin     = 5 * time.Millisecond
	DefaultPollMax     = 250 * time.Millisecond
	DefaultAckLinger   = 2 * time.Millisecond
)

// storeTimeout bounds one outbox write made after a send. It runs on a
// context that shutdown does not cancel: a message the platform accepted
// must be acked even while the process stops.
const storeTimeout = 10 * time.Second

// maxHeld bounds the messages one worker holds claimed at once, however
// fast its sends.
const maxHeld = 4096

// claimMargin is the part of a claim kept free at its end (a fifth of a
// short claim): a send must return, and its ack reach the store, before
// the claim runs out and another worker may send the message again.
const claimMargin = 2 * time.Second

// DeliveryOptions configure NewDelivery.
type DeliveryOptions struct {
	Outbox outbox.Store // required
	Routes *Routes      // the adapters that can send; required
	// Name identifies this process's claims; empty means host-pid-random.
	Name string
	// Senders is how many messages are sent at once (workers.deliveries);
	// 0 means DefaultSenders.
	Senders int
	// Batch bounds the messages one claim takes; 0 means DefaultBatch.
	// However large, the worker holds no more messages than its senders
	// send in a quarter of ClaimTTL, by how long sends have taken, and no
	// more than Senders until it has timed a send.
	Batch int
	// ClaimTTL is how long a claimed message is held before another
	// worker may send it; 0 means DefaultClaimTTL.
	ClaimTTL time.Duration
	// SendTimeout bounds one adapter Send (and is cut shorter when the
	// claim, or the heartbeat as last renewed, would run out first); 0
	// means DefaultSendTimeout.
	SendTimeout time.Duration
	// MaxAttempts is how many failed sends (transient or rate limited) a
	// message gets before it is dead-lettered; 0 means DefaultMaxAttempts.
	MaxAttempts int
	// BackoffMin and BackoffMax bound the wait after a transient failure:
	// BackoffMin after the first, doubling with each attempt up to
	// BackoffMax. 0 means the defaults.
	BackoffMin, BackoffMax time.Duration
	// RouteRetry is how long a message whose route went away waits before
	// it is tried again; 0 means DefaultRouteRetry.
	RouteRetry time.Duration
	// PollMin and PollMax bound the wait between claims while nothing is
	// due: it starts at PollMin and doubles up to PollMax. Notify ends the
	// wait at once. 0 means the defaults.
	PollMin, PollMax time.Duration
	// AckLinger is how long the first ack of a batch waits for others to
	// join it (see delivery_ack.go); 0 means DefaultAckLinger.
	AckLinger time.Duration
	// Heartbeat, when positive, is how long the worker's heartbeat in the
	// store holds (outbox.Store.Beat), renewed every third of it: once it
	// runs out, as when the process dies, another worker's claim ends this
	// one's claims at once instead of when they run out. A claim that
	// takes messages renews it too. Past the last renewal's end (less a
	// margin) the worker sends nothing it holds, as another worker may
	// have taken it. 0 beats nothing.
	Heartbeat time.Duration
	// Redact masks herald's secrets in a message's text before it is sent
	// (a reply, a cron report, a kanban notification: whatever put it in
	// the outbox), and in a platform's failure reason before it is stored
	// or logged; nil keeps them as they are.
	Redact func(string) string
	// Settled is told, on a goroutine of its own, how the delivery of
	// each message with a Ref ended: accepted by its platform, or
	// dead-lettered with reason. The domain that sent it (a cron run)
	// records it.
	Settled func(m outbox.Message, accepted bool, reason string)
	// Streamed, when set, is offered each message before the adapter's
	// Send: a turn's reply this process showed in progress is made the
	// reply in that message (Streaming.Send). It reports false when the
	// adapter's Send is to send the message.
	Streamed func(ctx context.Context, a adapters.Adapter, m outbox.Message) (adapters.SendResult, bool)
	Clock    clock.Clock  // nil means the wall clock
	Logger   *slog.Logger // nil means slog.Default()
	Metrics  *Metrics     // nil counts nothing
}

// Delivery drains the outbox through the adapters: one claim loop takes
// due messages for the platforms that have a route and hands them to up to
// Senders senders. Messages to one target are sent one after another, in
// the order claimed, so a conversation's replies arrive in order; when one
// has to wait (rate limit, backoff, no route), those behind it in this
// process wait with it.
type Delivery struct {
	outbox      outbox.Store
	routes      *Routes
	name        string
	batch       int
	claimTTL    time.Duration
	margin      time.Duration
	sendTimeout time.Duration
	maxAttempts int
	retry       adapters.Backoff // between a failed message's attempts
	routeRetry  time.Duration
	pollMin     time.Duration
	pollMax     time.Duration
	ackLinger   time.Duration
	beat        *lease.Renewer // nil without a heartbeat
	heartbeat   time.Duration  // how long one beat holds; 0 without
	beatMargin  time.Duration  // the part of a beat kept free at its end, as margin is of a claim
	redact      func(string) string
	settledFn   func(m outbox.Message, accepted bool, reason string)
	streamed    func(ctx context.Context, a adapters.Adapter, m outbox.Message) (adapters.SendResult, bool)
	clock       clock.Clock
	log         *slog.Logger
	metrics     *Metrics

	wake  chan struct{} // a token asks the claim loop to claim now
	slots chan struct{} // one token per sender goroutine
	room  chan struct{} // a token: a held message was settled, so the loop may claim again

	mu       sync.Mutex
	lanes    map[string]*lane // by target: the sender draining it, or waiting for one
	waiting  []*lane          // lanes with messages and no sender yet, in the order claimed
	held     int              // claimed messages not yet settled
	promised int              // room kept for the replies of commits in flight (Handoff)
	sendAvg  time.Duration    // how long a send takes, a moving average; 0 until one was timed
	// backs records, by target, the last message handed back unsent (see
	// backMark), numbered by backSeq: a claim or a handoff that began
	// before it may hold messages behind it, taken while it was still
	// held here, that must not be sent before it.
	backs    map[string]backMark
	backSeq  uint64
	started  bool
	stopping bool

	// notified counts Notify calls, and claimedTo is the count at which
	// the last claim that took every due message began: while they
	// differ, a message enqueued here may wait unclaimed, and a commit's
	// replies to its target must not pass it (see Handoff).
	notified, claimedTo uint64

	stop       chan struct{}   // closed by Shutdown: claim no more
	ended      bool            // the loop returned: no sender starts any more
	base       context.Context // Start's context without its cancellation, for store writes
	hard       context.Context // cancelled when sends must end now
	hardCancel context.CancelFunc
	senders    sync.WaitGroup
	tellers    sync.WaitGroup // the Settled calls running
	warned     time.Time      // the last claim failure logged
	// beatAt is when the last write that kept the heartbeat (a Beat or a
	// Claim) began: once beatAt+heartbeat has passed, another worker's
	// claim may have ended every claim of this one. Under beatMu, as Start
	// beats under mu.
	beatMu sync.Mutex
	beatAt time.Time

	// The acks of accepted messages, written by the acker (see
	// delivery_ack.go).
	ackMu       sync.Mutex
	ackQueue    []acceptedMsg
	ackWake     chan struct{} // a token: acks are queued
	sendersDone chan struct{} // closed once the loop returned and every sender ended
	ackDone     chan struct{} // closed when the acker returned
}

// lane is the queue of claimed messages for one target, drained by one
// sender.
type lane struct {
	target string
	queue  []outbox.Claimed
	// stalled is set once a message of the lane was handed back unsent:
	// the messages behind it are handed back too, due at hold or later,
	// so that none overtakes it. The store claims them again only after
	// it.
	stalled bool
	hold    time.Time
}

// backMark is a hand-back of a message to a target: its number and when
// the message is due again.
type backMark struct {
	seq  uint64
	hold time.Time
	at   time.Time // when it was recorded, to forget it
}

// NewDelivery returns a delivery worker; Start runs it. Errors: Invalid
// (no outbox or routes).
func NewDelivery(opts DeliveryOptions) (*Delivery, error) {
	if opts.Outbox == nil || opts.Routes == nil {
		return nil, errs.E("gateway.NewDelivery", errs.Invalid, "a delivery worker needs an outbox and routes")
	}
	d := &Delivery{
		outbox:      opts.Outbox,
		routes:      opts.Routes,
		name:        opts.Name,
		batch:       opts.Batch,
		claimTTL:    orDefault(opts.ClaimTTL, DefaultClaimTTL),
		sendTimeout: orDefault(opts.SendTimeout, DefaultSendTimeout),
		maxAttempts: opts.MaxAttempts,
		retry:       adapters.Backoff{Min: orDefault(opts.BackoffMin, DefaultBackoffMin), Max: orDefault(opts.BackoffMax, DefaultBackoffMax)},
		routeRetry:  orDefault(opts.RouteRetry, DefaultRouteRetry),
		pollMin:     orDefault(opts.PollMin, DefaultPollMin),
		pollMax:     orDefault(opts.PollMax, DefaultPollMax),
		ackLinger:   orDefault(opts.AckLinger, DefaultAckLinger),
		redact:      opts.Redact,
		settledFn:   opts.Settled,
		streamed:    opts.Streamed,
		clock:       opts.Clock,
		log:         opts.Logger,
		metrics:     opts.Metrics,
		wake:        make(chan struct{}, 1),
		room:        make(chan struct{}, 1),
		lanes:       map[string]*lane{},
		backs:       map[string]backMark{},
		stop:        make(chan struct{}),
		ackWake:     make(chan struct{}, 1),
		sendersDone: make(chan struct{}),
		ackDone:     make(chan struct{}),
	}
	senders := opts.Senders
	if senders <= 0 {
		senders = DefaultSenders
	}
	d.slots = make(chan struct{}, senders)
	if d.batch <= 0 {
		d.batch = DefaultBatch
	}
	if d.maxAttempts <= 0 {
		d.maxAttempts = DefaultMaxAttempts
	}
	d.margin = min(claimMargin, d.claimTTL/5)
	d.pollMax = max(d.pollMax, d.pollMin)
	if d.redact == nil {
		d.redact = func(s string) string { return s }
	}
	if d.clock == nil {
		d.clock = clock.Real{}
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	if d.name == "" {
		d.name = processName()
	}
	d.log = d.log.With("worker", d.name)
	if opts.Heartbeat > 0 {
		var err error
		d.heartbeat = opts.Heartbeat
		d.beatMargin = min(d.margin, d.heartbeat/6)
		d.beat, err = lease.NewRenewer(lease.RenewerOptions{
			Renew: func(ctx context.Context, held []lease.Claim, ttl time.Duration) ([]lease.Claim, error) {
				at := d.clock.Now()
				err := d.outbox.Beat(ctx, d.name, ttl)
				if err == nil {
					d.beaten(at)
				}
				// A failed beat loses nothing here: until it holds again,
				// the senders see it by beatAt (see until).
				return held, err
			},
			TTL: opts.Heartbeat, Clock: d.clock, Logger: d.log,
		})
		if err != nil {
			return nil, err
		}
		d.beat.Hold(lease.Claim{Name: "heartbeat", Owner: d.name})
	}
	return d, nil
}

// processName names this process among the cluster's workers.
func processName() string {
	host, _ := os.Hostname()
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + uuid.NewString()[:8]
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Start starts the claim loop. Ending ctx stops the worker hard: sends in
// progress are cancelled and their messages handed back. Use Shutdown to
// stop gracefully. Errors: Conflict (started before).
func (d *Delivery) Start(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started {
		return errs.E("gateway.Delivery.Start", errs.Conflict, "the delivery worker was started before")
	}
	d.started = true
	d.base = context.WithoutCancel(ctx)
	d.hard, d.hardCancel = context.WithCancel(ctx)
	if d.beat != nil {
		// The first beat before the first claim; the renewer keeps it.
		if err := d.beat.RenewNow(ctx); err != nil {
			d.log.Warn("the delivery worker's first heartbeat failed; retrying", "err", err)
		}
		if err := d.beat.Start(ctx); err != nil {
			return err
		}
	}
	go d.loop()
	go d.acker()
	return nil
}

// Shutdown drains: the worker goes on claiming while messages are due and
// stops at the first claim that finds none, and the senders finish what
// they hold. When ctx ends first, sends in progress are cancelled and
// every message still held is handed back, due at once, for another
// process. It returns when every sender has ended.
func (d *Delivery) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	if !d.started || d.stopping {
		d.stopping = true
		d.mu.Unlock()
		return nil
	}
	d.stopping = true
	close(d.stop)
	d.mu.Unlock()

	// The acker returns after the last sender, once it wrote their acks.
	defer d.tellers.Wait()
	defer d.leave()
	select {
	case <-d.ackDone:
		d.hardCancel()
		return nil
	case <-ctx.Done():
	}
	d.hardCancel()
	// The senders now only write hand-backs, and the acker the acks
	// queued, each bounded by storeTimeout; an adapter that ignores its
	// context could hold one longer.
	stuck := time.NewTimer(2*storeTimeout + time.Second)
	defer stuck.Stop()
	select {
	case <-d.ackDone:
		return nil
	case <-stuck.C:
		return errs.E("gateway.Delivery.Shutdown", errs.Internal, "a sender did not end after its send was cancelled")
	}
}

// leave stops the heartbeat once nothing is sent any more, and tells the
// store this worker is gone: what it still holds (a write that failed)
// runs out as any claim does.
func (d *Delivery) leave() {
	if d.beat == nil {
		return
	}
	_ = d.beat.Shutdown(context.Background())
	ctx, cancel := context.WithTimeout(d.base, storeTimeout)
	defer cancel()
	if err := d.outbox.Beat(ctx, d.name, 0); err != nil {
		d.log.Warn("ending the delivery worker's heartbeat failed; it runs out", "err", err)
	}
}

// Notify makes the claim loop claim now instead of at its next poll: a
// turn committed a reply, or a command answer was queued. Until a claim
// has taken what was queued, commits' replies are not handed over (see
// Handoff), so they do not pass it.
func (d *Delivery) Notify() {
	d.mu.Lock()
	d.notified++
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Handoff returns a sessions.Handoff for a commit about to enqueue msgs,
// so that they are enqueued claimed by this worker and sent at once,
// without a claim of their own; nil when the worker cannot take them now
// (not running, no room, a platform without a route here), and they are
// enqueued due, for whichever worker claims them. The caller calls done
// once the commit has returned, saying whether it committed: the room
// kept for the messages meanwhile (so that commits running at once never
// take more than the worker may hold) is given back, and the worker is
// woken for those of them a commit enqueued due instead.
func (d *Delivery) Handoff(msgs []outbox.Message) (h *sessions.Handoff, done func(committed bool)) {
	n := len(msgs)
	done = func(committed bool) {
		if committed && n > 0 {
			d.Notify()
		}
	}
	if n == 0 || !d.routed(msgs) {
		return nil, done
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// Replies handed over are sent at once, so they would pass a message
	// enqueued here earlier that the loop has not claimed yet (a command's
	// answer beside the turn's own notice): until it has, commits enqueue
	// theirs due, behind it.
	if !d.started || d.stopping || d.ended || d.notified != d.claimedTo || d.roomLeftLocked() < n {
		return nil, done
	}
	d.promised += n
	handed := 0 // set by Claimed, on the committing goroutine, before done
	since := d.backSeq
	h = &sessions.Handoff{Worker: d.name, TTL: d.claimTTL, Claimed: func(cs []outbox.Claimed) {
		handed = len(cs)
		d.handed(cs, since)
	}}
	done = func(committed bool) {
		d.mu.Lock()
		d.promised -= n
		d.mu.Unlock()
		d.signalRoom()
		if committed && handed < n {
			d.Notify()
		}
	}
	return h, done
}

// routed reports whether every one of msgs has a route here.
func (d *Delivery) routed(msgs []outbox.Message) bool {
	for _, m := range msgs {
		if _, ok := d.routes.Get(m.Target.Platform); !ok {
			return false
		}
	}
	return true
}

// handed takes the claims a commit made for this worker (see Handoff) as
// if its own loop had claimed them; since is backSeq when the commit
// began.
func (d *Delivery) handed(claimed []outbox.Claimed, since uint64) {
	if len(claimed) == 0 {
		return
	}
	d.mu.Lock()
	if !d.stopping && !d.ended {
		// Under the lock Shutdown sets stopping and the loop's end sets
		// ended under: a sender this starts is one Shutdown waits for.
		d.dispatchLocked(claimed, since)
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	// The worker began stopping while the commit ran, or its context
	// ended, and its loop may have returned, after which no sender
	// starts: the messages go back,
	// due at once, for whichever worker claims next.
	now := d.clock.Now()
	for _, c := range claimed {
		d.postpone(c, now, "the delivery worker is stopping")
	}
}

// loop is the one claim loop. It claims only as many messages as the
// senders will have sent well before the claims run out (see room), so
// no claim waits in this process while its time runs out. Once stopped,
// it returns at the first claim that finds nothing due.
func (d *Delivery) loop() {
	defer func() {
		// No sender starts once ended is set, so the Wait sees them all.
		d.mu.Lock()
		d.ended = true
		d.mu.Unlock()
		d.senders.Wait()
		close(d.sendersDone)
	}()
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	wait := time.Duration(0)
	for {
		n := d.roomLeft()
		if n == 0 {
			select {
			case <-d.room:
				continue
			case <-d.hard.Done():
				return
			}
		}
		d.mu.Lock()
		mark, since := d.notified, d.backSeq
		d.mu.Unlock()
		claimed, all := d.claim(min(n, d.batch))
		d.mu.Lock()
		d.dispatchLocked(claimed, since)
		if all {
			// Every message due when the claim began is claimed now.
			d.claimedTo = mark
		}
		d.mu.Unlock()
		if len(claimed) > 0 {
			wait = 0
			continue
		}
		select {
		case <-d.stop:
			return
		default:
		}
		wait = min(max(wait*2, d.pollMin), d.pollMax)
		idle.Reset(wait)
		select {
		case <-d.wake:
			wait = 0
		case <-idle.C:
		case <-d.stop:
			// One more claim finds what became due meanwhile.
		case <-d.hard.Done():
			idle.Stop()
			return
		}
		idle.Stop()
	}
}

// roomLeft is how many more messages the worker may claim now: it holds
// no more than its senders send in a quarter of a claim, going by how
// long sends have taken, so a claimed message does not wait in this
// process until its claim runs out. Until a send was timed it holds one
// a sender.
func (d *Delivery) roomLeft() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.roomLeftLocked()
}

// roomLeftLocked is roomLeft with d.mu held. The room promised to
// commits in flight counts as taken.
func (d *Delivery) roomLeftLocked() int {
	senders := cap(d.slots)
	capacity := senders
	if d.sendAvg > 0 {
		capacity = int(min(int64(maxHeld), int64(senders)*int64(d.claimTTL/4)/int64(d.sendAvg)))
	}
	return max(0, max(capacity, senders)-d.held-d.promised)
}

// timed adds a send's duration to the moving average.
func (d *Delivery) timed(took time.Duration) {
	took = max(took, time.Microsecond)
	d.mu.Lock()
	if d.sendAvg == 0 {
		d.sendAvg = took
	} else {
		d.sendAvg += (took - d.sendAvg) / 8
	}
	d.mu.Unlock()
}

// claim takes up to n due messages for the platforms with a route, and
// reports whether it took all that were due: it got fewer than n.
func (d *Delivery) claim(n int) (claimed []outbox.Claimed, all bool) {
	platforms := d.routes.Platforms()
	if len(platforms) == 0 {
		return nil, false
	}
	at := d.clock.Now()
	claimed, err := d.outbox.Claim(d.hard, d.name, platforms, n, d.claimTTL)
	if err == nil && len(claimed) > 0 {
		// A claim that took messages kept the heartbeat as a Beat does.
		d.beaten(at)
	}
	if err != nil {
		if d.hard.Err() == nil {
			// The store may stay away for a while; one line in a while
			// says so without flooding the log at the poll rate.
			if now := d.clock.Now(); now.Sub(d.warned) >= 30*time.Second {
				d.warned = now
				d.log.Warn("claiming outbox messages failed", "err", err)
			}
		}
		return nil, false
	}
	if !d.warned.IsZero() {
		d.warned = time.Time{}
		d.log.Info("claiming outbox messages works again")
	}
	return claimed, len(claimed) < n
}

// dispatchLocked puts each claimed message in its target's lane; a new
// lane waits for a sender, and a sender starts for each waiting lane while
// fewer than Senders run. since is backSeq when the claim began: a new
// lane of a target whose message was handed back since starts stalled,
// as its lane was, since the store gave its messages out behind that one
// while this worker still held it. So does one whose hand-back is not due
// yet, whenever it was: the write of one that failed left the message
// claimed here until its claim runs out, and the store gives out the
// messages behind it meanwhile. d.mu is held.
func (d *Delivery) dispatchLocked(claimed []outbox.Claimed, since uint64) {
	now := d.clock.Now()
	for _, c := range claimed {
		d.held++
		key := c.Target.String()
		if l, ok := d.lanes[key]; ok {
			l.queue = append(l.queue, c)
			continue
		}
		l := &lane{target: key, queue: []outbox.Claimed{c}}
		if b, ok := d.backs[key]; ok && (b.seq > since || b.hold.After(now)) {
			l.stalled, l.hold = true, b.hold
		}
		d.lanes[key] = l
		d.waiting = append(d.waiting, l)
	}
	for len(d.waiting) > 0 {
		select {
		case d.slots <- struct{}{}:
		default:
			return
		}
		l := d.waiting[0]
		d.waiting = d.waiting[1:]
		d.senders.Add(1)
		go d.drain(l)
	}
}

// drain sends l's messages in order until its queue is empty, then takes
// the next waiting lane, and returns when none waits.
func (d *Delivery) drain(l *lane) {
	defer d.senders.Done()
	defer func() { <-d.slots }()
	for {
		d.mu.Lock()
		if len(l.queue) == 0 {
			delete(d.lanes, l.target)
			if len(d.waiting) == 0 {
				d.waiting = nil // let the backing array go after a burst
				d.mu.Unlock()
				return
			}
			l = d.waiting[0]
			d.waiting = d.waiting[1:]
			d.mu.Unlock()
			continue
		}
		c := l.queue[0]
		l.queue = l.queue[1:]
		stalled, hold := l.stalled, l.hold
		d.mu.Unlock()

		now := d.clock.Now()
		back := time.Time{} // when c was handed back unsent, when it is due
		switch {
		case d.hard.Err() != nil:
			back = d.postpone(c, now, "the process is stopping")
		case stalled:
			back = d.postpone(c, later(hold, now), "an earlier message to the same target waits")
		case c.Expires.Sub(now) < 2*d.margin:
			// Sending now could outlast the claim and race another
			// worker's send of the same message.
			back = d.postpone(c, now, "its claim ran out while it waited")
		case d.beatLeft(now) < 2*d.beatMargin:
			// The heartbeat may run out before the send returns, and
			// another worker's claim then ends this one's claims.
			back = d.postpone(c, now, "the worker's heartbeat ran out")
		default:
			back = d.deliver(c)
		}
		if !back.IsZero() {
			d.mu.Lock()
			l.stalled, l.hold = true, later(l.hold, back)
			d.backedLocked(l.target, l.hold, now)
			d.mu.Unlock()
		}
		d.mu.Lock()
		d.held--
		d.mu.Unlock()
		d.signalRoom()
	}
}

// beaten records that a write that kept the heartbeat, begun at at,
// succeeded.
func (d *Delivery) beaten(at time.Time) {
	d.beatMu.Lock()
	if at.After(d.beatAt) {
		d.beatAt = at
	}
	d.beatMu.Unlock()
}

// beatLeft is how long the heartbeat holds from now, as far as this
// worker knows: its claims are its own no longer than that, however long
// they run. Without a heartbeat it is as long as any claim.
func (d *Delivery) beatLeft(now time.Time) time.Duration {
	if d.beat == nil {
		return d.claimTTL + d.sendTimeout
	}
	d.beatMu.Lock()
	defer d.beatMu.Unlock()
	return d.beatAt.Add(d.heartbeat).Sub(now)
}

// backedLocked records that a message to target was handed back, due at
// hold, and forgets the records older than a claim: a claim or a commit
// in flight that long ago has ended. d.mu is held.
func (d *Delivery) backedLocked(target string, hold, now time.Time) {
	d.backSeq++
	d.backs[target] = backMark{seq: d.backSeq, hold: hold, at: now}
	if len(d.backs) > 64 {
		for k, b := range d.backs {
			if now.Sub(b.at) > d.claimTTL {
				delete(d.backs, k)
			}
		}
	}
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// signalRoom tells the loop, if it waits for room to claim, that some
// may have come free.
func (d *Delivery) signalRoom() {
	select {
	case d.room <- struct{}{}:
	default:
	}
}

// deliver sends c and writes the outcome. When c was handed back unsent
// (the platform asked to wait, the send failed, no route), it returns when
// c is due again, and the messages behind it wait as long; else the zero
// time.
func (d *Delivery) deliver(c outbox.Claimed) time.Time {
	platform := c.Target.Platform
	a, ok := d.routes.Get(platform)
	if !ok {
		d.metrics.attempt(platform, adapters.RouteMissing)
		return d.postpone(c, d.clock.Now().Add(d.routeRetry), "no adapter serves "+platform)
	}
	now := d.clock.Now()
	timeout := min(d.sendTimeout, c.Expires.Sub(now)-d.margin, d.beatLeft(now)-d.beatMargin)
	ctx, cancel := context.WithTimeout(d.hard, timeout)
	ctx = adapters.WithParts(ctx, func(p outbox.Parts) error { return d.keepParts(c, p) })
	if c.Resend {
		// Its earlier claim ended unsettled: that holder may have sent it.
		d.metrics.resent(platform)
		d.log.Warn("resending a message whose earlier claim ended unsettled", "conv", c.Conv, "outbox_id", c.ID, "platform", platform)
	}
	start := time.Now()
	res := d.send(ctx, a, c.Message)
	d.timed(time.Since(start))
	cancel()
	now = d.clock.Now()
	if res.Outcome != adapters.Accepted && d.hard.Err() != nil {
		// The send failed because this process stops, not because of
		// the platform: no attempt is spent on it.
		return d.postpone(c, now, "the process is stopping")
	}
	d.metrics.attempt(platform, res.Outcome)
	if res.Outcome == adapters.Accepted {
		d.queueAck(c, res.MessageID)
		return time.Time{}
	}
	reason := d.redact(res.Reason)
	log := d.log.With("conv", c.Conv, "outbox_id", c.ID, "platform", platform, "outcome", res.Outcome.String())

	switch res.Outcome {
	case adapters.Permanent:
		if reason == "" {
			reason = platform + " refused the message"
		}
		log.Warn("message dead-lettered", "reason", reason)
		return d.dead(c, reason)

	case adapters.RouteMissing:
		next := now.Add(d.routeRetry)
		log.Info("no route to send; the message waits without spending an attempt", "reason", reason)
		return d.postpone(c, next, "")
	}

	// RateLimited, Transient, and any outcome herald does not know yet:
	// an attempt is spent.
	if reason == "" {
		reason = res.Outcome.String()
	}
	attempts := c.Attempts + 1
	if attempts >= d.maxAttempts {
		why := fmt.Sprintf("gave up after %d attempts: %s", attempts, reason)
		log.Warn("message dead-lettered", "reason", why)
		return d.dead(c, why)
	}
	next := now.Add(d.Backoff(c.ID, attempts))
	if res.Outcome == adapters.RateLimited && res.RetryAfter > 0 {
		next = now.Add(res.RetryAfter)
	}
	log.Info("send failed; retrying later", "attempts", attempts, "next_attempt", next, "reason", reason)
	if !d.write(c, "release", func(ctx context.Context) error { return d.outbox.Release(ctx, c, next, reason) }) {
		return later(next, c.Expires)
	}
	return next
}

// keepParts records under c's claim how far c got, before its next part
// goes (see adapters.KeepParts).
func (d *Delivery) keepParts(c outbox.Claimed, p outbox.Parts) error {
	ctx, cancel := context.WithTimeout(d.base, storeTimeout)
	defer cancel()
	return d.outbox.KeepParts(ctx, c, p)
}

// send calls the adapter, turning a panic into a transient failure: one
// bad message must not take the sender down.
func (d *Delivery) send(ctx context.Context, a adapters.Adapter, m outbox.Message) (res adapters.SendResult) {
	defer func() {
		if p := recover(); p != nil {
			d.log.Error("the adapter panicked sending a message", "platform", a.Platform(), "outbox_id", m.ID, "panic", p)
			res = adapters.SendResult{Outcome: adapters.Transient, Reason: fmt.Sprintf("the %s adapter panicked", a.Platform())}
		}
	}()
	m.Text = d.redact(m.Text)
	if d.streamed != nil {
		if res, ok := d.streamed(ctx, a, m); ok {
			return res
		}
	}
	return a.Send(ctx, m)
}

// Backoff is the wait after a message's attempts-th failed send:
// BackoffMin doubled per attempt up to BackoffMax, spread by up to a tenth
// by the message id, so messages that failed together do not all come
// back in the same instant.
func (d *Delivery) Backoff(id string, attempts int) time.Duration {
	wait := d.retry.Wait(attempts)
	h := fnv.New32a()
	h.Write([]byte(id))
	return wait + time.Duration(uint64(wait/10)*uint64(h.Sum32()%1000)/1000)
}

// dead moves c to the dead-letter list with reason. When the write
// failed, it returns c's claim expiry, as c stays claimed until then;
// else the zero time.
func (d *Delivery) dead(c outbox.Claimed, reason string) time.Time {
	var err error
	ok := d.write(c, "dead-letter", func(ctx context.Context) error {
		err = d.outbox.Dead(ctx, c, reason)
		return err
	})
	if err == nil {
		d.tell(c.Message, false, reason)
	}
	if !ok {
		return c.Expires
	}
	return time.Time{}
}

// tell passes how m's delivery ended to Settled, for a message with a
// Ref.
func (d *Delivery) tell(m outbox.Message, accepted bool, reason string) {
	if d.settledFn != nil && m.Ref != "" {
		d.tellers.Add(1)
		go func() {
			defer d.tellers.Done()
			d.settledFn(m, accepted, reason)
		}()
	}
}

// postpone gives c back without spending an attempt, due at next, and
// returns when it is due: next, or c's claim expiry when the write
// failed, as c stays claimed until then.
func (d *Delivery) postpone(c outbox.Claimed, next time.Time, why string) time.Time {
	if why != "" {
		d.log.Debug("message handed back", "conv", c.Conv, "outbox_id", c.ID, "why", why)
	}
	if !d.write(c, "postpone", func(ctx context.Context) error { return d.outbox.Postpone(ctx, c, next) }) {
		return later(next, c.Expires)
	}
	return next
}

// write runs one outbox write for c, logging a failure, and reports
// whether the claim was settled (or is no longer this worker's). A failed
// write leaves the claim to run out: the message is then due again, and
// the claim that takes it reports a resend; meanwhile the store shows it
// held by this worker, so the messages behind it must wait until then
// (see dispatchLocked).
func (d *Delivery) write(c outbox.Claimed, what string, fn func(ctx context.Context) error) bool {
	ctx, cancel := context.WithTimeout(d.base, storeTimeout)
	defer cancel()
	err := fn(ctx)
	d.outcome(c, what, err)
	return err == nil || errs.Is(err, errs.NotFound) || errs.Is(err, errs.LeaseLost)
}

// outcome settles c's claim by what the write what of it returned, and
// logs a failure.
func (d *Delivery) outcome(c outbox.Claimed, what string, err error) {
	switch {
	case err == nil, errs.Is(err, errs.NotFound):
	case errs.Is(err, errs.LeaseLost):
		d.log.Warn("the message's claim ran out and another worker took it; it may be sent twice",
			"conv", c.Conv, "outbox_id", c.ID, "platform", c.Target.Platform, "write", what)
	default:
		d.log.Warn("writing a delivery outcome failed; the message is due again when its claim runs out",
			"conv", c.Conv, "outbox_id", c.ID, "platform", c.Target.Platform, "write", what, "err", err)
	}
}
