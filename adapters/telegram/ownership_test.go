package telegram_test

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/telegram"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/store/redis"
	"github.com/heraldgw/herald/store/sqlite"
)

// stallLeases is one process's view of the lease store that can be made
// to stall, as a process does in a long GC pause or when its host
// freezes: while stalled, every call waits, whatever its context, and
// goes on when the stall ends.
type stallLeases struct {
	lease.Store
	mu      sync.Mutex
	gate    chan struct{} // closed while not stalled
	blocked atomic.Int32  // calls waiting in the stall now
}

func newStallLeases(ls lease.Store) *stallLeases {
	s := &stallLeases{Store: ls, gate: make(chan struct{})}
	close(s.gate)
	return s
}

func (s *stallLeases) stall() {
	s.mu.Lock()
	s.gate = make(chan struct{})
	s.mu.Unlock()
}

// resume ends the stall; resuming a store that is not stalled does
// nothing.
func (s *stallLeases) resume() {
	s.mu.Lock()
	select {
	case <-s.gate:
	default:
		close(s.gate)
	}
	s.mu.Unlock()
}

func (s *stallLeases) wait() {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	s.blocked.Add(1)
	<-gate
	s.blocked.Add(-1)
}

func (s *stallLeases) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (int64, error) {
	s.wait()
	return s.Store.Acquire(ctx, name, holder, ttl)
}

func (s *stallLeases) Check(ctx context.Context, name, holder string, token int64) (bool, error) {
	s.wait()
	return s.Store.Check(ctx, name, holder, token)
}

// pollLog records, across the pollers of a test, who called getUpdates,
// in order.
type pollLog struct {
	mu  sync.Mutex
	who []string
}

func (p *pollLog) client(name string) *http.Client {
	return &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		if strings.HasSuffix(r.URL.Path, "/getUpdates") {
			p.mu.Lock()
			p.who = append(p.who, name)
			p.mu.Unlock()
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
}

func (p *pollLog) calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.who)
}

// runCount counts the Runs going on, by owner.
type runCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *runCount) Add(name string, d int) {
	r.mu.Lock()
	r.n[name] += d
	r.mu.Unlock()
}

func (r *runCount) get(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[name]
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// leaseDB is a store of either backend, as far as the owners use it.
type leaseDB interface {
	Leases() lease.Store
	Close() error
}

// An owner that stalls past its lease while another process takes it
// over makes no getUpdates when it wakes: it checks its grant's token
// before each poll, finds it stale and stops. Two owners run the real
// Telegram adapter against one fake Bot API on one store, whose clock
// the test moves to let the stalled owner's lease run out.
func TestStalledOwnerPollsNoMoreOnceTakenOver(t *testing.T) {
	open := map[string]func(t *testing.T, clk clock.Clock) leaseDB{
		config.BackendSQLite: func(t *testing.T, clk clock.Clock) leaseDB {
			db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"), sqlite.Options{Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			return db
		},
		config.BackendRedis: func(t *testing.T, clk clock.Clock) leaseDB {
			r := testkit.StartRedis(t)
			db, err := redis.Open(context.Background(), redis.Options{URL: r.URL(), Prefix: r.Prefix(), Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			return db
		},
	}
	for _, backend := range []string{config.BackendSQLite, config.BackendRedis} {
		t.Run(backend, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			db := open[backend](t, clk)
			defer db.Close()
			stalledOwnerPolls(t, clk, db)
		})
	}
}

func stalledOwnerPolls(t *testing.T, clk *clock.Fake, db leaseDB) {
	tg := telegramfake.New(t, "")
	tg.SetMaxPoll(20 * time.Millisecond)
	polls := &pollLog{}
	running := &runCount{n: map[string]int{}}
	const ttl = time.Minute // by the store's clock, which only the test moves

	newOwner := func(name string, leases lease.Store) (*adapters.Owner, func(context.Context) error) {
		a, err := telegram.New(telegram.Options{
			Config:     config.Telegram{Token: tg.Token(), APIURL: tg.URL(), Mode: config.TelegramPolling},
			Access:     adapters.NewAccess(telegram.Platform, nil, true),
			Logger:     quiet(),
			HTTPClient: polls.client(name),
			BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		o := adapters.NewOwner(adapters.OwnerOptions{
			Leases: leases, Name: "telegram", Holder: name, TTL: ttl,
			Renew: 20 * time.Millisecond, Poll: 10 * time.Millisecond,
			Logger: quiet(),
		})
		return o, func(ctx context.Context) error {
			running.Add(name, 1)
			defer running.Add(name, -1)
			return a.Run(ctx, newInbox())
		}
	}
	count := func(name string) int {
		n := 0
		for _, w := range polls.calls() {
			if w == name {
				n++
			}
		}
		return n
	}
	start := func(o *adapters.Owner, run func(context.Context) error) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = o.Run(ctx, run) }()
		return func() { cancel(); <-done }
	}

	stalling := newStallLeases(db.Leases())
	a, runA := newOwner("gw-a", stalling)
	stopA := start(a, runA)
	defer stopA()
	testkit.Eventually(t, "gw-a to poll", func() bool { return count("gw-a") >= 2 })

	// gw-a stalls: its renewals and its check before the next poll wait.
	stalling.stall()
	defer stalling.resume() // before the owners stop, if the test fails first
	// Its last poll ends; the next waits at the check.
	testkit.Eventually(t, "gw-a to stall before its next poll", func() bool {
		return stalling.blocked.Load() >= 2 && tg.PollsInFlight() == 0
	})
	clk.Advance(ttl + time.Second)

	b, runB := newOwner("gw-b", db.Leases())
	stopB := start(b, runB)
	defer stopB()
	testkit.Eventually(t, "gw-b to take over and poll", func() bool { return count("gw-b") >= 2 })

	// gw-a wakes: its renewal finds gw-b's lease, its check a stale token.
	stalling.resume()
	testkit.Eventually(t, "gw-a's Run to end", func() bool { return running.get("gw-a") == 0 })
	seen := count("gw-b")
	testkit.Eventually(t, "gw-b to go on polling", func() bool { return count("gw-b") >= seen+3 })

	calls := polls.calls()
	firstB := slices.Index(calls, "gw-b")
	if i := slices.Index(calls[firstB:], "gw-a"); i >= 0 {
		t.Errorf("gw-a polled after gw-b took over (call %d of %v)", firstB+i, calls)
	}
	if n := tg.MaxConcurrentPolls(); n != 1 {
		t.Errorf("%d getUpdates waited at once, want 1", n)
	}
	if n := tg.Conflicts(); n != 0 {
		t.Errorf("%d getUpdates were ended by another poller, want none", n)
	}
}
