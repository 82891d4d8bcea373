package discord

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/discordfake"
	"github.com/heraldgw/herald/store/sqlite"
)

// owners runs adapters one after another on one fake Discord and one
// store's cursors, as processes taking the gateway over from each other.
type owners struct {
	t       *testing.T
	fake    *discordfake.Server
	cursors adapters.Cursors
	inbox   *inbox
}

func newOwners(t *testing.T) *owners {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	fake := discordfake.New(t, discordfake.Options{Token: botToken(fakeBot), BotID: fakeBot, LoseWhileAway: true})
	return &owners{t: t, fake: fake, cursors: db.Cursors(), inbox: newInbox()}
}

// run starts an owner and returns the function that stops it, as a
// process losing the gateway (or dying) would.
func (o *owners) run() (stop func()) {
	o.t.Helper()
	a, err := New(Options{
		Config:        config.Discord{Token: o.fake.Token(), APIURL: o.fake.URL(), GroupTrigger: config.TriggerMention},
		Access:        adapters.NewAccess(Platform, nil, true),
		GroupSessions: adapters.ScopeShared,
		Logger:        slog.New(slog.DiscardHandler),
		RetryMin:      10 * time.Millisecond, RetryMax: 50 * time.Millisecond,
		Cursors: o.cursors,
	})
	if err != nil {
		o.t.Fatalf("New: %v", err)
	}
	a.deliverRetry = adapters.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, o.inbox) }()
	o.fake.Wait("the gateway session", o.fake.Connected)
	return func() {
		cancel()
		if err := <-done; err != nil {
			o.t.Errorf("Run: %v", err)
		}
		o.fake.Wait("the session to be gone", func() bool { return !o.fake.Connected() })
	}
}

// texts reads n deliveries' texts.
func (o *owners) texts(n int) []string {
	o.t.Helper()
	var out []string
	for range n {
		out = append(out, o.inbox.next(o.t).in.Text)
	}
	return out
}

// A new owner reads, in each channel herald received in, the messages
// that came while no process held the gateway, in order, and takes those
// addressed to herald; what it had before is not read again.
func TestBackfillReadsWhatCameWhileNoOneHeldTheGateway(t *testing.T) {
	t.Parallel()
	o := newOwners(t)
	ada := discordfake.User{ID: ada, Username: "ada"}
	bot := discordfake.User{ID: fakeBot}
	stop := o.run()
	o.fake.SendMessage(discordfake.MessageEvent{ChannelID: dmChannel, Author: ada, Content: "first"})
	o.fake.SendMessage(discordfake.MessageEvent{ChannelID: channel, GuildID: guild, Author: ada, Content: "<@" + fakeBot + "> in the guild", Mentions: []discordfake.User{bot}})
	if d := cmp.Diff([]string{"first", "in the guild"}, o.texts(2)); d != "" {
		t.Fatalf("delivered (-want +got):\n%s", d)
	}
	stop()

	// No one holds the gateway: these reach no connection, and a new
	// session is not sent them.
	o.fake.SendMessage(discordfake.MessageEvent{ChannelID: dmChannel, Author: ada, Content: "while away 1"})
	o.fake.SendMessage(discordfake.MessageEvent{ChannelID: channel, GuildID: guild, Author: ada, Content: "not for herald"})
	o.fake.SendMessage(discordfake.MessageEvent{ChannelID: channel, GuildID: guild, Author: ada, Content: "<@" + fakeBot + "> while away 2", Mentions: []discordfake.User{bot}})
	o.fake.SendMessage(discordfake.MessageEvent{ChannelID: dmChannel, Author: ada, Content: "while away 3"})
	// The store is down for the first tries: the backfill retries.
	o.inbox.failing.Store(3)
	o.run()
	o.fake.SendMessage(discordfake.MessageEvent{ChannelID: dmChannel, Author: ada, Content: "after"})

	got := map[string][]string{}
	for range 4 {
		in := o.inbox.next(t).in
		got[in.Conv] = append(got[in.Conv], in.Text)
	}
	want := map[string][]string{
		"discord:dm:" + dmChannel:          {"while away 1", "while away 3", "after"},
		"discord:" + guild + ":" + channel: {"while away 2"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("delivered after the takeover, by conversation (-want +got):\n%s", d)
	}
	select {
	case d := <-o.inbox.ch:
		t.Errorf("delivered %q as well, want nothing more", d.in.Text)
	case <-time.After(100 * time.Millisecond):
	}
	if n := len(o.fake.Calls(discordfake.RouteHistory)); n < 2 {
		t.Errorf("%d channel reads, want one per channel at least", n)
	}
}

// A message the store would not take before the owner lost the gateway
// is not dropped: the next owner's backfill reads it again, even when it
// was the first herald received in its channel.
func TestMessageNotQueuedBeforeTheGatewayWasLostIsBackfilled(t *testing.T) {
	t.Parallel()
	o := newOwners(t)
	o.inbox.failing.Store(1 << 20)
	stop := o.run()
	id := o.fake.SendMessage(discordfake.MessageEvent{ChannelID: dmChannel, Author: discordfake.User{ID: ada}, Content: "stuck"})
	testkit.Eventually(t, "Deliver to be tried three times", func() bool { return o.inbox.calls.Load() >= 3 })
	stop()

	o.inbox.failing.Store(0)
	o.run()
	if in := o.inbox.next(t).in; in.MessageID != id || in.Text != "stuck" {
		t.Errorf("delivered %+v after the takeover, want message %s", in, id)
	}
}
