package gateway

import (
	"html"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
	"github.com/heraldgw/herald/outbox"
)

// The approval flow through the real platform adapters, each against
// its fake platform: what the person sees is what the tests check.

// approvalButtons are the four buttons of approval id's question, in
// order.
func approvalButtons(id string) []outbox.Button {
	return []outbox.Button{
		{Text: "Allow once", Data: "/approve once " + id},
		{Text: "Allow this session", Data: "/approve session " + id},
		{Text: "Always allow", Data: "/approve always " + id},
		{Text: "Deny", Data: "/deny " + id},
	}
}

// approvalID is the id the question's buttons carry.
func approvalID(t *testing.T, data string) string {
	t.Helper()
	f := strings.Fields(data)
	if len(f) == 0 || !strings.HasPrefix(f[len(f)-1], "ap_") {
		t.Fatalf("button data %q names no approval", data)
	}
	return f[len(f)-1]
}

// platformApprovals starts a gateway on SQLite, on a fake clock, with
// commandModel, approvals.timeout of timeout, and every user served;
// platform sets the platform's config.
func platformApprovals(t *testing.T, timeout time.Duration, platform func(*config.Config)) (*gw, *clock.Fake) {
	t.Helper()
	model := testkit.NewModelServer(t)
	model.Respond(commandModel)
	cfg := testConfig(t, model)
	cfg.Tools.Workspace = t.TempDir()
	cfg.Platforms.AllowAllUsers = true
	cfg.Display.Streaming = false
	cfg.Approvals.Timeout = timeout
	platform(&cfg)
	clk := clock.NewFake(time.Now())
	return startGateway(t, cfg, Options{Clock: clk}), clk
}

// telegramApprovals is a gateway serving Telegram against fake, and the
// fake.
func telegramApprovals(t *testing.T, timeout time.Duration) (*telegramfake.Server, *clock.Fake) {
	t.Helper()
	fake := telegramfake.New(t, "")
	_, clk := platformApprovals(t, timeout, func(cfg *config.Config) {
		cfg.Platforms.Telegram = config.Telegram{Token: fake.Token(), APIURL: fake.URL(), Mode: config.TelegramPolling,
			GroupTrigger: config.TriggerMention}
	})
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range fake.Sent(telegramUser) {
				t.Logf("telegram shows %d (edits %d): %q %v", m.ID, m.Edits, m.Text, m.Buttons)
			}
		}
	})
	return fake, clk
}

// telegramUser is the person in the DM, and so the DM's chat.
const telegramUser = 42

// telegramQuestion waits for the question sent to the DM after message
// after (0: any), checks it is one message with an approval's four
// buttons, in order, and returns it and its approval's id.
func telegramQuestion(t *testing.T, fake *telegramfake.Server, after int) (telegramfake.Sent, string) {
	t.Helper()
	var asked []telegramfake.Sent
	testkit.Eventually(t, "a question", func() bool {
		asked = asked[:0]
		for _, m := range fake.Sent(telegramUser) {
			if m.ID > after && (m.Buttons != nil || strings.Contains(m.Text, "Approval needed")) {
				asked = append(asked, m)
			}
		}
		return len(asked) > 0
	})
	if len(asked) > 1 {
		t.Fatalf("%d questions, want one", len(asked))
	}
	q := asked[0]
	if len(q.Buttons) == 0 || len(q.Buttons[0]) == 0 {
		t.Fatalf("question %q has no buttons", q.Text)
	}
	id := approvalID(t, q.Buttons[0][0].Data)
	var want [][]telegramfake.Button
	for _, b := range approvalButtons(id) {
		want = append(want, []telegramfake.Button{{Text: b.Text, Data: b.Data}})
	}
	if diff := cmp.Diff(want, q.Buttons); diff != "" {
		t.Errorf("the question's keyboard (-want +got):\n%s", diff)
	}
	if !strings.Contains(q.Text, dangerous) {
		t.Errorf("question %q does not show the command", q.Text)
	}
	return q, id
}

// telegramReads is Telegram's HTML text as the person reads it.
func telegramReads(text string) string {
	return html.UnescapeString(htmlTag.ReplaceAllString(text, ""))
}

var htmlTag = regexp.MustCompile(`<[^>]*>`)

// telegramShown waits for a message in the DM whose text, as the person
// reads it, holds want and returns it as it stands.
func telegramShown(t *testing.T, fake *telegramfake.Server, want string) telegramfake.Sent {
	t.Helper()
	var got telegramfake.Sent
	testkit.Eventually(t, "Telegram shows "+strconv.Quote(want), func() bool {
		for _, m := range fake.Sent(telegramUser) {
			if strings.Contains(telegramReads(m.Text), want) {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

// telegramPress presses the question's button data as the person and
// waits for the press to be answered.
func telegramPress(t *testing.T, fake *telegramfake.Server, q telegramfake.Sent, data string) {
	t.Helper()
	answered := len(fake.Calls("answerCallbackQuery"))
	u := fake.Press(telegramfake.Pressing{Chat: telegramUser, Message: q.ID, From: telegramUser, Data: data})
	ans := fake.WaitCalls("answerCallbackQuery", answered+1)[answered]
	if ans.Params["callback_query_id"] != "cb"+strconv.FormatInt(u.ID, 10) {
		t.Errorf("answered %v, want the press cb%d", ans.Params, u.ID)
	}
}

// telegramDecided waits for the question to be edited into the decision
// (holding want) and checks its buttons are gone.
func telegramDecided(t *testing.T, fake *telegramfake.Server, q telegramfake.Sent, want string) {
	t.Helper()
	var got telegramfake.Sent
	testkit.Eventually(t, "the question edited to "+strconv.Quote(want), func() bool {
		for _, m := range fake.Sent(telegramUser) {
			if m.ID == q.ID {
				got = m
			}
		}
		return strings.Contains(telegramReads(got.Text), want)
	})
	if got.Buttons != nil || got.Edits == 0 {
		t.Errorf("the decided question stands as %+v, want it edited without buttons", got)
	}
}

// On Telegram, in a DM: Allow once runs the command, Deny makes the
// model read a denial; each press is answered and its question edited
// into who decided what.
func TestTelegramApprovalOnceAndDeny(t *testing.T) {
	fake, _ := telegramApprovals(t, time.Hour)
	fake.Queue(telegramfake.Incoming{Text: "run " + dangerous})
	q, id := telegramQuestion(t, fake, 0)
	telegramPress(t, fake, q, "/approve once "+id)
	telegramDecided(t, fake, q, "Allowed once by telegram:42")
	telegramShown(t, fake, `result: {"exit_code":0,"output":"mkfs.ext4\n"`)

	fake.Queue(telegramfake.Incoming{Text: "run " + dangerous + " twice"})
	q, id = telegramQuestion(t, fake, q.ID)
	telegramPress(t, fake, q, "/deny "+id)
	telegramDecided(t, fake, q, "Denied by telegram:42")
	telegramShown(t, fake, `result: {"error":"denied by telegram:42`)
}

// On Telegram: no answer within approvals.timeout, on the gateway's
// clock, denies; a press on the expired question is answered, and told
// so.
func TestTelegramApprovalTimeoutThenAPress(t *testing.T) {
	// Under the turn's lease, which the clock moving past would end.
	const timeout = 10 * time.Second
	fake, clk := telegramApprovals(t, timeout)
	fake.Queue(telegramfake.Incoming{Text: "run " + dangerous})
	q, id := telegramQuestion(t, fake, 0)
	clk.Advance(timeout)
	telegramShown(t, fake, "No answer in time: the command echo mkfs.ext4 was denied.")
	telegramShown(t, fake, "no answer within 10s: treated as a deny")

	telegramPress(t, fake, q, "/approve once "+id)
	telegramShown(t, fake, "This approval has expired")
}
