package gateway

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/adaptertest"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/store/redis"
	"github.com/heraldgw/herald/store/sqlite"
)

// statusStore is what the status line needs of a store.
type statusStore interface {
	Sessions() sessions.Store
	Once() lease.OnceStore
	Delegations() delegation.Store
}

// eachStatusStore runs f on a SQLite file and on a redis-server.
func eachStatusStore(t *testing.T, f func(t *testing.T, db statusStore)) {
	t.Run("sqlite", func(t *testing.T) {
		db, err := sqlite.Open(filepath.Join(t.TempDir(), "h.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		f(t, db)
	})
	t.Run("redis", func(t *testing.T) {
		srv := testkit.StartRedis(t)
		db, err := redis.Open(context.Background(), redis.Options{URL: srv.URL(), Prefix: srv.Prefix()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		f(t, db)
	})
}

// statusBatch dispatches a batch of three children into db and claims
// them; end ends the next one and returns the delegation as it stands.
func statusBatch(t *testing.T, db statusStore) (end func() delegation.Delegation) {
	t.Helper()
	ctx := context.Background()
	d := delegation.Delegation{ID: "deleg_1", Conv: "slack:C1", Origin: outbox.Target{Platform: "slack", Chat: "C1"}, Source: "tool"}
	for i := range 3 {
		d.Children = append(d.Children, delegation.Child{ID: "sub_" + string(rune('a'+i)), Delegation: d.ID, Index: i, Task: delegation.Task{Goal: "g"}})
	}
	st := db.Delegations()
	if err := st.Create(ctx, delegation.Dispatch{Delegation: d}); err != nil {
		t.Fatal(err)
	}
	_, claims, err := st.Claim(ctx, "w", 3, time.Minute)
	if err != nil || len(claims) != 3 {
		t.Fatalf("Claim = %d, %v", len(claims), err)
	}
	return func() delegation.Delegation {
		t.Helper()
		if _, err := st.End(ctx, claims[0], delegation.Result{Status: delegation.StatusCompleted}); err != nil {
			t.Fatal(err)
		}
		claims = claims[1:]
		got, err := st.Delegation(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
}

func statusLine(db statusStore, pa *adaptertest.Presence, owner string) *backgroundStatus {
	return newBackgroundStatus([]adapters.Adapter{pa}, db.Sessions(), db.Once(), db.Delegations().Delegation, owner, slog.Default())
}

func presenceCalls(pa *adaptertest.Presence) []adaptertest.PresenceCall {
	var got []adaptertest.PresenceCall
	for _, c := range pa.Calls() {
		got = append(got, adaptertest.PresenceCall{Kind: c.Kind, ID: c.ID, Text: c.Text})
	}
	return got
}

func TestBackgroundStatusLine(t *testing.T) {
	eachStatusStore(t, func(t *testing.T, db statusStore) {
		ctx := context.Background()
		pa := &adaptertest.Presence{Adapter: adaptertest.Adapter{Name: "slack"}}
		end := statusBatch(t, db)
		// Two instances end children in turn: the line is one, edited.
		for i := range 3 {
			statusLine(db, pa, []string{"a", "b"}[i%2]).show(ctx, end())
		}
		want := []adaptertest.PresenceCall{
			{Kind: "post", Text: "Background: 1 of 3 sub-agents done"},
			{Kind: "edit", ID: "s1", Text: "Background: 2 of 3 sub-agents done"},
			{Kind: "clear", ID: "s1"},
		}
		if diff := cmp.Diff(want, presenceCalls(pa)); diff != "" {
			t.Errorf("presence calls (-want +got):\n%s", diff)
		}
		meta, err := db.Sessions().Meta(ctx, "slack:C1")
		if err != nil || meta[statusKey("deleg_1")] != "" {
			t.Errorf("metadata %v (%v): want the line's id gone once it was removed", meta, err)
		}
	})
}

// TestBackgroundStatusLinePostedOnce is two instances ending a batch's
// first children at once: the first to claim the post posts the line,
// the other leaves it to it, and the poster shows the count it reads
// once its line's id is kept.
func TestBackgroundStatusLinePostedOnce(t *testing.T) {
	eachStatusStore(t, func(t *testing.T, db statusStore) {
		ctx := context.Background()
		posting, release := make(chan struct{}), make(chan struct{})
		pa := &adaptertest.Presence{Adapter: adaptertest.Adapter{Name: "slack"}, OnStatus: func(_ context.Context, id, _ string) error {
			if id == "" {
				close(posting)
				<-release
			}
			return nil
		}}
		end := statusBatch(t, db)
		first := end()
		posted := make(chan struct{})
		go func() {
			defer close(posted)
			statusLine(db, pa, "a").show(ctx, first)
		}()
		<-posting
		statusLine(db, pa, "b").show(ctx, end()) // finds the post claimed and no line
		close(release)
		<-posted
		want := []adaptertest.PresenceCall{
			{Kind: "post", Text: "Background: 1 of 3 sub-agents done"},
			{Kind: "edit", ID: "s1", Text: "Background: 2 of 3 sub-agents done"},
		}
		if diff := cmp.Diff(want, presenceCalls(pa)); diff != "" {
			t.Errorf("presence calls (-want +got):\n%s", diff)
		}
		statusLine(db, pa, "b").show(ctx, end())
		if got := presenceCalls(pa); len(got) != 3 || got[2].Kind != "clear" || got[2].ID != "s1" {
			t.Errorf("after the last end: %+v, want the line cleared", got)
		}
	})
}
