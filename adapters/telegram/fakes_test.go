package telegram_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/telegram"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
	"github.com/heraldgw/herald/sessions"
)

const waitTimeout = 10 * time.Second

// inbox records what the adapter delivers. fail, when set, is asked
// before each delivery (n counts from 1) and may refuse it.
type inbox struct {
	mu      sync.Mutex
	got     []sessions.Inbound
	calls   int
	fail    func(n int, in sessions.Inbound) error
	arrived chan struct{}
}

var _ adapters.Inbox = (*inbox)(nil)

func newInbox() *inbox { return &inbox{arrived: make(chan struct{})} }

func (b *inbox) Deliver(_ context.Context, in sessions.Inbound) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if b.fail != nil {
		if err := b.fail(b.calls, in); err != nil {
			return err
		}
	}
	b.got = append(b.got, in)
	close(b.arrived)
	b.arrived = make(chan struct{})
	return nil
}

// delivered returns what the inbox took so far.
func (b *inbox) delivered() []sessions.Inbound {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.got)
}

// wait waits until the inbox took at least n inbounds and returns them.
func (b *inbox) wait(t *testing.T, n int) []sessions.Inbound {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		got, arrived := slices.Clone(b.got), b.arrived
		b.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-arrived:
		case <-deadline.C:
			t.Fatalf("inbox took %d inbounds, want %d within %s", len(got), n, waitTimeout)
		}
	}
}

// quiet is a logger that writes nowhere.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// options are an adapter's options against fake: polling, serving
// everyone, with short waits.
func options(fake *telegramfake.Server) telegram.Options {
	return telegram.Options{
		Config: config.Telegram{
			Token:        fake.Token(),
			APIURL:       fake.URL(),
			Mode:         config.TelegramPolling,
			GroupTrigger: config.TriggerMention,
		},
		Access:      adapters.NewAccess(telegram.Platform, nil, true),
		Logger:      quiet(),
		PollTimeout: time.Second,
		BackoffMin:  5 * time.Millisecond,
		BackoffMax:  20 * time.Millisecond,
	}
}

func newAdapter(t *testing.T, opts telegram.Options) *telegram.Adapter {
	t.Helper()
	a, err := telegram.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

// run runs a until the test ends, then checks Run returned nil.
func run(t *testing.T, a *telegram.Adapter, in adapters.Inbox) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, in) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v, want nil when its context ends", err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("Run did not return within %s of its context ending", waitTimeout)
		}
	})
}

// polling starts a polling adapter against a new fake and returns both
// with the inbox it delivers to.
func polling(t *testing.T, change func(*telegram.Options)) (*telegramfake.Server, *telegram.Adapter, *inbox) {
	t.Helper()
	fake := telegramfake.New(t, "")
	opts := options(fake)
	if change != nil {
		change(&opts)
	}
	a := newAdapter(t, opts)
	in := newInbox()
	run(t, a, in)
	return fake, a, in
}
