package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/outbox"
)

// Defaults for OutboxOptions.
const (
	DefaultOutboxBacklog  = 1000
	DefaultOutboxRounds   = 10
	DefaultOutboxSendTime = 2 * time.Millisecond
)

// OutboxOptions says what Outbox measures.
type OutboxOptions struct {
	Store    string        // "sqlite" or "redis"
	Backlog  int           // messages waiting for the busy chat; DefaultOutboxBacklog when 0
	Rounds   int           // replies measured on each side; DefaultOutboxRounds when 0
	SendTime time.Duration // what the platform takes per send; DefaultOutboxSendTime when 0
	RedisURL string        // the Redis to measure; DefaultRedisURL when empty
	TempDir  string        // where the gateway's home is made (and removed); the system's when empty
}

// OutboxResult is one run's figures, as `herald bench outbox --json`
// prints them.
type OutboxResult struct {
	Store      string  `json:"store"`
	Backlog    int     `json:"backlog"`
	Rounds     int     `json:"rounds"`
	SendTimeMs float64 `json:"send_time_ms"`
	// A reply to another chat while the busy chat's backlog is being
	// sent: from its message's delivery to the router to its send, and
	// beside it the same with no backlog (the ceiling).
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	BareP50Ms float64 `json:"bare_p50_ms"`
	BareP99Ms float64 `json:"bare_p99_ms"`
	// AheadMax is the most sends of the backlog that started after the
	// reply was committed and before it was sent; AheadP50 their median
	// (the upper one of an even count).
	AheadMax int     `json:"ahead_max"`
	AheadP50 float64 `json:"ahead_p50"`
}

// Outbox measures the outbox's fairness under load, through the gateway
// gateway.New builds: a chat with Backlog messages waiting (its platform
// takes SendTime a send, and the outbox sends a chat's messages in
// order, one at a time), and, while they are sent, a user's message in
// another chat, whose reply should wait for no more than the one send
// of the busy chat under way. Each round measures that reply, then the
// same with no backlog; the two alternate.
func Outbox(ctx context.Context, opt OutboxOptions) (OutboxResult, error) {
	opt.Backlog = cmp.Or(opt.Backlog, DefaultOutboxBacklog)
	opt.Rounds = cmp.Or(opt.Rounds, DefaultOutboxRounds)
	opt.SendTime = cmp.Or(opt.SendTime, DefaultOutboxSendTime)
	if opt.RedisURL == "" {
		opt.RedisURL = DefaultRedisURL
	}
	if opt.Backlog < 1 || opt.Rounds < 1 || opt.SendTime < 0 {
		return OutboxResult{}, fmt.Errorf("backlog and rounds must be positive and the send time not negative, got %d, %d and %s", opt.Backlog, opt.Rounds, opt.SendTime)
	}
	return onBackend(ctx, opt.Store, opt.TempDir, redisTarget{URL: opt.RedisURL}, 1, func(b backend) (OutboxResult, error) {
		return measureOutbox(ctx, b, opt)
	})
}

func measureOutbox(ctx context.Context, b backend, opt OutboxOptions) (res OutboxResult, err error) {
	res = OutboxResult{Store: opt.Store, Backlog: opt.Backlog, Rounds: opt.Rounds, SendTimeMs: ms(opt.SendTime)}
	chat := &slowChat{took: opt.SendTime, replies: &replies{}}
	commits := &commitTimes{}
	h, err := startGateway(ctx, b, gatewaySetup{
		model:    &delayModel{},
		adapters: []adapters.Adapter{chat},
		logger:   watchLog(map[string]func(logged){"turn finished": func(l logged) { commits.note(l.str("conv"), l.at) }}),
		tempDir:  opt.TempDir,
	})
	if err != nil {
		return res, err
	}
	defer func() {
		if serr := h.stop(ctx); err == nil && serr != nil {
			err = fmt.Errorf("stopping the gateway: %w", serr)
		}
	}()
	var loaded, bare run
	var ahead []int
	for r := range opt.Rounds {
		busy := outbox.Target{Platform: benchPlatform, Chat: "busy-" + strconv.Itoa(r)}
		for i := range opt.Backlog {
			m := outbox.Message{Target: busy, Conv: busy.String(), Text: "backlog " + strconv.Itoa(i), Kind: "notice"}
			if _, _, err := h.Store().Outbox().Enqueue(ctx, m); err != nil {
				return res, fmt.Errorf("queueing the backlog: %w", err)
			}
		}
		if err := chat.waitFor(ctx, busy.Chat); err != nil {
			return res, err
		}
		lat, n, err := replyTime(ctx, h, chat, commits, "other-"+strconv.Itoa(r), busy.Chat)
		if err != nil {
			return res, err
		}
		loaded.latencies = append(loaded.latencies, lat)
		ahead = append(ahead, n)
		if err := chat.drain(ctx, busy.Chat, opt.Backlog); err != nil {
			return res, err
		}
		lat, _, err = replyTime(ctx, h, chat, commits, "alone-"+strconv.Itoa(r), "")
		if err != nil {
			return res, err
		}
		bare.latencies = append(bare.latencies, lat)
	}
	p50, p99 := loaded.quantiles()
	res.P50Ms, res.P99Ms = p50, p99
	p50, p99 = bare.quantiles()
	res.BareP50Ms, res.BareP99Ms = p50, p99
	slices.Sort(ahead)
	res.AheadP50, res.AheadMax = float64(ahead[len(ahead)/2]), ahead[len(ahead)-1]
	return res, nil
}

// replyTime delivers a user's message to the chat id and returns its
// reply's time from the delivery to its send, and how many sends to the
// chat busy started after its turn committed and before it was sent.
func replyTime(ctx context.Context, h *heraldGateway, chat *slowChat, commits *commitTimes, id, busy string) (time.Duration, int, error) {
	conv := benchPlatform + ":" + id
	reply := chat.replies.expect(id)
	start := time.Now()
	if err := h.Router().Deliver(ctx, inbound(conv, id)); err != nil {
		return 0, 0, fmt.Errorf("delivering %s: %w", id, err)
	}
	timeout := time.NewTimer(replyTimeout)
	defer timeout.Stop()
	var sent time.Time
	select {
	case sent = <-reply:
	case <-timeout.C:
		return 0, 0, fmt.Errorf("no reply to %s within %s", id, replyTimeout)
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	committed := commits.of(conv)
	if committed.IsZero() {
		committed = start
	}
	return sent.Sub(start), chat.startedBetween(busy, committed, sent), nil
}

// slowChat is a platform that takes took for each send, and notes when
// each send to a chat started.
type slowChat struct {
	took    time.Duration
	replies *replies

	mu      sync.Mutex
	started map[string][]time.Time // by chat
	changed chan struct{}
}

var _ adapters.Adapter = (*slowChat)(nil)

func (c *slowChat) Platform() string { return benchPlatform }

func (c *slowChat) Run(ctx context.Context, _ adapters.Inbox) error {
	<-ctx.Done()
	return nil
}

func (c *slowChat) Send(ctx context.Context, m outbox.Message) adapters.SendResult {
	at := time.Now()
	c.mu.Lock()
	if c.started == nil {
		c.started = map[string][]time.Time{}
		c.changed = make(chan struct{})
	}
	c.started[m.Target.Chat] = append(c.started[m.Target.Chat], at)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	if c.took > 0 {
		t := time.NewTimer(c.took)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return adapters.SendResult{Outcome: adapters.Transient, Reason: "stopping"}
		}
	}
	if m.ReplyTo != "" {
		c.replies.arrived(m.ReplyTo, at)
	}
	return adapters.SendResult{Outcome: adapters.Accepted, MessageID: m.ID}
}

// waitFor waits until a send to chat started.
func (c *slowChat) waitFor(ctx context.Context, chat string) error {
	return c.until(ctx, func() bool { return len(c.started[chat]) > 0 })
}

// drain waits until n sends to chat started, and the last one's time
// passed.
func (c *slowChat) drain(ctx context.Context, chat string, n int) error {
	if err := c.until(ctx, func() bool { return len(c.started[chat]) >= n }); err != nil {
		return err
	}
	t := time.NewTimer(c.took)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// until waits, with a bound, until ok holds (read with c.mu held).
func (c *slowChat) until(ctx context.Context, ok func() bool) error {
	timeout := time.NewTimer(5 * time.Minute)
	defer timeout.Stop()
	for {
		c.mu.Lock()
		if c.started == nil {
			c.started = map[string][]time.Time{}
			c.changed = make(chan struct{})
		}
		done, changed := ok(), c.changed
		c.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-timeout.C:
			return fmt.Errorf("the sends waited for never came")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// startedBetween counts the sends to chat that started after from and
// before to.
func (c *slowChat) startedBetween(chat string, from, to time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, at := range c.started[chat] {
		if at.After(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// commitTimes are when each conversation's turn last committed.
type commitTimes struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (c *commitTimes) note(conv string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil {
		c.at = map[string]time.Time{}
	}
	c.at[conv] = at
}

func (c *commitTimes) of(conv string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at[conv]
}
