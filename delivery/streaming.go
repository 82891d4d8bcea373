package delivery

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
)

// Defaults for StreamingOptions.
const (
	// DefaultStreamTimeout bounds each platform call of a reply shown in
	// progress.
	DefaultStreamTimeout = 5 * time.Second
	// maxStreamWait is the longest wait between two tries after failed
	// edits, which double the wait from the edit interval.
	maxStreamWait = 30 * time.Second
	// streamKeep is how long after its turn a reply shown in progress can
	// still be made the reply: the outbox retries a reply for about that
	// long, and a retry of a reply that went must edit, never post.
	streamKeep = time.Hour
)

// StreamingOptions configure NewStreaming.
type StreamingOptions struct {
	// Adapters are searched for those implementing adapters.Streamer; a
	// turn whose origin is another platform streams nothing here.
	Adapters []adapters.Adapter
	// Every is the least time between two platform calls for one reply
	// (display.stream_edit_interval); 0 means the config's default.
	Every   time.Duration
	Timeout time.Duration // each platform call; 0 means DefaultStreamTimeout
	Clock   clock.Clock   // nil: the wall clock
	Logger  *slog.Logger  // nil: slog.Default()
	Metrics Metrics       // StreamCall counts the platform calls; nil counts nothing
	// Outbox is read once per streamed turn, before its first post
	// (outbox.Store.Unsent): a turn whose chat has an earlier message
	// not sent yet shows nothing in progress, as its message would be
	// posted above that one. Nil reads nothing and always shows.
	Outbox outbox.Store
	// Redact masks herald's secrets in the text shown, as the delivered
	// reply is masked; nil masks nothing.
	Redact func(string) string
	// Hold says how many bytes at the end of the text written so far may
	// be the start of a secret (redact.Redactor.Unsettled): they are not
	// shown until more is written, so that a secret the model writes
	// across two pieces never shows its first part. Nil holds nothing.
	Hold func(string) int
}

// Streaming shows the replies of this process's turns as the model writes
// them: the first text posts a message (adapters.Streamer.StreamText),
// later text edits it at most every Every, by the clock, and when the
// turn's reply comes through the outbox its delivery here (Send) makes
// that message the reply (SendStreamed) instead of posting a new one.
// A turn whose chat has an earlier message that the outbox has not sent
// yet (it waits for a retry, or is held by a worker) shows nothing: its
// reply goes out as usual, below that message.
// The outbox stays the truth: a reply whose turn streamed nothing here (it
// ran in another process, or this one died mid-stream) is sent as usual,
// and the message shown in progress, if any, stays as it was. The message
// of a turn that ended without a reply (stopped, interrupted) is deleted.
//
// Each streamed turn has one goroutine making the platform calls in
// order, so Delta and End return at once and never hold the turn.
// Shutdown (turnFollower) ends those goroutines; the replies shown stay
// known, so the delivery worker, which stops later, still makes them the
// replies.
type Streaming struct {
	by      map[string]adapters.Streamer // by platform
	every   time.Duration
	timeout time.Duration
	clock   clock.Clock
	log     *slog.Logger
	metrics Metrics
	outbox  outbox.Store
	redact  func(string) string
	hold    func(string) int
	turnFollower

	mu      sync.Mutex
	replies map[string]*replyStream // by streamKey
	chats   map[string]*chatPace    // by target: the calls of every reply to it
}

// chatPace is when a chat may next be called by the driver: Every after
// the last call any of its replies made (next), or later when the
// platform asked it to wait (held).
type chatPace struct {
	next, held time.Time
}

// NewStreaming returns a driver; Start runs it.
func NewStreaming(opts StreamingOptions) *Streaming {
	s := &Streaming{
		by:      map[string]adapters.Streamer{},
		every:   opts.Every,
		timeout: opts.Timeout,
		clock:   opts.Clock,
		log:     opts.Logger,
		metrics: opts.Metrics,
		outbox:  opts.Outbox,
		redact:  opts.Redact,
		hold:    opts.Hold,
		replies: map[string]*replyStream{},
		chats:   map[string]*chatPace{},

		turnFollower: turnFollower{op: "delivery.Streaming"},
	}
	for _, a := range opts.Adapters {
		if st, ok := a.(adapters.Streamer); ok {
			s.by[a.Platform()] = st
		}
	}
	if s.every <= 0 {
		s.every = config.DefaultStreamEditInterval
	}
	if s.timeout <= 0 {
		s.timeout = DefaultStreamTimeout
	}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.hold == nil {
		s.hold = func(string) int { return 0 }
	}
	if s.redact == nil {
		s.redact = func(text string) string { return text }
	}
	return s
}

// Drives reports whether any adapter streams: without one the turn worker
// need not call Stream at all.
func (s *Streaming) Drives() bool { return len(s.by) > 0 }

// streamKey names the reply to message replyTo at target: the turn that
// answers it streams under it, and its reply in the outbox carries both.
func streamKey(target outbox.Target, replyTo string) string {
	return target.String() + "\x00" + replyTo
}

// Stream follows one turn's text (sessions.TurnWorkerOptions.Stream). It
// returns at once: nil for a turn on a platform that does not stream, one
// whose entry names no message, or one starting while the driver is not
// running. A turn run again here for the same message (its first run
// handed back) goes on in the message its first run showed.
func (s *Streaming) Stream(_ context.Context, conv string, e sessions.Entry, origin outbox.Target) sessions.TurnStream {
	st, ok := s.by[origin.Platform]
	if !ok || e.MessageID == "" {
		return nil
	}
	key := streamKey(origin, e.MessageID)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked()
	r := &replyStream{
		s:       s,
		st:      st,
		target:  origin,
		replyTo: e.MessageID,
		prev:    s.replies[key],
		log:     s.log.With("conv", conv, "entry", e.ID),
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	if !s.follow(r.run) {
		return nil
	}
	s.replies[key] = r
	return r
}

// pruneLocked forgets the replies whose turns ended longer than
// streamKeep ago.
func (s *Streaming) pruneLocked() {
	now := s.clock.Now()
	for k, r := range s.replies {
		if end := r.endedAt(); !end.IsZero() && now.Sub(end) > streamKeep {
			delete(s.replies, k)
		}
	}
	for k, c := range s.chats {
		if now.After(c.next) && now.After(c.held) {
			delete(s.chats, k)
		}
	}
}

// reserve takes the chat target's next call for a reply at now, when the
// chat is free: no call of any of its replies within Every, no rate
// limit holding it. Otherwise it reports when the chat is free.
func (s *Streaming) reserve(target outbox.Target, now time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := target.String()
	c := s.chats[key]
	if c == nil {
		c = &chatPace{}
		s.chats[key] = c
	}
	if at := later(c.next, c.held); now.Before(at) {
		return at, false
	}
	c.next = now.Add(s.every)
	return time.Time{}, true
}

// paced notes a call to target that returned at: the chat's next call
// waits Every from it, and until held when the platform asked for that.
func (s *Streaming) paced(target outbox.Target, at, held time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chats[target.String()]
	if c == nil {
		c = &chatPace{}
		s.chats[target.String()] = c
	}
	c.next = later(c.next, at.Add(s.every))
	c.held = later(c.held, held)
}

// Send delivers m through a when m is a turn's reply that this process
// showed in progress on a's platform, or that names the message that
// showed it (sessions.ReplyMetaStreamed, from End): the message shown
// becomes the reply (SendStreamed). The message m names comes first: a
// run here of the same turn that did not commit it showed another. It reports false when it did not send, and the
// caller sends m as usual. A retry of a reply sent this way edits the
// same message again: its first part is never posted a second time.
func (s *Streaming) Send(ctx context.Context, a adapters.Adapter, m outbox.Message) (adapters.SendResult, bool) {
	if m.Kind != agent.KindReply || m.ReplyTo == "" {
		return adapters.SendResult{}, false
	}
	st, ok := a.(adapters.Streamer)
	if !ok {
		return adapters.SendResult{}, false
	}
	s.mu.Lock()
	r := s.replies[streamKey(m.Target, m.ReplyTo)]
	s.mu.Unlock()
	// The message the reply's turn named at its commit, when it did: the
	// run that committed m may be another process's, whose message the
	// reply is, not one a run here showed.
	id := m.Meta[sessions.ReplyMetaStreamed]
	if r != nil && id != "" && id != r.shownID() {
		r = nil
	}
	if r != nil {
		// The turn ended before its commit wrote m; its last call may
		// still be under way, and nothing may edit the message after the
		// reply.
		select {
		case <-r.done:
		case <-ctx.Done():
			return adapters.SendResult{Outcome: adapters.Transient, Reason: "the reply shown in progress is still being edited"}, true
		}
		id = r.shownID()
	}
	if id == "" {
		return adapters.SendResult{}, false
	}
	res := st.SendStreamed(ctx, m, id)
	if r != nil && res.Outcome == adapters.Accepted {
		r.mu.Lock()
		r.delivered = true
		r.mu.Unlock()
	}
	return res, true
}

// replyStream shows one turn's reply as it is written. Delta and End
// note what happened and wake run, which makes every platform call.
type replyStream struct {
	s       *Streaming
	st      adapters.Streamer
	target  outbox.Target
	replyTo string
	prev    *replyStream // an earlier run of the same turn here, if any
	log     *slog.Logger
	kick    chan struct{}
	done    chan struct{} // closed when run made its last call

	mu      sync.Mutex
	id      string          // the message shown; empty before the first post
	text    strings.Builder // everything streamed so far
	shown   int             // how much of text the message shows
	calling bool            // a platform call is under way
	ended   time.Time       // when the turn ended; zero while it runs
	replied bool            // the turn ended with a reply to come
	// delivered: the reply went into the message; a later turn for the
	// same message must not take it over.
	delivered bool
}

func (r *replyStream) Delta(text string) {
	r.mu.Lock()
	r.text.WriteString(text)
	r.mu.Unlock()
	r.wake()
}

// End stops the showing: run makes no call after it but, when the turn
// ended without a reply, the delete of the message shown. For a reply to
// come, when no call is under way, it returns the message's id for the
// reply's Meta (sessions.ReplyMetaStreamed), so a delivery by another
// process, or after this one died, makes that message the reply too; a
// call under way might still change the message after such a delivery,
// so then only this process's delivery (Send, which waits for it) does.
//
// A later End(false), from a commit that found the lease lost, takes the
// reply to come back: the message is deleted all the same, after run's
// last call, unless a reply already went into it.
func (r *replyStream) End(replied bool) map[string]string {
	r.mu.Lock()
	retract := false
	if r.ended.IsZero() {
		r.ended, r.replied = r.s.clock.Now(), replied
	} else if r.replied && !replied && !r.delivered {
		r.replied, retract = false, true
	}
	var meta map[string]string
	if r.replied && !r.calling && r.id != "" {
		meta = map[string]string{sessions.ReplyMetaStreamed: r.id}
	}
	r.mu.Unlock()
	if retract {
		r.s.follow(func() {
			<-r.done
			r.drop()
		})
	}
	r.wake()
	return meta
}

func (r *replyStream) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *replyStream) endedAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

// shownID is the id of the message shown, if any.
func (r *replyStream) shownID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.id
}

// unfinished is the id of the message shown, when the reply has not gone
// into it: a run of the same turn after this one may go on in it.
func (r *replyStream) unfinished() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.delivered {
		return ""
	}
	return r.id
}

// drop deletes the message shown of a turn that ended without a reply:
// what it showed is in no history, and no reply will take its place.
func (r *replyStream) drop() {
	r.mu.Lock()
	id := r.id
	if r.replied {
		id = ""
	}
	r.mu.Unlock()
	if id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(r.s.ctx, r.s.timeout)
	defer cancel()
	if err := r.st.ClearStatus(ctx, r.target, id); err != nil {
		r.log.Warn("deleting the reply in progress of a turn that ended without one failed; it stays", "err", err)
		return
	}
	r.mu.Lock()
	r.id = ""
	r.mu.Unlock()
}

// pending returns the text to show, when there is more than is shown and
// the turn still runs; with call, it also marks a call under way, so
// End knows the message may still change.
func (r *replyStream) pending(call bool) (text, id string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ended.IsZero() || r.text.Len() == r.shown {
		return "", "", false
	}
	text = r.text.String()
	ok = strings.TrimSpace(r.s.settled(text)) != ""
	r.calling = ok && call
	return text, r.id, ok
}

// settled is text less its end that may be the start of a secret (Hold).
func (s *Streaming) settled(text string) string { return text[:len(text)-s.hold(text)] }

// called notes a call's end: on success the message is id and shows text.
func (r *replyStream) called(id, text string, ok bool) {
	r.mu.Lock()
	r.calling = false
	if ok {
		r.id, r.shown = id, len(text)
	}
	r.mu.Unlock()
}

// behind reports whether the outbox has a message to the reply's target
// that is not sent yet, or cannot tell: the reply in progress would be
// posted above it, so it is not shown, and the reply goes through the
// outbox after it.
func (r *replyStream) behind(ctx context.Context) bool {
	if r.s.outbox == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, r.s.timeout)
	defer cancel()
	unsent, err := r.s.outbox.Unsent(ctx, r.target)
	switch {
	case err != nil:
		r.log.Debug("reading the outbox for an earlier message failed; the reply is not shown in progress", "err", err)
		return true
	case unsent:
		r.log.Debug("an earlier message to the chat is not sent yet; the reply is not shown in progress")
	}
	return unsent
}

// run makes the platform calls for one reply until its turn ends. The
// first text is posted at once, unless an earlier message to the chat is
// not sent yet (behind); each later call waits until Every has
// passed since the last one returned, by the driver's clock, and shows
// all the text so far (what came in between is coalesced). A failed call
// doubles the wait, up to maxStreamWait; one the platform refuses for
// good ends the showing, and the reply is then sent as usual, or into
// the message when one was posted. A platform that says how long to wait
// (a rate limit) is waited at least that long. A first post that failed
// otherwise (a timeout, a 5xx) may have been posted all the same: it
// ends the showing too, as a second post could show the reply twice.
// Text that comes while the next call waits leaves its time as it is:
// the call shows it all the same.
func (r *replyStream) run() {
	defer close(r.done)
	s := r.s
	ctx := s.ctx
	if r.prev != nil {
		select {
		case <-r.prev.done:
			id := r.prev.unfinished()
			r.mu.Lock()
			r.id = id
			r.mu.Unlock()
		case <-ctx.Done():
			return
		}
		r.prev = nil // taken over; an older run need not be kept
	}
	timer := s.clock.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	// due is when timer fires, or fired unread; zero when it is not set.
	// A wake that reads the clock and sets the timer again for the same
	// instant would set it from a time already past when the clock moved
	// in between, and put the call off.
	var due time.Time
	setTimer := func(at, now time.Time) {
		if !at.Equal(due) {
			due = at
			timer.Reset(at.Sub(now))
		}
	}
	var last time.Time // when the last call returned; zero before the first
	checked := false   // whether the outbox was read for an earlier message
	wait := s.every
	for {
		select {
		case <-r.kick:
		case <-timer.C():
			due = time.Time{}
		case <-ctx.Done():
			return
		}
		if !r.endedAt().IsZero() {
			r.drop()
			return
		}
		now := s.clock.Now()
		if !last.IsZero() && now.Before(last.Add(wait)) {
			if _, _, ok := r.pending(false); ok {
				setTimer(last.Add(wait), now)
			}
			continue
		}
		if !checked {
			if _, shown, ok := r.pending(false); ok && shown == "" {
				checked = true
				if r.behind(ctx) {
					return
				}
			}
		}
		if _, _, ok := r.pending(false); !ok {
			continue
		}
		// The chat's other replies in progress share its pace.
		if at, free := s.reserve(r.target, now); !free {
			setTimer(at, now)
			continue
		}
		text, shown, ok := r.pending(true)
		if !ok {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		// The whole text so far is masked each time, less an end that may
		// be the start of a secret still being written: a secret the model
		// writes across pieces shows as a whole mask once its last piece
		// came, never in part. What is held waits for the next piece, or
		// for the reply's delivery.
		id, err := r.st.StreamText(cctx, r.target, r.replyTo, shown, s.redact(s.settled(text)))
		cancel()
		r.called(id, text, err == nil)
		last = s.clock.Now()
		s.metrics.streamCall(r.target.Platform, shown != "", err)
		w := (*adapters.WaitError)(nil)
		limited := errors.As(err, &w)
		var held time.Time
		if limited {
			held = last.Add(w.After)
		}
		s.paced(r.target, last, held)
		switch {
		case errs.Is(err, errs.Invalid):
			r.log.Info("the platform refused the reply in progress; the reply goes when it is done", "err", err, "edit", shown != "")
			return
		case err != nil && shown == "" && !limited:
			// The post may have gone through all the same (a timeout after
			// the platform took it, a 5xx): posting again could show the
			// reply twice, so the reply goes as usual when it is done.
			r.log.Warn("posting the reply in progress failed, perhaps after it went; the reply goes when it is done", "err", err)
			return
		case err != nil:
			wait = min(2*wait, maxStreamWait)
			if limited {
				wait = max(wait, w.After)
			}
			r.log.Warn("showing the reply in progress failed", "err", err, "edit", shown != "", "next_try_ms", wait.Milliseconds())
		default:
			wait = s.every
		}
		if _, _, more := r.pending(false); more {
			setTimer(last.Add(wait), last)
		}
	}
}
