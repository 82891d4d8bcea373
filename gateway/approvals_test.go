package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/mcpserver"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// dangerous is a harmless command on the default dangerous list.
const dangerous = "echo mkfs.ext4"

// commandModel runs "run CMD" in the terminal, as a conversation's
// message, a scheduled job's prompt or a sub-agent's goal, "mcp TEXT"
// as the MCP test server's echo, and "delegate GOAL" as a sub-agent's; it answers a tool's result with
// "result: " and what it said, and anything else with "echo: " and it.
func commandModel(req testkit.RecordedRequest) testkit.Step {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "tool" {
		return testkit.Reply("result: " + last.Content)
	}
	text := req.LastUser()
	if strings.HasPrefix(text, "This is a run of the scheduled job") {
		text = text[strings.LastIndex(text, "\n\n")+2:]
	}
	text = strings.TrimPrefix(text, "Goal: ")
	if cmd, ok := strings.CutPrefix(text, "run "); ok {
		args, _ := json.Marshal(map[string]string{"command": cmd})
		return testkit.CallTools(testkit.ToolCall("terminal", string(args)))
	}
	if echo, ok := strings.CutPrefix(text, "mcp "); ok {
		args, _ := json.Marshal(map[string]string{"text": echo})
		return testkit.CallTools(testkit.ToolCall("mcp_test_echo", string(args)))
	}
	if goal, ok := strings.CutPrefix(text, "delegate "); ok {
		args, _ := json.Marshal(map[string]string{"goal": goal})
		return testkit.CallTools(testkit.ToolCall("delegate_task", string(args)))
	}
	return testkit.Reply("echo: " + text)
}

// approvalsGateway is a gateway on a store of gatewayStores with a
// workspace, the chat platform "chatfake" and commandModel.
func approvalsGateway(t *testing.T, set func(*testing.T, *config.Config), change func(*config.Config)) (*gw, *fileChat) {
	t.Helper()
	cfg, model := filesConfig(t, set, nil)
	model.Respond(commandModel)
	if change != nil {
		change(&cfg)
	}
	chat := newFileChat(nil)
	h := startGateway(t, cfg, Options{Adapters: []adapters.Adapter{chat}})
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range chat.messages() {
				t.Logf("sent to %s (%s): %q", m.Conv, m.Kind, m.Text)
			}
		}
	})
	return h, chat
}

var seq int

// say delivers text to conv from sender; meta are its extras.
func (h *gw) say(conv, sender, text string, meta ...string) {
	h.t.Helper()
	seq++
	in := sessions.Inbound{Conv: conv, Sender: sender, MessageID: fmt.Sprintf("in-%d", seq), Text: text}
	if len(meta) == 2 {
		in.Meta = map[string]string{meta[0]: meta[1]}
	}
	if err := h.g.Router().Deliver(context.Background(), in); err != nil {
		h.t.Fatalf("Deliver %q: %v", text, err)
	}
}

// waitSent waits for the platform to have been sent a message to conv
// (or its chat) whose text holds want and returns the latest such one.
func waitSent(t *testing.T, chat *fileChat, conv, want string) outbox.Message {
	t.Helper()
	var got outbox.Message
	testkit.Eventually(t, fmt.Sprintf("%q sent to %s", want, conv), func() bool {
		for _, m := range chat.messages() {
			if (m.Conv == conv || m.Target.String() == conv) && strings.Contains(m.Text, want) {
				got = m
			}
		}
		return got.Text != ""
	})
	return got
}

// questions are the approval questions sent to conv.
func questions(chat *fileChat, conv string) []outbox.Message {
	var out []outbox.Message
	for _, m := range chat.messages() {
		if m.Conv == conv && m.Kind == approvals.KindQuestion {
			out = append(out, m)
		}
	}
	return out
}

// waitQuestion waits for the n-th question to conv and checks its
// buttons; it returns the question and its approval's id.
func waitQuestion(t *testing.T, chat *fileChat, conv string, n int) (outbox.Message, string) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("question %d in %s", n, conv), func() bool { return len(questions(chat, conv)) >= n })
	q := questions(chat, conv)[n-1]
	id := q.Meta[approvals.MetaApproval]
	if want := approvalButtons(id); !slices.Equal(q.Buttons, want) {
		t.Fatalf("buttons %+v, want %+v", q.Buttons, want)
	}
	for _, b := range q.Buttons {
		if len(b.Data) > 64 {
			t.Errorf("button data %q is over 64 bytes", b.Data)
		}
	}
	if !strings.Contains(q.Text, dangerous) || !strings.Contains(q.Text, "dangerous-command pattern") {
		t.Errorf("question %q does not show the command and why it asks", q.Text)
	}
	return q, id
}

// A dangerous command waits for the person: a press of Allow once runs
// it and the model reads its output, and the question says who allowed
// it; /deny is read by the model as a denial; on each store.
func TestGatewayApprovalOnceAndDeny(t *testing.T) {
	for _, store := range gatewayStores {
		t.Run(store.name, func(t *testing.T) {
			h, chat := approvalsGateway(t, store.set, nil)
			const conv = "chatfake:42"
			h.say(conv, "u1", "run "+dangerous)
			q, id := waitQuestion(t, chat, conv, 1)
			h.say(conv, "u1", "/approve once "+id, sessions.MetaPressed, "p-"+q.ID)
			waitSent(t, chat, conv, `result: {"exit_code":0,"output":"mkfs.ext4\n"`)
			edit := waitSent(t, chat, conv, "Allowed once by chatfake:u1")
			if edit.Edits != "p-"+q.ID {
				t.Errorf("the decision edits %q, want the question's message p-%s", edit.Edits, q.ID)
			}

			h.say(conv, "u1", "run "+dangerous)
			_, id = waitQuestion(t, chat, conv, 2)
			h.say(conv, "u1", "/deny")
			waitSent(t, chat, conv, "result: {\"error\":\"denied by chatfake:u1")
			waitSent(t, chat, conv, "Denied by chatfake:u1")
			// A press after the decision is told who took it.
			h.say(conv, "u1", "/approve once "+id, sessions.MetaPressed, "p-x")
			waitSent(t, chat, conv, "Already decided by chatfake:u1 (deny).")
		})
	}
}

// Always allow lets the same pattern run without asking, in every
// conversation; Allow this session until /new.
func TestGatewayApprovalGrants(t *testing.T) {
	h, chat := approvalsGateway(t, gatewayStores[0].set, nil)
	const conv, other = "chatfake:42", "chatfake:43"
	h.say(conv, "u1", "run "+dangerous)
	_, id := waitQuestion(t, chat, conv, 1)
	h.say(conv, "u1", "/approve session "+id)
	waitSent(t, chat, conv, "Allowed for this session by chatfake:u1")
	waitSent(t, chat, conv, "result: {")
	h.say(conv, "u1", "run "+dangerous+" again")
	waitSent(t, chat, conv, `mkfs.ext4 again`)
	if n := len(questions(chat, conv)); n != 1 {
		t.Fatalf("%d questions after a session grant, want 1", n)
	}
	h.say(conv, "u1", "/new")
	waitSent(t, chat, conv, "fresh")
	h.say(conv, "u1", "run "+dangerous+" anew")
	_, id = waitQuestion(t, chat, conv, 2)

	h.say(conv, "u1", "/approve always "+id)
	waitSent(t, chat, conv, "Always allowed by chatfake:u1")
	waitSent(t, chat, conv, `mkfs.ext4 anew`)
	h.say(other, "u2", "run "+dangerous+" elsewhere")
	waitSent(t, chat, other, `mkfs.ext4 elsewhere`)
	if n := len(questions(chat, other)); n != 0 {
		t.Errorf("%d questions after an always grant, want none", n)
	}
}

// In a group only the person whose message asked, or an admin, may
// answer; a stranger is told so and nothing changes.
func TestGatewayApprovalInAGroup(t *testing.T) {
	h, chat := approvalsGateway(t, gatewayStores[0].set, func(cfg *config.Config) {
		cfg.Approvals.Admins = []string{"chatfake:boss"}
	})
	const group = "chatfake:-100"
	h.say(group, "u1", "run "+dangerous)
	_, id := waitQuestion(t, chat, group, 1)
	h.say(group, "stranger", "/approve always "+id)
	waitSent(t, chat, group, "Only the person whose message asked for this, or an approvals admin, may answer it.")
	if got := h.pendingApprovals(group); len(got) != 1 || got[0].ID != id {
		t.Fatalf("pending after a stranger's answer: %+v, want %s", got, id)
	}
	h.say(group, "boss", "/approve "+id)
	waitSent(t, chat, group, "Allowed once by chatfake:boss")
	waitSent(t, chat, group, "result: {")
}

// pendingApprovals lists conv's pending approvals through the API.
func (h *gw) pendingApprovals(conv string) []approvals.Approval {
	h.t.Helper()
	code, body := h.do("GET", "/api/v1/approvals?conversation="+conv, "")
	var res struct {
		Approvals []approvals.Approval `json:"approvals"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil {
		h.t.Fatalf("GET /api/v1/approvals: %d %s", code, body)
	}
	return res.Approvals
}

// No answer within approvals.timeout is a deny the model reads; a press
// after it is told the approval expired.
func TestGatewayApprovalTimeout(t *testing.T) {
	h, chat := approvalsGateway(t, gatewayStores[0].set, func(cfg *config.Config) {
		cfg.Approvals.Timeout = 300 * time.Millisecond
	})
	const conv = "chatfake:42"
	h.say(conv, "u1", "run "+dangerous)
	q, id := waitQuestion(t, chat, conv, 1)
	waitSent(t, chat, conv, `no answer within 300ms: treated as a deny; do not try it another way without asking`)
	waitSent(t, chat, conv, "No answer in time")
	h.say(conv, "u1", "/approve once "+id, sessions.MetaPressed, "p-"+q.ID)
	waitSent(t, chat, conv, "This approval has expired")
}

// The API lists and answers approvals: 400 for a bad decision, 404 for
// an unknown approval, 409 for one decided before, saying by whom.
func TestGatewayApprovalAPI(t *testing.T) {
	h, chat := approvalsGateway(t, gatewayStores[0].set, nil)
	const conv = "chatfake:42"
	h.say(conv, "u1", "run "+dangerous)
	_, id := waitQuestion(t, chat, conv, 1)
	got := h.pendingApprovals(conv)
	if len(got) != 1 || got[0].ID != id || got[0].Action != dangerous || got[0].Asker != "chatfake:u1" {
		t.Fatalf("pending %+v, want %s asked by chatfake:u1", got, id)
	}
	for _, tc := range []struct {
		id, body string
		code     int
		want     string
	}{
		{id, `{"decision":"maybe"}`, http.StatusBadRequest, "not once, session, always or deny"},
		{"ap_nope", `{"decision":"once"}`, http.StatusNotFound, "no approval"},
		{id, `{"decision":"once"}`, http.StatusOK, `"decision":"once"`},
		{id, `{"decision":"deny"}`, http.StatusConflict, "once by api"},
	} {
		code, body := h.do("POST", "/api/v1/approvals/"+tc.id, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s %s: %d %s, want %d with %q", tc.id, tc.body, code, body, tc.code, tc.want)
		}
	}
	waitSent(t, chat, conv, "result: {")
	if got := h.pendingApprovals(conv); len(got) != 0 {
		t.Errorf("pending after the answer: %+v", got)
	}
}

// approvals.deny refuses a command, approved for good or not, with
// approvals off too; with approvals off a dangerous command runs.
func TestGatewayApprovalDenyListAndOff(t *testing.T) {
	h, chat := approvalsGateway(t, gatewayStores[0].set, func(cfg *config.Config) {
		cfg.Approvals.Mode = approvals.ModeOff
		cfg.Approvals.Deny = []string{`\bforbidden\b`}
	})
	const conv = "chatfake:42"
	h.say(conv, "u1", "run "+dangerous)
	waitSent(t, chat, conv, `mkfs.ext4\n`)
	h.say(conv, "u1", "run echo forbidden")
	waitSent(t, chat, conv, `refused: the command matches approvals.deny (pattern \\bforbidden\\b)`)
	if n := len(questions(chat, conv)); n != 0 {
		t.Errorf("%d questions with approvals off, want none", n)
	}
	if !strings.Contains(h.logs.String(), "approvals are off") {
		t.Error("no warning at start that approvals are off")
	}

	h2, chat2 := approvalsGateway(t, gatewayStores[0].set, func(cfg *config.Config) {
		cfg.Approvals.Deny = []string{`ext4`}
	})
	err := h2.g.Store().Approvals().AddGrant(context.Background(), approvals.Grant{Pattern: `\bmkfs(\.\w+)?\b`, GrantedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	h2.say(conv, "u1", "run "+dangerous)
	waitSent(t, chat2, conv, "refused: the command matches approvals.deny (pattern ext4)")
}

// With nobody to ask (a scheduled job's fire, a sub-agent) a dangerous
// command is refused by approvals.unattended: deny, saying why.
func TestGatewayApprovalUnattended(t *testing.T) {
	h, chat := approvalsGateway(t, gatewayStores[0].set, nil)
	const conv = "chatfake:42"
	h.say(conv, "u1", "/cron add every 1h run "+dangerous)
	waitSent(t, chat, conv, "Scheduled")
	jobs := h.cronJobs()
	if len(jobs) != 1 {
		t.Fatalf("jobs %+v, want one", jobs)
	}
	h.say(conv, "u1", "/cron run "+jobs[0].ID)
	waitSent(t, chat, conv, "this is a scheduled job's run, with nobody to ask")

	h.say(conv, "u1", "delegate run "+dangerous)
	waitSent(t, chat, conv, "this is a sub-agent, with nobody to ask")
	if n := len(questions(chat, conv)); n != 0 {
		t.Errorf("%d questions asked with nobody to ask, want none", n)
	}
}

// With delegation.subagent_approvals: ask, a sub-agent's dangerous
// command is asked of its parent conversation's person, there; once
// allowed it runs in the sub-agent, whose result comes back.
func TestGatewayApprovalChildAsksItsParent(t *testing.T) {
	h, chat := approvalsGateway(t, gatewayStores[0].set, func(c *config.Config) { c.Delegation.SubagentApprovals = "ask" })
	const conv = "chatfake:42"
	h.say(conv, "u1", "delegate run "+dangerous)
	q, id := waitQuestion(t, chat, conv, 1)
	if !strings.Contains(q.Text, "a sub-agent of this conversation (sub_") {
		t.Errorf("question %q does not say a sub-agent asks", q.Text)
	}
	h.say(conv, "stranger", "/approve once "+id)
	waitSent(t, chat, conv, "Only the person whose message asked for this")
	h.say(conv, "u1", "/approve once "+id, sessions.MetaPressed, "p-"+q.ID)
	waitSent(t, chat, conv, "Allowed once by chatfake:u1")
	waitSent(t, chat, conv, "mkfs.ext4")
	if n := len(questions(chat, conv)); n != 1 {
		t.Errorf("%d questions, want one", n)
	}
}

// A turn waiting on one gateway runs when the person answers on
// another that shares its store: the decision's signal wakes it.
func TestGatewayApprovalAcrossGateways(t *testing.T) {
	for _, store := range sharedStores {
		t.Run(store.backend, func(t *testing.T) {
			point := store.point(t)
			model := testkit.NewModelServer(t)
			model.Respond(commandModel)
			chat := newFileChat(nil)
			start := func(name string) *gw {
				cfg := testConfig(t, model)
				cfg.Tools.Workspace = t.TempDir()
				point(&cfg)
				return startGateway(t, cfg, Options{Name: name, Adapters: []adapters.Adapter{chat}})
			}
			a, b := start("a"), start("b")
			const conv = "chatfake:42"
			a.say(conv, "u1", "run "+dangerous)
			_, id := waitQuestion(t, chat, conv, 1)
			if running, ok := a.g.turns.RunningTurn(conv); !ok {
				t.Fatalf("the turn does not run on gateway a (%+v)", running)
			}
			b.say(conv, "u1", "/approve once "+id)
			waitSent(t, chat, conv, `result: {"exit_code":0,"output":"mkfs.ext4\n"`)
			waitSent(t, chat, conv, "Allowed once by chatfake:u1")
		})
	}
}

// A tool approvals.tools names asks before each call, MCP tools
// included, showing its arguments with herald's secrets masked; the
// call runs once allowed.
func TestGatewayApprovalOfATool(t *testing.T) {
	srv := httptest.NewServer(mcpserver.Handler())
	t.Cleanup(srv.Close)
	h, chat := approvalsGateway(t, gatewayStores[0].set, func(cfg *config.Config) {
		cfg.MCPServers = map[string]config.MCPServer{"test": {URL: srv.URL}}
		cfg.Approvals.Tools = []string{"mcp_test_*"}
		cfg.Model.APIKey = "sk-approval-secret-1234"
	})
	const conv = "chatfake:42"
	asked := 0
	testkit.Eventually(t, "the MCP server ready", func() bool {
		var answers []string
		for _, m := range chat.messages() {
			if strings.HasPrefix(m.Text, "test (http)") {
				answers = append(answers, m.Text)
			}
		}
		if len(answers) > 0 && strings.HasPrefix(answers[len(answers)-1], "test (http): ready") {
			return true
		}
		if len(answers) == asked {
			asked++
			h.say(conv, "u1", "/mcp")
		}
		return false
	})
	h.say(conv, "u1", "mcp hello sk-approval-secret-1234")
	testkit.Eventually(t, "the question", func() bool { return len(questions(chat, conv)) == 1 })
	q := questions(chat, conv)[0]
	if !strings.Contains(q.Text, "call the tool mcp_test_echo") || !strings.Contains(q.Text, "approvals.tools names mcp_test_echo") || strings.Contains(q.Text, "sk-approval-secret-1234") {
		t.Errorf("question %q: want the tool, why, and no secret", q.Text)
	}
	h.say(conv, "u1", "/approve")
	waitSent(t, chat, conv, "result: hello")
}

// In a conversation of the local API the question and its decision are
// timeline items, marked with the approval and the decision.
func TestGatewayApprovalInTheTimeline(t *testing.T) {
	h, _ := approvalsGateway(t, gatewayStores[0].set, nil)
	h.post("t1", "run "+dangerous)
	q := h.waitItem("t1", "Approval needed: run this command?")[0]
	h.post("t1", "/approve")
	d := h.waitItem("t1", "Allowed once by api:")[0]
	if q.Meta[approvals.MetaApproval] == "" || d.Meta[approvals.MetaApproval] != q.Meta[approvals.MetaApproval] ||
		d.Meta[approvals.MetaDecision] != "once" || !strings.HasPrefix(d.Meta[approvals.MetaDecider], "api:") {
		t.Errorf("question meta %v, decision meta %v", q.Meta, d.Meta)
	}
	h.waitItem("t1", `result: {"exit_code":0`)
}
