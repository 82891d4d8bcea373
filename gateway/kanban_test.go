package gateway

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/kanban"
)

// The gateway's dispatcher runs a card made ready in it at once, on the
// lane the config names, and its herald lane runs the worker agent.
func TestGatewayDispatchesCards(t *testing.T) {
	model := testkit.NewModelServer(t)
	model.Respond(func(req testkit.RecordedRequest) testkit.Step {
		if strings.Contains(req.LastUser(), "kanban board") {
			return testkit.Reply("## What I did\nwrote the notes")
		}
		return testkit.Reply("echo")
	})
	cfg := testConfig(t, model)
	script := filepath.Join(t.TempDir(), "lane.sh")
	if err := os.WriteFile(script, []byte("#!/bin/bash\necho \"worked $HERALD_KANBAN_TASK\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.Kanban.Lanes = map[string]config.KanbanLane{"shell": {Command: script, ExitZeroCompletes: true}}
	h := startGateway(t, cfg, Options{})
	svc := h.g.boards.service
	ctx := context.Background()
	shell, _, err := svc.Create(ctx, kanban.CreateSpec{Title: "run the script", Assignee: "shell"})
	if err != nil {
		t.Fatal(err)
	}
	agent, _, err := svc.Create(ctx, kanban.CreateSpec{Title: "write the notes", Assignee: "herald"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ id, want string }{{shell.ID, "worked " + shell.ID}, {agent.ID, "wrote the notes"}} {
		var k kanban.Card
		eventually(t, "card "+tc.id+" done", func() bool {
			k, err = svc.Store.Card(ctx, tc.id)
			return err == nil && k.Status == kanban.StatusDone
		})
		if k.Result == nil || !strings.Contains(k.Result.Summary, tc.want) {
			t.Errorf("card %s result = %+v, want %q", tc.id, k.Result, tc.want)
		}
	}
}
