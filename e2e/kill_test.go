package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/store/sqlite"
)

// leaseTTL is the lease the process tests configure: short, so that a
// killed process's conversations are taken over within seconds.
const leaseTTL = 2 * time.Second

func TestKilledMidTurnRepliesOnce(t *testing.T) {
	t.Parallel()
	model := testkit.NewModelServer(t)
	held := testkit.NewGate()
	t.Cleanup(held.Release)
	// The first call hangs until the process is killed under it; the
	// second, from the restarted process, is held until the test has seen
	// it arrive.
	model.Script(testkit.Hang(held), testkit.Hang(held))

	home := t.TempDir()
	writeConfig(t, home, fmt.Sprintf(`
store:
  lease_ttl: %s
http:
  addr: 127.0.0.1:0
model:
  base_url: %s
  name: %s
workers:
  turns: 4
  deliveries: 2
`, leaseTTL, model.URL(), modelName))

	first := startChild(t, "gateway", home)
	msgID, err := first.api().post("k", "survive the crash", "")
	if err != nil {
		t.Fatal(err)
	}
	model.WaitRequests(1)
	first.kill()
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		return held.Waiting() == 0, "the killed process's model request is still open"
	})

	restarted := startChild(t, "restarted gateway", home)
	reqs := model.WaitRequests(2)
	if got := reqs[1].LastUser(); got != "survive the crash" {
		t.Fatalf("the restarted gateway's model request is for %q, want the killed turn's message:%s", got, describe(reqs[1]))
	}
	// The killed turn committed nothing: the retry starts from the same
	// history, so the message is in the request once.
	if n := countMessages(reqs[1], "user", "survive the crash"); n != 1 {
		t.Errorf("the retried request carries the message %d times:%s", n, describe(reqs[1]))
	}
	held.Release()

	api := restarted.api()
	api.waitTimeline(t, "k", 1)
	time.Sleep(2 * settleWindow)
	items, err := api.timeline("k")
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].Kind != kindReply || items[0].Text != "echo: survive the crash" {
		t.Errorf("timeline %v: want the reply to message %s exactly once", items, msgID)
	}
	if n := model.Count(); n != 2 {
		t.Errorf("the model got %d requests, want 2 (the killed call and its retry)", n)
	}
	restarted.stop()

	// With the gateway stopped, the store itself says nothing is left.
	ctx, db := openStopped(t, home)
	wantOutboxEmpty(t, ctx, db)
	if turn, err := db.Sessions().Claim(ctx, "inspector", time.Second); err != nil || turn != nil {
		t.Errorf("the turn queue still holds work: %+v (%v)", turn, err)
	}
	history, err := db.Sessions().History(ctx, "api:k")
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range history {
		roles = append(roles, m.Role+": "+m.Content)
	}
	if len(history) != 2 || history[0].Content != "survive the crash" || history[1].Content != "echo: survive the crash" {
		t.Errorf("history %q: want the message and its reply, once each", roles)
	}
}

// openStopped opens the SQLite file of the stopped gateway on home, for
// the test to read, and a context bounding the reads.
func openStopped(t *testing.T, home string) (context.Context, *sqlite.DB) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(home, "herald.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("opening the gateway's SQLite file: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx, db
}

// wantOutboxEmpty checks that db's outbox has nothing pending and no dead
// letter: every message was delivered.
func wantOutboxEmpty(t *testing.T, ctx context.Context, db *sqlite.DB) {
	t.Helper()
	if pending, err := db.Outbox().Pending(ctx, 10); err != nil || len(pending) != 0 {
		t.Errorf("outbox pending: %d messages (%v), want none", len(pending), err)
	}
	if dead, err := db.Outbox().DeadLetters(ctx, 10); err != nil || len(dead) != 0 {
		t.Errorf("outbox dead letters: %v (%v), want none", dead, err)
	}
}

// countMessages counts req's messages with role and content.
func countMessages(req testkit.RecordedRequest, role, content string) int {
	n := 0
	for _, m := range req.Messages {
		if m.Role == role && m.Content == content {
			n++
		}
	}
	return n
}
