package telegram_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/telegram"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
	"github.com/heraldgw/herald/sessions"
)

// inbox records what the adapter delivers. fail, when set, is asked
// before each delivery (n counts from 1) and may refuse it.
type inbox struct {
	testkit.Recorder[sessions.Inbound]
	mu    sync.Mutex
	calls int
	fail  func(n int, in sessions.Inbound) error
}

var _ adapters.Inbox = (*inbox)(nil)

func newInbox() *inbox { return &inbox{} }

func (b *inbox) Deliver(_ context.Context, in sessions.Inbound) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if b.fail != nil {
		if err := b.fail(b.calls, in); err != nil {
			return err
		}
	}
	b.Add(in)
	return nil
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
	testkit.Run(t, func(ctx context.Context) error { return a.Run(ctx, in) })
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
