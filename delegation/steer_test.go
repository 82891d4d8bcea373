package delegation_test

import (
	"context"
	"strings"
	"testing"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/signals"
	"github.com/heraldgw/herald/store/redis"
	"github.com/heraldgw/herald/tools"
)

// stores are the backends a test runs on: their delegation store,
// their signals log, the conversations' metadata and the once-only
// claims.
type stores struct {
	dlg     delegation.Store
	signals signals.Store
	meta    delegation.StatusMeta
	once    lease.OnceStore
}

func eachStore(t *testing.T, run func(t *testing.T, s stores)) {
	t.Run("sqlite", func(t *testing.T) {
		db := openStore(t)
		run(t, stores{db.Delegations(), db.Signals(), db.Sessions(), db.Once()})
	})
	t.Run("redis", func(t *testing.T) {
		srv := testkit.StartRedis(t)
		db, err := redis.Open(context.Background(), redis.Options{URL: srv.URL(), Prefix: srv.Prefix()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		run(t, stores{db.Delegations(), db.Signals(), db.Sessions(), db.Once()})
	})
}

// gatedModel answers each call with its text once released.
type gatedModel struct {
	started, release chan struct{}
	text             string
}

func (m gatedModel) Complete(ctx context.Context, _ llm.Request) (*llm.Response, error) {
	m.started <- struct{}{}
	select {
	case <-m.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &llm.Response{Message: chat.Message{Role: "assistant", Content: m.text}}, nil
}

// TestSteerThatArrivesAfterTheLastToolResult is a steer sent from
// another instance to a child that finishes before that instance's
// signal reaches its runner (here: no one tails the signals at all).
// The tool answered steered, so the child's result must say the steer
// did not land; a steer after the end is rejected.
func TestSteerThatArrivesAfterTheLastToolResult(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores) {
		ctx := context.Background()
		model := gatedModel{started: make(chan struct{}, 1), release: make(chan struct{}), text: "all done"}
		runner, ended := startRunner(t, st.dlg, model)
		svc := &delegation.Service{Store: st.dlg, Signals: st.signals, Runner: runner}
		d, err := svc.Start(ctx, delegation.Request{Conv: "api:steer", Goal: "work"})
		if err != nil {
			t.Fatal(err)
		}
		<-model.started // the child runs on instance a

		// Instance b's delegate_task: no runner of the child there.
		reg := tools.NewRegistry()
		if err := reg.Register(delegation.Toolset, delegation.Tool(delegation.ToolOptions{Store: st.dlg, Signals: st.signals})); err != nil {
			t.Fatal(err)
		}
		other, err := reg.Set([]string{delegation.Toolset})
		if err != nil {
			t.Fatal(err)
		}
		steer := func() string {
			res := other.Call(ctx, &tools.Turn{Conv: "api:steer"}, chat.ToolCall{ID: "1", Name: delegation.ToolName,
				Arguments: `{"action":"steer","subagent_id":"` + d.Children[0].ID + `","message":"check the roof too"}`})
			return res.Content
		}
		if got := steer(); !strings.Contains(got, `"status":"steered"`) {
			t.Fatalf("steer answered %s, want steered", got)
		}
		close(model.release) // it finishes without another tool result
		<-ended
		c, err := st.dlg.Child(ctx, d.Children[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if r := c.Result; r == nil || r.Status != delegation.StatusCompleted || r.PendingSteer != "check the roof too" ||
			!strings.HasSuffix(r.Summary, "did not land: check the roof too)") {
			t.Errorf("result %+v: want completed, pending_steer and the note at the end of the summary", c.Result)
		}
		if got := steer(); !strings.Contains(got, `"status":"rejected"`) {
			t.Errorf("steer after the end answered %s, want rejected", got)
		}
	})
}
