package redis

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/instances"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	goredis "github.com/redis/go-redis/v9"
)

// TestReadsAnswerWhenTheServerRefusesWrites puts a server past its
// memory limit under noeviction. A store opened then, as an operator's
// command opens it, answers the reads an operator looks with (the
// conversations, the outbox, the board and its log, the roll of
// instances) with what was there; an ack of a message sent takes it out;
// a write fails with the server's error, told as refused (errs.ErrNotRun),
// and changes nothing. Once memory is freed the write goes through.
func TestReadsAnswerWhenTheServerRefusesWrites(t *testing.T) {
	ctx := context.Background()
	r := testkit.LaunchRedis(t)
	db := openDB(t, r, nil, sessions.Limits{})

	if _, err := db.Sessions().Append(ctx, sessions.Inbound{Conv: "api:one", Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Outbox().Enqueue(ctx, outbox.Message{Target: outbox.Target{Platform: "api", Chat: "one"}, Text: "waiting", Kind: "reply"}); err != nil {
		t.Fatal(err)
	}
	// A message a worker claimed and is sending as the server fills up.
	if _, _, err := db.Outbox().Enqueue(ctx, outbox.Message{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Text: "sending", Kind: "reply"}); err != nil {
		t.Fatal(err)
	}
	sending, err := db.Outbox().Claim(ctx, "gw-a", []string{"telegram"}, 10, time.Minute)
	if err != nil || len(sending) != 1 {
		t.Fatalf("Claim = %+v, %v; want the message sending", sending, err)
	}
	now := time.Now().UTC()
	card := kanban.Card{ID: "t_00000001", Board: "ops", Title: "look", Status: kanban.StatusReady,
		Workspace: kanban.Workspace{Kind: kanban.WorkspaceScratch}, CreatedAt: now, UpdatedAt: now}
	if _, err := db.Kanban().Apply(ctx, kanban.Change{Cards: []kanban.CardWrite{{Card: card}},
		Events: []kanban.Event{{Board: "ops", Card: card.ID, Kind: kanban.EventCreated, At: now}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Instances().Beat(ctx, instances.Instance{ID: "gw-a", Host: "h", PID: 1, StartedAt: now}, time.Minute); err != nil {
		t.Fatal(err)
	}

	admin := goredis.NewClient(&goredis.Options{Addr: r.Addr()})
	t.Cleanup(func() { admin.Close() })
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	// Any limit under what the server holds already refuses writes.
	if err := admin.ConfigSet(ctx, "maxmemory", "1mb").Err(); err != nil {
		t.Fatal(err)
	}

	// The platform took it: its ack goes through (allow-oom), so it is
	// not sent again once its claim runs out.
	if err := db.Outbox().Ack(ctx, sending[0]); err != nil {
		t.Errorf("Ack of a sent message past the memory limit: %v, want it taken out", err)
	}

	_, err = db.Sessions().Append(ctx, sessions.Inbound{Conv: "api:one", Text: "refused"})
	if err == nil || !strings.Contains(err.Error(), "OOM") || !errs.Is(err, errs.Unavailable) || !errors.Is(err, errs.ErrNotRun) {
		t.Fatalf("Append past the memory limit: %v, want the server's OOM error, Unavailable and ErrNotRun", err)
	}

	// An operator's command opens the store anew: that writes nothing.
	db = openDB(t, r, nil, sessions.Limits{})
	convs, err := db.Conversations().Conversations(ctx, sessions.ConvQuery{Limit: 10})
	if err != nil || len(convs) != 1 || convs[0].Conv != "api:one" {
		t.Errorf("Conversations = %+v, %v; want api:one", convs, err)
	}
	if c, err := db.Conversations().Conversation(ctx, "api:one"); err != nil || c.Queued != 1 {
		t.Errorf("Conversation = %+v, %v; want its one queued entry, not the refused one", c, err)
	}
	if m, err := db.Outbox().Pending(ctx, 10); err != nil || len(m) != 1 || m[0].Text != "waiting" {
		t.Errorf("outbox Pending = %+v, %v; want the waiting message", m, err)
	}
	if cards, err := db.Kanban().Cards(ctx, kanban.Query{Board: "ops"}); err != nil || len(cards) != 1 || cards[0].Title != "look" {
		t.Errorf("kanban Cards = %+v, %v; want the card", cards, err)
	}
	if evs, err := db.Kanban().Events(ctx, kanban.EventQuery{Board: "ops"}); err != nil || len(evs) != 1 {
		t.Errorf("kanban Events = %+v, %v; want the card's creation", evs, err)
	}
	if in, err := db.Instances().Instances(ctx); err != nil || len(in) != 1 || in[0].ID != "gw-a" {
		t.Errorf("Instances = %+v, %v; want gw-a", in, err)
	}

	if err := admin.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Sessions().Append(ctx, sessions.Inbound{Conv: "api:one", Text: "again"}); err != nil {
		t.Fatalf("Append once memory is free: %v", err)
	}
	if c, err := db.Conversations().Conversation(ctx, "api:one"); err != nil || c.Queued != 2 {
		t.Errorf("Conversation = %+v, %v; want two queued entries", c, err)
	}
}

// TestFlagsNameFunctions keeps the functions' flags to functions of the
// library.
func TestFlagsNameFunctions(t *testing.T) {
	for f := range flags {
		if !slices.Contains(scriptFiles, f) {
			t.Errorf("flags names %q, not a function of the library", f)
		}
	}
}

// TestACallToAServerDownIsNotRun: with the server down, a call finds no
// connection and is never sent, so its error is Unavailable and marked
// errs.ErrNotRun, and the store answers again once the server is back.
func TestACallToAServerDownIsNotRun(t *testing.T) {
	ctx := context.Background()
	r := testkit.LaunchRedis(t)
	db := openDB(t, r, nil, sessions.Limits{})
	if _, _, err := db.Outbox().Enqueue(ctx, outbox.Message{Target: outbox.Target{Platform: "telegram", Chat: "1"}, Text: "hi", Kind: "reply"}); err != nil {
		t.Fatal(err)
	}
	r.Stop(t)
	_, err := db.Outbox().Claim(ctx, "gw-a", []string{"telegram"}, 10, time.Minute)
	if !errs.Is(err, errs.Unavailable) || !errors.Is(err, errs.ErrNotRun) {
		t.Fatalf("Claim with the server down: %v, want Unavailable and ErrNotRun", err)
	}
	r.Restart(t)
	testkit.Eventually(t, "the message claimed once the server is back", func() bool {
		cs, err := db.Outbox().Claim(ctx, "gw-a", []string{"telegram"}, 10, time.Minute)
		return err == nil && len(cs) == 1 && cs[0].Text == "hi"
	})
}

// serverError is an error reply of the server.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

// TestFailTellsWhatDidNotRun: a server's refusal of the call itself is
// marked errs.ErrNotRun on a client that sends each call once, not on
// one that retries (an earlier attempt may have run); a refusal of the
// WAIT behind a call that ran is not.
func TestFailTellsWhatDidNotRun(t *testing.T) {
	once := &DB{client: goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})}
	retries := &DB{client: goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})}
	t.Cleanup(func() { once.client.Close(); retries.client.Close() })
	busy := serverError("BUSY Redis is busy running a script")
	wait := goredis.NewIntCmd(context.Background(), "wait", 1, 100)
	wait.SetErr(busy)
	for _, tc := range []struct {
		desc   string
		db     *DB
		err    error
		notRun bool
	}{
		{"refused, sent once", once, busy, true},
		{"refused, with retries", retries, busy, false},
		{"its WAIT refused", once, notReplicated(1, wait), false},
		{"a script's error", once, serverError("ERR user_script:1: boom"), false},
	} {
		err := tc.db.fail("test", tc.err)
		if got := errors.Is(err, errs.ErrNotRun); got != tc.notRun {
			t.Errorf("%s: %v is ErrNotRun %v, want %v", tc.desc, err, got, tc.notRun)
		}
	}
}
