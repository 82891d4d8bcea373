package gateway

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/kanban"
)

// The herald lane's agent is told where its card's attachments are, in
// the gateway's board home.
func TestGatewayWorkerAgentIsToldItsAttachments(t *testing.T) {
	model := testkit.NewModelServer(t)
	var (
		mu     sync.Mutex
		prompt string
	)
	model.Respond(func(req testkit.RecordedRequest) testkit.Step {
		if afterTool(req) {
			return testkit.Reply("reported")
		}
		if strings.Contains(req.LastUser(), "kanban board") {
			mu.Lock()
			prompt = req.LastUser()
			mu.Unlock()
			return testkit.CallTools(testkit.ToolCall("kanban_complete", `{"summary":"read the spec"}`))
		}
		return testkit.Reply("echo")
	})
	cfg := testConfig(t, model)
	h := startGateway(t, cfg, Options{})
	svc := h.g.boards
	ctx := context.Background()
	// In triage, the card waits for a person: no dispatch takes it
	// before its attachment is there.
	k, _, err := svc.Create(ctx, kanban.CreateSpec{Title: "read the spec", Assignee: "herald", Status: kanban.StatusTriage})
	if err != nil {
		t.Fatal(err)
	}
	a, err := svc.Attach(ctx, k.ID, "spec.md", strings.NewReader("# the spec"), "test")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cfg.Home, "kanban", "attachments", k.ID, "spec.md"); a.Path != want {
		t.Errorf("the attachment is at %s, want %s", a.Path, want)
	}
	if _, err := svc.Unblock(ctx, k.ID, "test"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "card "+k.ID+" done", func() bool {
		k, err = svc.Store.Card(ctx, k.ID)
		return err == nil && k.Status == kanban.StatusDone
	})
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(prompt, "Files attached to it:\n- "+a.Path) {
		t.Errorf("the worker agent was told %q, want the attachment's path", prompt)
	}
}
