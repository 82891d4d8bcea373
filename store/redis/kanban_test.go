package redis

import (
	"context"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/store/storetest"
)

// TestKanbanStampedByTheServer checks kb_apply's stamping with the
// server's TIME (the conformance suite stamps with a given clock, in
// Go): each instant of 1970 becomes the server's time plus its offset,
// fractions and offsets past a month included, the run's score with it;
// other instants and a text that reads as an instant are kept, and so
// is a text with %, which kb_apply's format must print back as given;
// Apply's events carry the same time. In both layouts: the sharded one writes
// them in the kanban shard.
func TestKanbanStampedByTheServer(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		place func(*testkit.Redis) storetest.Place
	}{
		{"one server", func(r *testkit.Redis) storetest.Place { return place{r} }},
		{"sharded", func(r *testkit.Redis) storetest.Place { return shardedPlace{place{r}} }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := tc.place(testkit.StartRedis(t))
			kanbanStampedByTheServer(t, p.Open(t, nil, sessions.Limits{}).(*DB))
		})
	}
}

func kanbanStampedByTheServer(t *testing.T, db *DB) {
	ctx := context.Background()
	st := db.Kanban()
	base := kanban.StampBase
	scheduled := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	k := kanban.Card{ID: "t_00000001", Board: "ops", Title: "1970-01-01T00:00:00Z", Status: kanban.StatusRunning,
		Body:      "100% done, %s %d %% %",
		Workspace: kanban.Workspace{Kind: kanban.WorkspaceScratch}, CreatedAt: base, UpdatedAt: base,
		ScheduledAt: scheduled, RetryAt: base.Add(40*24*time.Hour + 1500*time.Millisecond),
		Claim: &kanban.Claim{Owner: "gw-a", Token: 1, Expires: base.Add(15 * time.Minute), Run: "run_1", Started: base.Add(time.Nanosecond)}}
	before := time.Now().Truncate(time.Microsecond)
	evs, err := st.Apply(ctx, kanban.Change{Stamp: true, Cards: []kanban.CardWrite{{Card: k}},
		Runs: []kanban.Run{{ID: "run_1", Card: k.ID, Board: "ops", Started: base}},
		Events: []kanban.Event{{Board: "ops", Card: k.ID, Kind: kanban.EventCreated, Text: "1970-01-01T00:00:00Z", At: base},
			{Board: "ops", Card: k.ID, Kind: kanban.EventCommented, Text: k.Body, At: base.Add(time.Second)}}})
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Card(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	now := got.CreatedAt
	if now.Before(before) || now.After(after) {
		t.Fatalf("stamped at %v, want between %v and %v", now, before, after)
	}
	for name, c := range map[string]struct{ got, want time.Time }{
		"updated_at":   {got.UpdatedAt, now},
		"retry_at":     {got.RetryAt, now.Add(40*24*time.Hour + 1500*time.Millisecond)},
		"scheduled_at": {got.ScheduledAt, scheduled},
		"expires":      {got.Claim.Expires, now.Add(15 * time.Minute)},
		"started":      {got.Claim.Started, now.Add(time.Nanosecond)},
		"the event":    {evs[0].At, now},
	} {
		if !c.got.Equal(c.want) {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
	if got.Title != k.Title || got.Body != k.Body {
		t.Errorf("title, body = %q, %q; want %q, %q kept", got.Title, got.Body, k.Title, k.Body)
	}
	stored, err := st.Events(ctx, kanban.EventQuery{Board: "ops"})
	if err != nil || len(stored) != 2 || !stored[0].At.Equal(now) || stored[0].Text != k.Title ||
		!stored[1].At.Equal(now.Add(time.Second)) || stored[1].Text != k.Body {
		t.Errorf("Events = %+v, %v; want one at %v and one a second later, their texts kept", stored, err, now)
	}
	if rs, err := st.Runs(ctx, k.ID); err != nil || len(rs) != 1 || !rs[0].Started.Equal(now) {
		t.Errorf("Runs = %+v, %v; want one started at %v", rs, err, now)
	}
	score, err := db.client.ZScore(ctx, db.kbKey("runs:"+k.ID), "run_1").Result()
	if err != nil || int64(score) != now.UnixMilli() {
		t.Errorf("the run's score = %v, %v; want %d", score, err, now.UnixMilli())
	}
	// A second write, in the same second or the next, stamps its own
	// time: the texts the script keeps from call to call are by second.
	k2 := kanban.Card{ID: "t_00000002", Board: "ops", Title: "second", Status: kanban.StatusReady,
		Workspace: kanban.Workspace{Kind: kanban.WorkspaceScratch}, CreatedAt: base.Add(time.Microsecond), UpdatedAt: base,
		RetryAt: base.Add(40*24*time.Hour + 1500*time.Millisecond)}
	if _, err := st.Apply(ctx, kanban.Change{Stamp: true, Cards: []kanban.CardWrite{{Card: k2}}}); err != nil {
		t.Fatal(err)
	}
	got2, err := st.Card(ctx, k2.ID)
	if err != nil {
		t.Fatal(err)
	}
	now2 := got2.UpdatedAt
	if now2.Before(now) || now2.After(time.Now()) || !got2.CreatedAt.Equal(now2.Add(time.Microsecond)) ||
		!got2.RetryAt.Equal(now2.Add(40*24*time.Hour+1500*time.Millisecond)) {
		t.Errorf("second card stamped created %v, updated %v, retry %v; want updated after %v, the others at their offsets from it",
			got2.CreatedAt, now2, got2.RetryAt, now)
	}
}
