package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/instances"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/store/sqlite"
)

// overviewAnswer is GET /api/v1/overview's answer as a page reads it.
type overviewAnswer struct {
	Instances []instances.Instance `json:"instances"`
	Minute    struct {
		Turns  int64 `json:"turns"`
		Errors int64 `json:"errors"`
	} `json:"minute"`
	Queues map[string]struct {
		Count int  `json:"count"`
		More  bool `json:"more"`
	} `json:"queues"`
}

// GET /api/v1/overview answers the live instances with their minute's
// counts and sum, and each queue's count up to its cap; asked for
// text/event-stream it sends it again when an instance beats; a store
// that cannot be read is a 503.
func TestOverview(t *testing.T) {
	clk := clock.NewFake(epoch)
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	beat := func(id string, c instances.Counts) {
		t.Helper()
		if err := db.Instances().Beat(ctx, instances.Instance{ID: id, Host: "h", PID: 1, Version: "v1", Minute: c}, 15*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	beat("gw-gone", instances.Counts{Turns: 100})
	clk.Advance(20 * time.Second)
	beat("gw-a", instances.Counts{Turns: 4, TurnErrors: 1, SendFailed: 1})
	beat("gw-b", instances.Counts{Turns: 2, ModelErrors: 3})
	if err := db.Approvals().CreateApproval(ctx, approvals.Approval{ID: "appr_1", Conv: "api:c", Key: "k", Tool: "terminal", Action: "rm -rf /"}); err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	ob := &fakeOutbox{
		pending: func(_ context.Context, limit int) ([]outbox.Message, error) {
			return make([]outbox.Message, limit), nil // a backlog beyond the cap
		},
		dead: func(context.Context, int) ([]outbox.Message, error) {
			if down.Load() {
				return nil, errs.E("fake.DeadLetters", errs.Unavailable, "the store is down")
			}
			return make([]outbox.Message, 2), nil
		},
	}
	f := newFixture(t, func(o *api.Options) {
		o.APIKey = testKey
		o.Clock = clk
		o.Routes = []api.Routes{api.OverviewRoutes(api.Overview{Instances: db.Instances(), Queue: db.Sessions(), Outbox: ob,
			Approvals: db.Approvals(), Delegations: db.Delegations(), Boards: db.Kanban()})}
	})
	auth := []string{"Authorization", "Bearer " + testKey}
	code, b := f.do(t, "GET", "/api/v1/overview", "", auth...)
	var got overviewAnswer
	if code != http.StatusOK || json.Unmarshal(b, &got) != nil {
		t.Fatalf("GET /api/v1/overview: %d %s", code, b)
	}
	if len(got.Instances) != 2 || got.Instances[0].ID != "gw-a" || got.Instances[1].ID != "gw-b" || !got.Instances[0].LastSeen.Equal(epoch.Add(20*time.Second)) {
		t.Errorf("instances %+v, want gw-a and gw-b, last seen now", got.Instances)
	}
	if got.Minute.Turns != 6 || got.Minute.Errors != 5 {
		t.Errorf("minute %+v, want 6 turns and 5 errors", got.Minute)
	}
	want := map[string]struct {
		count int
		more  bool
	}{"turns": {0, false}, "outbox_pending": {100, true}, "outbox_dead": {2, false}, "approvals_pending": {1, false},
		"delegations_active": {0, false}, "kanban_running": {0, false}}
	for name, w := range want {
		if q, ok := got.Queues[name]; !ok || q.Count != w.count || q.More != w.more {
			t.Errorf("queue %s = %+v (there: %v), want %+v", name, q, ok, w)
		}
	}
	if code, _ := f.do(t, "GET", "/api/v1/overview", ""); code != http.StatusUnauthorized {
		t.Errorf("without the key: %d, want 401", code)
	}

	// Live: a new instance's beat is sent on the next read.
	stream := f.stream(t, "/api/v1/overview", auth...)
	next := func() overviewAnswer {
		t.Helper()
		ev := stream()
		var a overviewAnswer
		if err := json.Unmarshal([]byte(ev), &a); err != nil {
			t.Fatalf("event %s: %v", ev, err)
		}
		return a
	}
	if first := next(); len(first.Instances) != 2 {
		t.Fatalf("first event: %+v", first)
	}
	waitArmed(t, clk, 2)
	beat("gw-c", instances.Counts{Turns: 1})
	clk.Advance(500 * time.Millisecond)
	if ev := next(); len(ev.Instances) != 3 || ev.Instances[2].ID != "gw-c" || ev.Minute.Turns != 7 {
		t.Errorf("after gw-c beat: %+v", ev)
	}

	down.Store(true)
	if code, b := f.do(t, "GET", "/api/v1/overview", "", auth...); code != http.StatusServiceUnavailable {
		t.Errorf("with a store down: %d %s, want 503", code, b)
	}
}
