// Package bench measures herald's stores. Queue pushes entries through a
// conversation's turn queue the way turn workers do, and measures in the
// same run, on the same backend and at the same concurrency, the bare
// operations the backend needs at least for one durable enqueue and
// dequeue: the raw ceiling. The ratio of the two is the cost of what
// herald adds (leases, fencing, dedupe, lanes, the ready index).
package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/sessions"
)

// Defaults for QueueOptions.
const (
	DefaultEntries       = 20000
	DefaultConversations = 32
	DefaultRedisURL      = "redis://127.0.0.1:6379/0"
)

// QueueOptions says what Queue measures.
type QueueOptions struct {
	Store         string // "sqlite" or "redis"
	Entries       int    // entries pushed through; DefaultEntries when 0
	Conversations int    // concurrent conversations, and as many workers; DefaultConversations when 0
	RedisURL      string // the Redis to measure; DefaultRedisURL when empty
	TempDir       string // where the SQLite files are made (and removed); the system's when empty
}

// QueueResult is one run's figures. The JSON names are what
// `herald bench queue --json` prints; scripts read them.
type QueueResult struct {
	Store         string  `json:"store"`
	Entries       int     `json:"entries"`
	Conversations int     `json:"conversations"`
	EntriesPerS   float64 `json:"entries_per_s"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	RawPerS       float64 `json:"raw_per_s"`
	RawP50Ms      float64 `json:"raw_p50_ms"`
	RawP99Ms      float64 `json:"raw_p99_ms"`
	Ratio         float64 `json:"ratio"` // EntriesPerS / RawPerS
}

// payload is the text of every entry, raw or not: about the size of a
// short chat message.
var payload = strings.Repeat("herald bench ", 8)

// backend is one store technology set up for a run: herald's store on it,
// and the bare operations of the raw ceiling against the same server or
// with the same file settings.
type backend interface {
	// open opens herald's store.
	open(ctx context.Context) (sessionStore, error)
	// rawPrepare makes what the raw loop needs for convs conversations.
	rawPrepare(ctx context.Context, convs int) error
	// rawStep moves one entry of conversation conv through a bare
	// durable enqueue and dequeue.
	rawStep(ctx context.Context, conv int) error
	// cleanup removes everything the run made.
	cleanup(ctx context.Context) error
	// serverCPU is the CPU time the store's server has used so far, and
	// false for a store that runs in this process.
	serverCPU(ctx context.Context) (time.Duration, bool)
	// gatewayStore points a gateway's config at herald's store.
	gatewayStore(cfg *config.Store)
}

type sessionStore interface {
	Sessions() sessions.Store
	Close() error
}

// Queue runs the queue benchmark.
func Queue(ctx context.Context, opt QueueOptions) (QueueResult, error) {
	if opt.Entries == 0 {
		opt.Entries = DefaultEntries
	}
	if opt.Conversations == 0 {
		opt.Conversations = DefaultConversations
	}
	if opt.RedisURL == "" {
		opt.RedisURL = DefaultRedisURL
	}
	if opt.Entries < 1 || opt.Conversations < 1 {
		return QueueResult{}, fmt.Errorf("entries and conversations must be positive, got %d and %d", opt.Entries, opt.Conversations)
	}
	return onBackend(ctx, opt.Store, opt.TempDir, redisTarget{URL: opt.RedisURL}, opt.Conversations, func(b backend) (QueueResult, error) {
		return measure(ctx, b, opt)
	})
}

// onBackend makes the backend store names ("sqlite" in tempDir, or
// "redis" on the server or cluster redis names, for convs conversations), runs run on it and cleans
// it up, even when the run was interrupted.
func onBackend[R any](ctx context.Context, store, tempDir string, redis redisTarget, convs int, run func(backend) (R, error)) (R, error) {
	var (
		b    backend
		err  error
		zero R
	)
	switch store {
	case "sqlite":
		b, err = newSQLiteBackend(tempDir)
	case "redis":
		b, err = newRedisBackend(ctx, redis, convs)
	default:
		return zero, fmt.Errorf("unknown store %q; want sqlite or redis", store)
	}
	if err != nil {
		return zero, err
	}
	res, err := run(b)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if cerr := b.cleanup(cctx); err == nil && cerr != nil {
		err = fmt.Errorf("cleaning up: %w", cerr)
	}
	return res, err
}

// rounds is how many times the raw loop and herald's take turns, each
// moving its share of the entries, so that a change of load on the machine
// during the run weighs on both alike.
const rounds = 4

func measure(ctx context.Context, b backend, opt QueueOptions) (res QueueResult, err error) {
	res = QueueResult{Store: opt.Store, Entries: opt.Entries, Conversations: opt.Conversations}

	if err := b.rawPrepare(ctx, opt.Conversations); err != nil {
		return res, fmt.Errorf("preparing the raw loop: %w", err)
	}
	db, err := b.open(ctx)
	if err != nil {
		return res, fmt.Errorf("opening the %s store: %w", opt.Store, err)
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("closing the store: %w", cerr)
		}
	}()

	var raw, herald run
	for r := range rounds {
		n := share(opt.Entries, rounds, r)
		rr, err := driveRaw(ctx, n, opt.Conversations, b.rawStep)
		if err != nil {
			return res, fmt.Errorf("raw loop: %w", err)
		}
		raw.add(rr)
		hr, err := driveStore(ctx, db.Sessions(), r, n, opt.Conversations)
		if err != nil {
			return res, fmt.Errorf("queue: %w", err)
		}
		herald.add(hr)
	}

	res.EntriesPerS = herald.perSecond()
	res.P50Ms, res.P99Ms = herald.quantiles()
	res.RawPerS = raw.perSecond()
	res.RawP50Ms, res.RawP99Ms = raw.quantiles()
	if res.RawPerS > 0 {
		res.Ratio = res.EntriesPerS / res.RawPerS
	}
	return res, nil
}

// share is how many of entries conversation c of convs carries.
func share(entries, convs, c int) int {
	n := entries / convs
	if c < entries%convs {
		n++
	}
	return n
}

// firstError runs goroutines and keeps the first error; the first error
// cancels the others' context.
type firstError struct {
	wg     sync.WaitGroup
	once   sync.Once
	err    error
	cancel context.CancelFunc
}

func (g *firstError) Go(f func() error) {
	g.wg.Go(func() {
		if err := f(); err != nil {
			g.once.Do(func() {
				g.err = err
				g.cancel()
			})
		}
	})
}

func (g *firstError) Wait() error {
	g.wg.Wait()
	return g.err
}

// driveRaw runs step for every entry, one goroutine per conversation, one
// entry in flight per conversation.
func driveRaw(ctx context.Context, entries, convs int, step func(context.Context, int) error) (run, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g := &firstError{cancel: cancel}
	lat := make([][]time.Duration, convs)
	start := time.Now()
	for c := range convs {
		g.Go(func() error {
			n := share(entries, convs, c)
			lat[c] = make([]time.Duration, 0, n)
			for range n {
				t0 := time.Now()
				if err := step(ctx, c); err != nil {
					return err
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
			return nil
		})
	}
	err := g.Wait()
	return run{elapsed: time.Since(start), latencies: merge(lat)}, err
}

// driveStore pushes entries through q as herald's turn worker runs
// turns: a producer per conversation appends and wakes the worker; the
// worker's one claim loop claims while there is something to claim and a
// turn may start (up to one per conversation), and each turn, once done,
// commits and claims the next in one call (FinishAndClaim), giving the
// lease back in the same step, so a busy worker moves from turn to turn
// without a Claim of its own. Each conversation has one entry in flight
// (its producer appends the next after the last one finished), so the
// latency measured, Append to Finish, is the path's own rather than time
// spent behind a backlog, and the load matches the raw loop's. round goes
// into the message ids, which must not repeat those of earlier rounds: a
// repeat would be deduped.
func driveStore(ctx context.Context, q sessions.Store, round, entries, convs int) (run, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	producers := &firstError{cancel: cancel}
	workers := &firstError{cancel: cancel}

	// wake asks the claim loop to claim now, as the router wakes the turn
	// worker after it queues a message; wakes that come while the loop is
	// busy fold into one.
	wake := make(chan struct{}, 1)
	// slots holds a token per running turn.
	slots := make(chan struct{}, convs)
	// finished[c] carries the time conversation c's entry was finished.
	finished := make([]chan time.Time, convs)
	for c := range finished {
		finished[c] = make(chan time.Time, 1)
	}
	stop := make(chan struct{})
	// The worker's name, as one gateway process's turn worker has one.
	const worker = "bench-worker"

	// runTurns runs turn and the turns its commits claim, until a commit
	// finds nothing ready.
	runTurns := func(turn *sessions.Turn) error {
		defer func() { <-slots }()
		for turn != nil {
			c, err := strconv.Atoi(turn.Entry.Meta["conv"])
			if err != nil || c < 0 || c >= convs {
				return fmt.Errorf("claimed entry %s of %q is not one of this run's", turn.Entry.ID, turn.Entry.Conv)
			}
			next, err := q.FinishAndClaim(ctx, turn.Lease, sessions.Finish{EntryID: turn.Entry.ID, Release: true}, worker, sessions.DefaultLeaseTTL)
			if err != nil {
				return err
			}
			finished[c] <- time.Now()
			turn = next
		}
		return nil
	}
	workers.Go(func() error {
		for {
			select {
			case slots <- struct{}{}:
			case <-stop:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
			turn, err := q.Claim(ctx, worker, sessions.DefaultLeaseTTL)
			if err != nil {
				return err
			}
			if turn != nil {
				workers.Go(func() error { return runTurns(turn) })
				continue
			}
			<-slots
			select {
			case <-wake:
			case <-stop:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})

	lat := make([][]time.Duration, convs)
	start := time.Now()
	for c := range convs {
		producers.Go(func() error {
			n := share(entries, convs, c)
			lat[c] = make([]time.Duration, 0, n)
			conv := "bench:" + strconv.Itoa(c)
			for i := range n {
				t0 := time.Now()
				_, err := q.Append(ctx, sessions.Inbound{
					Conv:      conv,
					Sender:    "bench",
					MessageID: strconv.Itoa(round) + "." + strconv.Itoa(i),
					Text:      payload,
					Meta:      map[string]string{"conv": strconv.Itoa(c)},
				})
				if err != nil {
					return err
				}
				select {
				case wake <- struct{}{}:
				default:
				}
				select {
				case t1 := <-finished[c]:
					lat[c] = append(lat[c], t1.Sub(t0))
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
	}
	perr := producers.Wait()
	elapsed := time.Since(start)
	close(stop)
	werr := workers.Wait()
	if perr == nil {
		perr = werr
	}
	return run{elapsed: elapsed, latencies: merge(lat)}, perr
}
