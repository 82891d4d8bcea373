package gateway

import (
	"fmt"
	"html"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters/slack"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/discordfake"
	"github.com/heraldgw/herald/internal/testkit/slackfake"
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

// wantQuestion checks a question shows the dangerous command and an
// approval's four buttons, in order, and returns the approval's id.
func wantQuestion(t *testing.T, question string, got []outbox.Button) string {
	t.Helper()
	if !strings.Contains(question, dangerous) {
		t.Errorf("question %q does not show the command", question)
	}
	if len(got) == 0 {
		t.Fatalf("question %q has no buttons", question)
	}
	f := strings.Fields(got[0].Data)
	id := f[len(f)-1]
	if diff := cmp.Diff(approvalButtons(id), got); diff != "" {
		t.Errorf("the question's buttons (-want +got):\n%s", diff)
	}
	return id
}

// platformApprovals starts a gateway on a store of gatewayStores (set),
// on a fake clock, with commandModel, approvals.timeout of timeout, and
// every user served; platform sets the platform's config.
func platformApprovals(t *testing.T, set func(*testing.T, *config.Config), timeout time.Duration, platform func(*config.Config)) (*gw, *clock.Fake) {
	t.Helper()
	cfg, model := filesConfig(t, set, nil)
	model.Respond(commandModel)
	cfg.Platforms.AllowAllUsers = true
	// A reply is one message, sent once its turn committed.
	cfg.Display.Streaming = false
	cfg.Approvals.Timeout = timeout
	platform(&cfg)
	clk := clock.NewFake(time.Now())
	return startGateway(t, cfg, Options{Clock: clk}), clk
}

// telegramApprovals is a gateway serving Telegram against fake, and the
// fake.
func telegramApprovals(t *testing.T, set func(*testing.T, *config.Config), timeout time.Duration) (*telegramfake.Server, *clock.Fake, *gw) {
	t.Helper()
	fake := telegramfake.New(t, "")
	h, clk := platformApprovals(t, set, timeout, func(cfg *config.Config) {
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
	return fake, clk, h
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
	var got []outbox.Button
	for _, row := range q.Buttons {
		if len(row) != 1 {
			t.Errorf("a row of the keyboard holds %v, want one button", row)
		}
		for _, b := range row {
			got = append(got, outbox.Button{Text: b.Text, Data: b.Data})
		}
	}
	return q, wantQuestion(t, q.Text, got)
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

// On Telegram, in a DM, on each store: Allow once runs the command,
// Deny makes the model read a denial; each press is answered and its
// question edited into who decided what.
func TestTelegramApprovalOnceAndDeny(t *testing.T) {
	for _, store := range gatewayStores {
		t.Run(store.name, func(t *testing.T) {
			fake, _, _ := telegramApprovals(t, store.set, time.Hour)
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
		})
	}
}

// On Telegram: no answer within approvals.timeout, on the gateway's
// clock, denies; a press on the expired question is answered, and told
// so.
func TestTelegramApprovalTimeoutThenAPress(t *testing.T) {
	// The clock steps past the deadline at once: a step past the turn's
	// lease (store.lease_ttl), renewed on the wall clock, would end it.
	const timeout = 10 * time.Second
	fake, clk, h := telegramApprovals(t, gatewayStores[0].set, timeout)
	fake.Queue(telegramfake.Incoming{Text: "run " + dangerous})
	q, id := telegramQuestion(t, fake, 0)
	// Once Telegram accepted the question, herald knows its message.
	testkit.Eventually(t, "the question's message recorded", func() bool {
		p := h.pendingApprovals(fmt.Sprintf("telegram:%d", telegramUser))
		return len(p) == 1 && p[0].MessageID == strconv.Itoa(q.ID)
	})
	clk.Advance(timeout)
	// The question itself says how it ended, its buttons gone: herald
	// learned its message's id when it was sent.
	telegramDecided(t, fake, q, "No answer in time: the command echo mkfs.ext4 was denied.")
	telegramShown(t, fake, "no answer within 10s: treated as a deny")

	telegramPress(t, fake, q, "/approve once "+id)
	telegramShown(t, fake, "This approval has expired")
}

// slackChat is a Slack workspace served by a gateway, against its fake:
// people mention herald in a channel, and herald answers in the
// mention's thread.
type slackChat struct {
	t    *testing.T
	fake *slackfake.Server
	base string // the gateway's address
}

const slackChannel, slackAlice, slackMallory = "C0WORK", "U0ALICE", "U0MALLORY"

func slackApprovals(t *testing.T) *slackChat {
	t.Helper()
	fake := slackfake.New(t)
	h, _ := platformApprovals(t, gatewayStores[0].set, time.Hour, func(cfg *config.Config) {
		cfg.Platforms.Slack = config.Slack{BotToken: fake.BotToken, SigningSecret: "secret", APIURL: fake.URL()}
	})
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range fake.Calls("") {
				t.Logf("slack %s %s: %q", c.Method, c.TS, c.Params.Get("text"))
			}
		}
	})
	return &slackChat{t: t, fake: fake, base: "http://" + h.g.Addr()}
}

// post posts a signed request of Slack's to the gateway and returns the
// status it answered.
func (s *slackChat) post(path, contentType string, body []byte) int {
	s.t.Helper()
	res, err := http.DefaultClient.Do(slackfake.SignedRequest(s.base+path, "secret", time.Now(), contentType, body))
	if err != nil {
		s.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// mention has alice mention herald with text in the channel, starting
// the thread ts.
func (s *slackChat) mention(ts, text string) {
	s.t.Helper()
	status := s.post(slack.EventsPath, "application/json", slackfake.EventCallback(s.fake.TeamID, "Ev"+ts, map[string]any{
		"type": "app_mention", "user": slackAlice, "text": "<@" + s.fake.BotUserID + "> " + text,
		"ts": ts, "channel": slackChannel, "event_ts": ts,
	}))
	if status != http.StatusOK {
		s.t.Fatalf("the mention answered %d", status)
	}
}

// thread is the bot's messages in thread ts, as they stand.
func (s *slackChat) thread(ts string) []slackfake.Message {
	var out []slackfake.Message
	for _, c := range s.fake.Calls("chat.postMessage") {
		if m, ok := s.fake.Message(slackChannel, c.TS); ok && m.Thread == ts && !m.Deleted {
			out = append(out, m)
		}
	}
	return out
}

// question waits for the question in thread ts, checks it is one
// message with an approval's four buttons, in order, and returns it.
func (s *slackChat) question(ts string) slackfake.Message {
	s.t.Helper()
	var asked []slackfake.Message
	testkit.Eventually(s.t, "a question in "+ts, func() bool {
		asked = asked[:0]
		for _, m := range s.thread(ts) {
			if len(m.Buttons()) > 0 || strings.Contains(m.Text, "Approval needed") {
				asked = append(asked, m)
			}
		}
		return len(asked) > 0
	})
	if len(asked) > 1 {
		s.t.Fatalf("%d questions in %s, want one", len(asked), ts)
	}
	q := asked[0]
	var got []outbox.Button
	for _, e := range q.Buttons() {
		got = append(got, outbox.Button{Text: e.Text.Text, Data: e.Value})
	}
	wantQuestion(s.t, q.Text, got)
	return q
}

// ask has alice ask herald to run the dangerous command, starting the
// thread ts, and returns the question.
func (s *slackChat) ask(ts string) slackfake.Message {
	s.t.Helper()
	s.mention(ts, "run "+dangerous)
	return s.question(ts)
}

// press has user press button i of q and checks Slack's request was
// answered 200.
func (s *slackChat) press(q slackfake.Message, i int, user string) {
	s.t.Helper()
	payload := s.fake.Press(slackfake.Press{Channel: slackChannel, TS: q.TS, ActionID: q.Buttons()[i].ActionID, User: user})
	if status := s.post(slack.InteractivityPath, "application/x-www-form-urlencoded", slackfake.Form(payload)); status != http.StatusOK {
		s.t.Fatalf("the press answered %d, want 200", status)
	}
}

// shown waits for a message in thread ts holding want.
func (s *slackChat) shown(ts, want string) {
	s.t.Helper()
	testkit.Eventually(s.t, fmt.Sprintf("%q in thread %s", want, ts), func() bool {
		for _, m := range s.thread(ts) {
			if strings.Contains(m.Text, want) {
				return true
			}
		}
		return false
	})
}

// decided waits for q to be updated into the decision (holding want)
// and checks its buttons are gone.
func (s *slackChat) decided(q slackfake.Message, want string) {
	s.t.Helper()
	var got slackfake.Message
	testkit.Eventually(s.t, "the question updated to "+strconv.Quote(want), func() bool {
		got, _ = s.fake.Message(slackChannel, q.TS)
		return strings.Contains(got.Text, want)
	})
	if got.Blocks != nil || got.Updates == 0 {
		s.t.Errorf("the decided question stands as %+v, want it updated without buttons", got)
	}
}

// On Slack, in a channel's thread: Allow once runs the command, Deny
// makes the model read a denial.
func TestSlackApprovalOnceAndDeny(t *testing.T) {
	s := slackApprovals(t)
	const thread = "1700000100.000100"
	q := s.ask(thread)
	s.press(q, 0, slackAlice)
	s.decided(q, "Allowed once by slack:"+slackAlice)
	s.shown(thread, `result: {"exit_code":0,"output":"mkfs.ext4\n"`)

	const another = "1700000200.000100"
	q = s.ask(another)
	s.press(q, 3, slackAlice)
	s.decided(q, "Denied by slack:"+slackAlice)
	s.shown(another, `result: {"error":"denied by slack:`+slackAlice)
}

// On Slack, in a channel: a stranger's press is refused, and nothing is
// decided; the asker's Always allow then runs it, and the command runs
// in another thread without asking.
func TestSlackApprovalStrangerThenAlways(t *testing.T) {
	s := slackApprovals(t)
	const thread = "1700000100.000100"
	q := s.ask(thread)
	s.press(q, 2, slackMallory)
	s.shown(thread, "Only the person whose message asked for this, or an approvals admin, may answer it.")
	if m, _ := s.fake.Message(slackChannel, q.TS); len(m.Buttons()) != 4 || m.Updates != 0 {
		t.Fatalf("after a stranger's press the question stands as %+v, want it asking still", m)
	}

	s.press(q, 2, slackAlice)
	s.decided(q, "Always allowed by slack:"+slackAlice)
	s.shown(thread, `result: {"exit_code":0`)

	const another = "1700000200.000100"
	s.mention(another, "run "+dangerous+" elsewhere")
	s.shown(another, `mkfs.ext4 elsewhere\n`)
	for _, m := range s.thread(another) {
		if len(m.Buttons()) > 0 || strings.Contains(m.Text, "Approval needed") {
			t.Errorf("asked %q after an always grant", m.Text)
		}
	}
}

// discordChat is a DM with herald on Discord, served by a gateway,
// against its fake.
type discordChat struct {
	t    *testing.T
	fake *discordfake.Server
}

const discordDM, discordAda = "140000000000000001", "150000000000000001"

func discordApprovals(t *testing.T) *discordChat {
	t.Helper()
	fake := discordfake.New(t, discordfake.Options{})
	platformApprovals(t, gatewayStores[0].set, time.Hour, func(cfg *config.Config) {
		cfg.Platforms.Discord.Token, cfg.Platforms.Discord.APIURL = fake.Token(), fake.URL()
	})
	d := &discordChat{t: t, fake: fake}
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range d.shown() {
				t.Logf("discord shows %s: %q %+v", m.ID, m.Content, m.Components)
			}
		}
	})
	return d
}

// say has ada send text in the DM.
func (d *discordChat) say(text string) {
	d.fake.SendMessage(discordfake.MessageEvent{ChannelID: discordDM, Author: discordfake.User{ID: discordAda, Username: "ada"}, Content: text})
}

// shown is the bot's messages in the DM, as they stand.
func (d *discordChat) shown() []discordfake.Message {
	var out []discordfake.Message
	for _, m := range d.fake.Messages() {
		if now, ok := d.fake.Message(m.ID); ok && m.ChannelID == discordDM && !slices.Contains(d.fake.Deletes(), m.ID) {
			out = append(out, now)
		}
	}
	return out
}

// question waits for the question sent after message after ("": any),
// checks it is one message with an approval's four buttons, in order,
// and returns it and its approval's id.
func (d *discordChat) question(after string) (discordfake.Message, string) {
	d.t.Helper()
	var asked []discordfake.Message
	testkit.Eventually(d.t, "a question", func() bool {
		asked = asked[:0]
		for _, m := range d.shown() {
			if m.ID > after && (len(m.Components) > 0 || strings.Contains(m.Content, "Approval needed")) {
				asked = append(asked, m)
			}
		}
		return len(asked) > 0
	})
	if len(asked) > 1 {
		d.t.Fatalf("%d questions, want one", len(asked))
	}
	q := asked[0]
	var got []outbox.Button
	for _, r := range q.Components {
		for _, b := range r.Components {
			got = append(got, outbox.Button{Text: b.Label, Data: b.CustomID})
		}
	}
	return q, wantQuestion(d.t, q.Content, got)
}

// press has ada press button data of q and waits for the press to be
// answered.
func (d *discordChat) press(q discordfake.Message, data string) {
	d.t.Helper()
	it := d.fake.SendPress(discordfake.PressEvent{MessageID: q.ID, CustomID: data, ChannelType: discordfake.ChannelDM,
		User: discordfake.User{ID: discordAda, Username: "ada"}})
	var answer discordfake.Callback
	d.fake.Wait("the press answered", func() bool {
		i := slices.IndexFunc(d.fake.Callbacks(), func(c discordfake.Callback) bool { return c.InteractionID == it.ID })
		if i >= 0 {
			answer = d.fake.Callbacks()[i]
		}
		return i >= 0
	})
	if answer.Type != 6 {
		d.t.Errorf("the press answered %+v, want a deferred update (6)", answer)
	}
}

// discordReads is Discord's markdown as the person reads it.
func discordReads(text string) string { return markdownEscape.ReplaceAllString(text, "$1") }

var markdownEscape = regexp.MustCompile(`\\([[:punct:]])`)

// sees waits for a message in the DM holding want.
func (d *discordChat) sees(want string) {
	d.t.Helper()
	testkit.Eventually(d.t, strconv.Quote(want)+" in the DM", func() bool {
		return slices.ContainsFunc(d.shown(), func(m discordfake.Message) bool { return strings.Contains(discordReads(m.Content), want) })
	})
}

// decided waits for q to be edited into the decision (holding want)
// and checks its buttons are gone.
func (d *discordChat) decided(q discordfake.Message, want string) {
	d.t.Helper()
	var got discordfake.Message
	testkit.Eventually(d.t, "the question edited to "+strconv.Quote(want), func() bool {
		got, _ = d.fake.Message(q.ID)
		return strings.Contains(discordReads(got.Content), want)
	})
	if len(got.Components) != 0 {
		d.t.Errorf("the decided question stands as %+v, want it without buttons", got)
	}
}

// On Discord, in a DM: Allow this session runs the command and the same
// command again without asking; Allow once and Deny ask each time.
func TestDiscordApprovalSessionOnceAndDeny(t *testing.T) {
	d := discordApprovals(t)
	d.say("run " + dangerous)
	q, id := d.question("")
	d.press(q, "/approve session "+id)
	d.decided(q, "Allowed for this session by discord:"+discordAda)
	d.sees(`result: {"exit_code":0,"output":"mkfs.ext4\n"`)
	d.say("run " + dangerous + " again")
	d.sees(`mkfs.ext4 again\n`)

	d.say("/new")
	d.sees("fresh")
	d.say("run " + dangerous + " anew")
	q, id = d.question(q.ID)
	d.press(q, "/approve once "+id)
	d.decided(q, "Allowed once by discord:"+discordAda)
	d.sees(`mkfs.ext4 anew\n`)

	d.say("run " + dangerous + " once more")
	q, id = d.question(q.ID)
	d.press(q, "/deny "+id)
	d.decided(q, "Denied by discord:"+discordAda)
	d.sees(`result: {"error":"denied by discord:` + discordAda)
}
