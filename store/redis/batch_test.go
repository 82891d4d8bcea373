package redis

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
)

// TestConcurrentCallsGetTheirOwnReplies sends many appends at once, so
// that they share pipelines, and checks each caller got its own entry.
func TestConcurrentCallsGetTheirOwnReplies(t *testing.T) {
	db := openDB(t, testkit.StartRedis(t), nil, sessions.Limits{})
	ctx := context.Background()
	const n = 500
	ids := make([]string, n)
	errc := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// Every conversation gets i+1 entries, so the id of the
			// last tells whose reply a caller got.
			conv := "api:c" + strconv.Itoa(i)
			for j := range i%3 + 1 {
				res, err := db.Sessions().Append(ctx, sessions.Inbound{Conv: conv, Text: strconv.Itoa(j)})
				if err != nil {
					errc <- err
					return
				}
				ids[i] = res.EntryID
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("Append: %v", err)
	}
	for i, id := range ids {
		if want := strconv.Itoa(i%3+1) + "-1"; id != want {
			t.Errorf("conversation %d: last entry id %q, want %q", i, id, want)
		}
	}
}

// TestCloseAnswersWaitingCalls closes the store while calls are in flight:
// each returns, with its reply or Closed, and none after Close.
func TestCloseAnswersWaitingCalls(t *testing.T) {
	db := openDB(t, testkit.StartRedis(t), nil, sessions.Limits{})
	ctx := context.Background()
	const n = 200
	errc := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := db.Sessions().Append(ctx, sessions.Inbound{Conv: "api:c" + strconv.Itoa(i), Text: "x"})
			errc <- err
		})
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("calls still waiting 10 s after Close")
	}
	close(errc)
	for err := range errc {
		if err != nil && !errs.Is(err, errs.Closed) {
			t.Errorf("Append during Close = %v, want success or Closed", err)
		}
	}
	if _, err := db.Sessions().Append(ctx, sessions.Inbound{Conv: "api:late", Text: "x"}); !errs.Is(err, errs.Closed) {
		t.Errorf("Append after Close = %v, want Closed", err)
	}
}

// TestCallGivenUpWithItsContext checks a caller stops waiting when its
// context ends, whatever the pipeline it is in.
func TestCallGivenUpWithItsContext(t *testing.T) {
	db := openDB(t, testkit.StartRedis(t), nil, sessions.Limits{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := db.batch.fcall(ctx, scriptQHistory.fn, []string{db.convKey("c", "hist")})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("fcall with a cancelled context = %v, want context.Canceled", err)
	}
}

// TestCallAloneAfterTheServerClosedItsConnections: a call going alone
// right after the server closed every connection of the client (a
// CLIENT KILL, a proxy's restart) takes a live one, so the caller sees
// no error. Calls are never retried (a write may have run), so a call
// must not be sent on a connection the server has closed.
func TestCallAloneAfterTheServerClosedItsConnections(t *testing.T) {
	db := openDB(t, testkit.StartRedis(t), nil, sessions.Limits{})
	ctx := context.Background()
	call := func() error {
		_, err := db.batch.fcall(ctx, scriptQHistory.fn, []string{db.convKey("c", "hist")})
		return err
	}
	for i := range 10 {
		if err := call(); err != nil {
			t.Fatalf("round %d: call before the close: %v", i, err)
		}
		if err := db.client.ClientKillByFilter(ctx, "TYPE", "normal").Err(); err != nil {
			t.Fatal(err)
		}
		if err := call(); err != nil {
			t.Fatalf("round %d: call right after the server closed the connections: %v", i, err)
		}
	}
}
