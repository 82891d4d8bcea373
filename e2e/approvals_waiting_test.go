package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/heraldgw/herald/internal/testkit"
)

// A `herald gateway` killed while its turn waits for an approval: the
// gateway started again runs the turn again from its entry, which asks
// again, once; the earlier question has expired, and answering it says
// so; the new one's answer runs the command once. On one redis-server,
// and on one SQLite file.
func TestApprovalAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		store func(t *testing.T) string
	}{
		{desc: "redis", store: func(t *testing.T) string {
			redis := testkit.StartRedis(t)
			return fmt.Sprintf("  backend: redis\n  redis_url: %s\n  redis_prefix: %q\n", redis.URL(), redis.Prefix())
		}},
		{desc: "sqlite", store: func(*testing.T) string { return "" }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			approvalAfterRestart(t, tc.store(t))
		})
	}
}

func approvalAfterRestart(t *testing.T, store string) {
	const conv = "rs"
	workspace := t.TempDir()
	marks := filepath.Join(workspace, "marks")
	model := testkit.NewModelServer(t)
	// The dangerous pattern (mkfs) asks; what runs appends a line.
	model.Respond(commandModel("echo mkfs.ext4 >> marks"))
	home := t.TempDir()
	writeConfig(t, home, fmt.Sprintf(`
store:
  lease_ttl: %s
%shttp:
  addr: 127.0.0.1:0
model:
  base_url: %s
  name: %s
tools:
  workspace: %s
`, leaseTTL, store, model.URL(), modelName, workspace))

	first := startChild(t, "gateway", home)
	first.api().mustPost(t, conv, "format the disk")
	old := waitPending(t, first.base, conv, "")
	first.kill()

	restarted := startChild(t, "restarted gateway", home)
	asked := waitPending(t, restarted.base, conv, old)
	if n := model.Count(); n != 2 {
		t.Errorf("the model got %d requests before the second question, want 2 (the killed turn's and its run again)", n)
	}
	var decided []struct {
		ID        string `json:"id"`
		Decision  string `json:"decision"`
		DecidedBy string `json:"decided_by"`
	}
	cliJSON(t, home, &decided, "approvals", "list", "--decided", "--conv", "api:"+conv)
	if len(decided) != 1 || decided[0].ID != old || decided[0].Decision != "expired" {
		t.Errorf("decided approvals %+v, want the first question (%s) expired", decided, old)
	}

	status, body := postDecision(t, restarted.base, old, "once")
	if status != http.StatusConflict || !strings.Contains(body, "expired") {
		t.Errorf("POST once on the expired %s: %d %s, want 409 saying it expired", old, status, body)
	}
	api := restarted.api()
	api.mustPost(t, conv, "/approve once "+old)
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		items, err := api.timeline(conv)
		if err != nil {
			return false, err.Error()
		}
		for _, it := range ofKind(items, kindCommand) {
			if it.Text == "This approval has expired." {
				return true, ""
			}
		}
		return false, fmt.Sprintf("timeline %v", items)
	})
	if got := pendingIDs(t, restarted.base, conv); len(got) != 1 || got[0] != asked {
		t.Fatalf("pending after answering the expired one: %v, want only %s", got, asked)
	}

	if status, body := postDecision(t, restarted.base, asked, "once"); status != http.StatusOK {
		t.Fatalf("POST once on %s: %d %s", asked, status, body)
	}
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		items, err := api.timeline(conv)
		if err != nil {
			return false, err.Error()
		}
		return len(ofKind(items, kindReply)) > 0, fmt.Sprintf("timeline %v", items)
	})
	b, err := os.ReadFile(marks)
	if err != nil {
		t.Fatalf("the command never ran: %v", err)
	}
	if string(b) != "mkfs.ext4\n" {
		t.Errorf("the command's file holds %q, want one line: it ran once", b)
	}
	cliJSON(t, home, &decided, "approvals", "list", "--decided", "--conv", "api:"+conv)
	if len(decided) != 2 || decided[0].ID != asked || decided[0].Decision != "once" || decided[0].DecidedBy != "api" {
		t.Errorf("decided approvals %+v, want %s allowed once by api, and the expired one", decided, asked)
	}
}

// waitPending waits until conv has one pending approval other than not
// (none: any), as gateway base lists them, and returns its id.
func waitPending(t *testing.T, base, conv, not string) string {
	t.Helper()
	var ids []string
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		ids = pendingIDs(t, base, conv)
		return len(ids) == 1 && ids[0] != not, fmt.Sprintf("pending approvals of %s: %v, want one other than %q", conv, ids, not)
	})
	return ids[0]
}

// pendingIDs lists the ids of conv's pending approvals.
func pendingIDs(t *testing.T, base, conv string) []string {
	t.Helper()
	body := get(t, base+"/api/v1/approvals?conversation="+conv)
	var res struct{ Approvals []struct{ ID string } }
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatalf("GET approvals of %s: %v in %s", conv, err, body)
	}
	var ids []string
	for _, a := range res.Approvals {
		ids = append(ids, a.ID)
	}
	return ids
}

// postDecision answers approval id with decision through the API, and
// returns the status and the body.
func postDecision(t *testing.T, base, id, decision string) (int, string) {
	t.Helper()
	res, err := http.Post(base+"/api/v1/approvals/"+id, "application/json", strings.NewReader(`{"decision":"`+decision+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// A streamed completion whose turn waits for an approval shows the
// question as a chunk, its id and how to answer it, while it is
// pending; answered through the API, the stream goes on with the
// command's result, once.
func TestApprovalInAStreamedCompletion(t *testing.T) {
	t.Parallel()
	model := testkit.NewModelServer(t)
	model.Respond(commandModel("echo mkfs.ext4 >> marks"))
	cfg := baseConfig(t, model)
	cfg.Tools.Workspace = t.TempDir()
	gw := startInProcess(t, cfg)
	base := "http://" + gw.g.Addr()

	ctx, cancel := context.WithTimeout(context.Background(), waitReply)
	defer cancel()
	client := openAIClient(base, "st")
	stream := client.Chat.Completions.NewStreaming(ctx, userTurn("format the disk"))
	defer stream.Close()
	var text strings.Builder
	id := ""
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Delta.Content)
		}
		if id != "" {
			continue
		}
		id = approvalID.FindString(text.String())
		if id == "" {
			continue
		}
		// The question came while the turn waits on it.
		if got := pendingIDs(t, base, "st"); len(got) != 1 || got[0] != id {
			t.Fatalf("pending approvals %v when the stream showed %s, want it alone", got, id)
		}
		if _, err := os.Stat(filepath.Join(cfg.Tools.Workspace, "marks")); err == nil {
			t.Fatal("the command ran before it was allowed")
		}
		for _, want := range []string{"echo mkfs.ext4 >> marks", "/approve [once|session|always] " + id, "POST /api/v1/approvals/" + id} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("the streamed question %q does not say %q", text.String(), want)
			}
		}
		if status, body := postDecision(t, base, id, "once"); status != http.StatusOK {
			t.Fatalf("POST once on %s: %d %s", id, status, body)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("the stream ended with %v after %q", err, text.String())
	}
	got := text.String()
	if id == "" {
		t.Fatalf("the stream %q showed no approval", got)
	}
	question := strings.Index(got, id)
	result := strings.Index(got, `result: {"exit_code":0`)
	if question < 0 || result < question || strings.Count(got, "result: ") != 1 {
		t.Errorf("the stream %q: want the question, then the command's result once", got)
	}
	b, err := os.ReadFile(filepath.Join(cfg.Tools.Workspace, "marks"))
	if err != nil || string(b) != "mkfs.ext4\n" {
		t.Errorf("the command's file holds %q (%v), want one line", b, err)
	}
}

// approvalID finds an approval's id in a text.
var approvalID = regexp.MustCompile(`ap_[0-9a-f]{16}`)

// commandModel answers every message with a terminal call of command,
// and a tool's result with "result: " and the result.
func commandModel(command string) func(testkit.RecordedRequest) testkit.Step {
	args, _ := json.Marshal(map[string]string{"command": command})
	return func(r testkit.RecordedRequest) testkit.Step {
		if last := r.Messages[len(r.Messages)-1]; last.Role == "tool" {
			return testkit.Reply("result: " + last.Content)
		}
		return testkit.CallTools(testkit.ToolCall("terminal", string(args)))
	}
}
