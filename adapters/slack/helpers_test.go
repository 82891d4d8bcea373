package slack

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/slackfake"
	"github.com/heraldgw/herald/sessions"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 10 * time.Second

// Users of the tests: alice is allow-listed, mallory is not.
const (
	alice   = "U0ALICE"
	mallory = "U0MALLORY"
)

// inbox records what the adapter delivers. Deliver answers with fail
// while it is set, and waits for its context to end while block is.
type inbox struct {
	testkit.Recorder[sessions.Inbound]
	mu    sync.Mutex
	calls int
	fail  error
	block bool
}

var _ adapters.Inbox = (*inbox)(nil)

func newInbox() *inbox { return &inbox{} }

func (b *inbox) Deliver(ctx context.Context, in sessions.Inbound) error {
	b.mu.Lock()
	block, fail := b.block, b.fail
	if !block {
		b.calls++
	}
	b.mu.Unlock()
	switch {
	case block:
		<-ctx.Done()
		return ctx.Err()
	case fail != nil:
		return fail
	}
	b.Add(in)
	return nil
}

func (b *inbox) setFail(err error) {
	b.mu.Lock()
	b.fail = err
	b.mu.Unlock()
}

func (b *inbox) setBlock(on bool) {
	b.mu.Lock()
	b.block = on
	b.mu.Unlock()
}

// deliveries is how many times Deliver was called (and did not block).
func (b *inbox) deliveries() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls
}

// fixture is an adapter talking to a fake Slack.
type fixture struct {
	fake  *slackfake.Server
	a     *Adapter
	inbox *inbox
	logs  *testkit.LogBuffer
}

// newFixture builds an adapter against a fresh fake; socket selects
// Socket Mode. alice is allow-listed.
func newFixture(t *testing.T, socket bool, mod ...func(*Options)) *fixture {
	t.Helper()
	f := &fixture{fake: slackfake.New(t), inbox: newInbox(), logs: &testkit.LogBuffer{}}
	cfg := config.Slack{BotToken: slackfake.BotToken, SigningSecret: slackfake.SigningSecret,
		APIURL: f.fake.URL(), AllowedUsers: []string{alice}}
	if socket {
		cfg.AppToken = slackfake.AppToken
	}
	opts := Options{Config: cfg, Logger: f.logs.Logger()}
	for _, m := range mod {
		m(&opts)
	}
	a, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.a = a
	return f
}

// run runs the adapter until the test ends and checks that Run returned
// nil when its context ended.
func (f *fixture) run(t *testing.T) {
	t.Helper()
	testkit.Run(t, func(ctx context.Context) error { return f.a.Run(ctx, f.inbox) })
}

// events serves the adapter's Events API routes.
func (f *fixture) events(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	f.a.Mount(mux, f.inbox)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// post sends a request and returns the status and body.
func post(t *testing.T, r *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatalf("POST %s: %v", r.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// mention is an app_mention event from user in channel.
func mention(user, channel, ts, threadTS, text string) map[string]any {
	ev := map[string]any{"type": "app_mention", "user": user, "text": text, "ts": ts,
		"channel": channel, "event_ts": ts}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	return ev
}

// dm is a message.im event from user.
func dm(user, channel, ts, threadTS, text string) map[string]any {
	ev := map[string]any{"type": "message", "channel_type": "im", "user": user, "text": text, "ts": ts,
		"channel": channel, "event_ts": ts}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	return ev
}
