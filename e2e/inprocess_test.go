package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions/agent"
)

// describe renders a model request's messages one per line, for failure
// messages.
func describe(req testkit.RecordedRequest) string {
	var b strings.Builder
	for _, m := range req.Messages {
		b.WriteString("\n  " + m.Role + ": " + m.Content)
		for _, c := range m.ToolCalls {
			b.WriteString(" [call " + c.Name + " " + c.Arguments + "]")
		}
	}
	return b.String()
}

// position returns where the message with role and content is in req, or -1.
func position(req testkit.RecordedRequest, role, content string) int {
	return slices.IndexFunc(req.Messages, func(m testkit.ModelMessage) bool {
		return m.Role == role && m.Content == content
	})
}

// inOrder checks that req carries each (role, content) pair, in this order.
func inOrder(t *testing.T, what string, req testkit.RecordedRequest, pairs ...[2]string) {
	t.Helper()
	last := -1
	for _, p := range pairs {
		i := position(req, p[0], p[1])
		if i < 0 || i < last {
			t.Fatalf("%s: want %s %q after position %d, got messages:%s", what, p[0], p[1], last, describe(req))
		}
		last = i
	}
}

// texts are the texts of items.
func texts(items []item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Text
	}
	return out
}

// heldGateway starts a gateway in busy input mode whose model runs the
// steps that script(slow) returns, slow being a gate the test releases
// (released at cleanup too). Its API client is returned beside it.
func heldGateway(t *testing.T, mode string, script func(slow *testkit.Gate) []testkit.Step) (*testkit.ModelServer, *testkit.Gate, *inProcess, *apiClient) {
	t.Helper()
	model := testkit.NewModelServer(t)
	slow := testkit.NewGate()
	t.Cleanup(slow.Release)
	model.Script(script(slow)...)
	cfg := baseConfig(t, model)
	cfg.Display.BusyInputMode = mode
	gw := startInProcess(t, cfg)
	return model, slow, gw, gw.api()
}

// hangFirst holds the first model call until slow is released; the
// model echoes after that.
func hangFirst(slow *testkit.Gate) []testkit.Step { return []testkit.Step{testkit.Hang(slow)} }

// settledTimeline waits for n items of conv's timeline, lets anything
// that should not come have the time to come, and returns the timeline.
func (a *apiClient) settledTimeline(t *testing.T, conv string, n int) []item {
	t.Helper()
	a.waitTimeline(t, conv, n)
	time.Sleep(settleWindow)
	items, err := a.timeline(conv)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

func TestPlainTurn(t *testing.T) {
	t.Parallel()
	model := testkit.NewModelServer(t)
	model.Script(testkit.Reply("hello, Ada"))
	gw := startInProcess(t, baseConfig(t, model))

	got := chat(t, openAIClient("http://"+gw.g.Addr(), "plain"), "hi, I am Ada")
	if got != "hello, Ada" {
		t.Errorf("reply %q, want %q", got, "hello, Ada")
	}
	reqs := model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the model got %d requests, want 1", len(reqs))
	}
	if reqs[0].LastUser() != "hi, I am Ada" || reqs[0].Model != modelName {
		t.Errorf("model request: model %q, messages:%s", reqs[0].Model, describe(reqs[0]))
	}
	// The conversation is named in the request, by a hash of its key, so
	// that a model server (or a proxy) can tell conversations apart
	// without learning the platform's ids.
	if conv := reqs[0].Conversation(); conv != agent.ModelUser("api:plain") {
		t.Errorf("the model request names conversation %q, want %q (api:plain hashed)", conv, agent.ModelUser("api:plain"))
	}
	items := gw.api().waitTimeline(t, "plain", 1)
	if len(items) != 1 || items[0].Kind != kindReply || items[0].Text != "hello, Ada" {
		t.Errorf("timeline %v, want the one reply", items)
	}
}

func TestToolCallSendsToAnotherConversation(t *testing.T) {
	t.Parallel()
	model := testkit.NewModelServer(t)
	model.Script(
		testkit.CallTools(testkit.ToolCall("send_message", `{"target":"api:ops","text":"the deploy finished"}`)),
		testkit.Reply("I told ops."),
	)
	cfg := baseConfig(t, model)
	cfg.SendMessage.AllowedTargets = []string{"api:ops"}
	gw := startInProcess(t, cfg)

	got := chat(t, openAIClient("http://"+gw.g.Addr(), "dev"), "tell ops the deploy finished")
	if got != "I told ops." {
		t.Errorf("reply %q, want %q", got, "I told ops.")
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2 (the tool call, then the reply)", len(reqs))
	}
	if !slices.ContainsFunc(reqs[0].Tools, func(tl testkit.ModelTool) bool { return tl.Name == "send_message" }) {
		t.Errorf("send_message was not offered to the model: %v", reqs[0].Tools)
	}
	tool := slices.IndexFunc(reqs[1].Messages, func(m testkit.ModelMessage) bool { return m.Role == "tool" })
	if tool < 0 || !strings.Contains(reqs[1].Messages[tool].Content, "queued") {
		t.Errorf("the second request lacks the tool's result:%s", describe(reqs[1]))
	}

	api := gw.api()
	ops := api.waitTimeline(t, "ops", 1)
	if len(ops) != 1 || ops[0].Kind != kindMessage || ops[0].Text != "the deploy finished" {
		t.Errorf("timeline of ops %v, want the sent message", ops)
	}
	dev := api.waitTimeline(t, "dev", 1)
	if len(dev) != 1 || dev[0].Kind != kindReply || dev[0].Text != "I told ops." {
		t.Errorf("timeline of dev %v, want the one reply", dev)
	}
}

func TestHistoryKeptAcrossRestart(t *testing.T) {
	t.Parallel()
	model := testkit.NewModelServer(t)
	model.Script(testkit.Reply("nice to meet you, Ada"), testkit.Reply("you are Ada"))
	cfg := baseConfig(t, model)

	first := startInProcess(t, cfg)
	chat(t, openAIClient("http://"+first.g.Addr(), "mem"), "my name is Ada")
	first.stop()

	second := startInProcess(t, cfg)
	if got := chat(t, openAIClient("http://"+second.g.Addr(), "mem"), "what is my name?"); got != "you are Ada" {
		t.Errorf("reply %q", got)
	}
	reqs := model.WaitRequests(2)
	inOrder(t, "the request after the restart", reqs[1],
		[2]string{"user", "my name is Ada"},
		[2]string{"assistant", "nice to meet you, Ada"},
		[2]string{"user", "what is my name?"},
	)
	// Both replies are in the timeline, each once.
	items := second.api().waitTimeline(t, "mem", 2)
	if got := texts(ofKind(items, kindReply)); !slices.Equal(got, []string{"nice to meet you, Ada", "you are Ada"}) {
		t.Errorf("replies in the timeline %q", got)
	}
}

// A completion retried with its Idempotency-Key after it was answered
// gets the answer it was owed, at once, and the turn does not run again;
// so does a retried command.
func TestRetriedCompletionGetsItsAnswer(t *testing.T) {
	t.Parallel()
	model := testkit.NewModelServer(t)
	model.Script(testkit.Reply("the first answer"))
	gw := startInProcess(t, baseConfig(t, model))
	base := "http://" + gw.g.Addr()

	keyed := func(key string) openai.Client {
		return openAIClient(base, "retry", option.WithHeader("Idempotency-Key", key))
	}
	first := keyed("k-1")
	if got := chat(t, first, "hello"); got != "the first answer" {
		t.Fatalf("the completion answered %q", got)
	}
	status := chat(t, keyed("k-2"), "/status")
	// Another message comes between, so the answers owed are not the
	// timeline's last items.
	if got := chat(t, keyed("k-3"), "and then"); got != "echo: and then" {
		t.Fatalf("the completion of the message between answered %q", got)
	}
	for _, retry := range []struct{ key, text, want string }{
		{"k-1", "hello", "the first answer"},
		{"k-2", "/status", status},
	} {
		if got := chat(t, keyed(retry.key), retry.text); got != retry.want {
			t.Errorf("the retry of %q answered %q, want %q", retry.text, got, retry.want)
		}
	}
	// A streamed retry too.
	ctx, cancel := context.WithTimeout(context.Background(), waitReply)
	defer cancel()
	stream := first.Chat.Completions.NewStreaming(ctx, userTurn("hello"))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "the first answer" {
		t.Errorf("the streamed retry accumulated %+v, %v; want %q", acc.Choices, err, "the first answer")
	}
	if n := model.Count(); n != 2 {
		t.Errorf("the model got %d requests, want 2: a retry ran its turn again", n)
	}
	items := gw.api().settledTimeline(t, "retry", 3)
	if len(items) != 3 {
		t.Errorf("timeline %v: want the three answers, none twice", items)
	}
}

// A key used again once the dedupe window has passed is a new message;
// a retry of that one gets its answer, not the older message's.
func TestRetryAfterTheKeyIsReusedGetsTheNewerAnswer(t *testing.T) {
	t.Parallel()
	model := testkit.NewModelServer(t)
	cfg := baseConfig(t, model)
	const window = 4 * time.Second
	cfg.Store.DedupeWindow = window
	gw := startInProcess(t, cfg)
	client := openAIClient("http://"+gw.g.Addr(), "reuse", option.WithHeader("Idempotency-Key", "k-1"))
	if got := chat(t, client, "first use"); got != "echo: first use" {
		t.Fatalf("the first use answered %q", got)
	}
	time.Sleep(window + window/4)
	if got := chat(t, client, "second use"); got != "echo: second use" {
		t.Fatalf("the key used again after the window answered %q, want a turn of its own", got)
	}
	if got := chat(t, client, "second use"); got != "echo: second use" {
		t.Errorf("the retry of the second use answered %q, want %q", got, "echo: second use")
	}
	if n := model.Count(); n != 2 {
		t.Errorf("the model got %d requests, want 2", n)
	}
}

func TestStopWhileATurnRuns(t *testing.T) {
	t.Parallel()
	model, slow, _, api := heldGateway(t, config.BusyInputInterrupt, hangFirst)

	api.mustPost(t, "s", "a long job")
	model.WaitRequests(1)
	asked := time.Now()
	api.mustPost(t, "s", "/stop")

	items := api.waitTimeline(t, "s", 2)
	took := time.Since(asked)
	answers, notices := ofKind(items, kindCommand), ofKind(items, kindNotice)
	if len(answers) != 1 || !strings.HasPrefix(answers[0].Text, "Stopping the running turn") || !strings.Contains(answers[0].Text, "a long job") {
		t.Fatalf("timeline %v: want the /stop answer naming the running turn", items)
	}
	if len(notices) != 1 || notices[0].Text != "Stopped." || items[0] != answers[0] {
		t.Errorf("timeline %v: want the /stop answer, then the turn's own Stopped.", items)
	}
	if took > 5*time.Second {
		t.Errorf("the /stop answer took %s while the model still held the turn", took)
	}
	// The turn let go of its model call: nothing waits at the gate.
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		return slow.Waiting() == 0 && model.InFlight(agent.ModelUser("api:s")) == 0, "the stopped turn's model request is still open"
	})

	// The conversation goes on; the stopped turn is not run again.
	api.mustPost(t, "s", "next")
	items = api.waitTimeline(t, "s", 3)
	if replies := ofKind(items, kindReply); len(replies) != 1 || replies[0].Text != "echo: next" {
		t.Errorf("timeline %v: want one reply, to the message after /stop", items)
	}
	if n := model.Count(); n != 2 {
		t.Errorf("the model got %d requests, want 2 (the stopped turn was run again?)", n)
	}
}

func TestBusyInputInterrupt(t *testing.T) {
	t.Parallel()
	model, slow, gw, api := heldGateway(t, config.BusyInputInterrupt, hangFirst)

	// Both messages come as completions: the request for the interrupted
	// one is answered at once, with a notice naming it, rather than
	// waiting out its limit for a reply that names only the newer one.
	client := openAIClient("http://"+gw.g.Addr(), "i")
	first := make(chan completionResult, 1)
	go func() { first <- complete(client, "first") }()
	model.WaitRequests(1)
	if got := chat(t, client, "second"); got != "echo: second" {
		t.Errorf("the second message's completion answered %q, want %q", got, "echo: second")
	}
	wantCompletion(t, "the interrupted message's", first, interruptedNotice)

	reqs := model.WaitRequests(2)
	// The second turn runs with what the interrupted one did.
	inOrder(t, "the request for the second message", reqs[1],
		[2]string{"user", "first"},
		[2]string{"user", "second"},
	)
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		return slow.Waiting() == 0, "the interrupted turn's model request is still open"
	})
	items := api.settledTimeline(t, "i", 2)
	want := []string{interruptedNotice, "echo: second"}
	if len(items) != 2 || items[0].Kind != kindNotice || items[1].Kind != kindReply || !slices.Equal(texts(items), want) {
		t.Errorf("timeline %v: want the notice naming the first message, then the reply to the second", items)
	}
	if n := model.Count(); n != 2 {
		t.Errorf("the model got %d requests, want 2", n)
	}
	if o := model.MaxOverlap(agent.ModelUser("api:i")); o != 1 {
		t.Errorf("%d model requests of the conversation overlapped", o)
	}
}

// wantCompletion checks that the completion whose result comes on done
// answers want, and does within waitReply.
func wantCompletion(t *testing.T, whose string, done <-chan completionResult, want string) {
	t.Helper()
	select {
	case r := <-done:
		if r.err != nil || r.text != want {
			t.Errorf("%s completion answered %q, %v; want %q", whose, r.text, r.err, want)
		}
	case <-time.After(waitReply):
		t.Fatalf("%s completion is still waiting", whose)
	}
}

// interruptedNotice is what a completion whose turn a newer message
// interrupted answers; steeredNotice what a completion whose message a
// running turn took in answers.
const (
	interruptedNotice = "Interrupted by a newer message; the reply to it answers this one too."
	steeredNotice     = "Added to the turn that was running; its reply answers this one too."
)

func TestBusyInputQueue(t *testing.T) {
	t.Parallel()
	model, slow, _, api := heldGateway(t, config.BusyInputQueue, hangFirst)

	api.mustPost(t, "q", "first")
	model.WaitRequests(1)
	api.mustPost(t, "q", "second")

	// The second message waits while the first turn runs.
	time.Sleep(settleWindow)
	if n := model.Count(); n != 1 {
		t.Fatalf("the model got %d requests while the first turn ran, want 1", n)
	}
	slow.Release()

	items := api.waitTimeline(t, "q", 2)
	if got := texts(items); !slices.Equal(got, []string{"echo: first", "echo: second"}) {
		t.Errorf("timeline %v: want both replies in order", items)
	}
	reqs := model.WaitRequests(2)
	inOrder(t, "the request for the second message", reqs[1],
		[2]string{"user", "first"},
		[2]string{"assistant", "echo: first"},
		[2]string{"user", "second"},
	)
	if o := model.MaxOverlap(agent.ModelUser("api:q")); o != 1 {
		t.Errorf("%d model requests of the conversation overlapped", o)
	}
}

func TestBusyInputSteer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc  string
		mode  string
		steer string // what the user sends while the turn runs
	}{
		{desc: "the /steer command in interrupt mode", mode: config.BusyInputInterrupt, steer: "/steer also check the logs"},
		{desc: "a plain message in steer mode", mode: config.BusyInputSteer, steer: "also check the logs"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			model, slow, gw, api := heldGateway(t, tt.mode, func(slow *testkit.Gate) []testkit.Step {
				return []testkit.Step{
					testkit.CallTools(testkit.ToolCall("memory", `{"action":"add","text":"runs checks"}`)).Until(slow),
					testkit.Reply("checked, logs too"),
				}
			})

			api.mustPost(t, "st", "run the checks")
			model.WaitRequests(1)
			// The steered message comes as a completion, which is answered
			// with a notice naming it once the turn that took it ends: it
			// runs no turn of its own, and that turn's reply names the
			// turn's own message.
			steered := make(chan completionResult, 1)
			go func() { steered <- complete(openAIClient("http://"+gw.g.Addr(), "st"), tt.steer) }()
			// The steer reaches the turn while its model call is held, so
			// it is taken after the tool result that call leads to.
			gw.waitLog("steering the turn")
			slow.Release()
			wantCompletion(t, "the steered message's", steered, steeredNotice)

			// The request after the tool ran ends: the message, the tool
			// call, its result, the steered text.
			reqs := model.WaitRequests(2)
			msgs := reqs[1].Messages
			if len(msgs) < 4 {
				t.Fatalf("the request after the tool ran is short:%s", describe(reqs[1]))
			}
			end := msgs[len(msgs)-4:]
			if end[0].Role != "user" || end[0].Content != "run the checks" ||
				end[1].Role != "assistant" || len(end[1].ToolCalls) != 1 || end[1].ToolCalls[0].Name != "memory" ||
				end[2].Role != "tool" || end[2].ToolCallID != end[1].ToolCalls[0].ID ||
				end[3].Role != "user" || end[3].Content != "also check the logs" {
				t.Errorf("want the message, the tool call, its result and the steered text last; got:%s", describe(reqs[1]))
			}

			items := api.settledTimeline(t, "st", 2)
			want := []string{"checked, logs too", steeredNotice}
			if len(items) != 2 || items[0].Kind != kindReply || items[1].Kind != kindNotice || !slices.Equal(texts(items), want) {
				t.Errorf("timeline %v: want the one reply, then the notice naming the steered message", items)
			}
			if n := model.Count(); n != 2 {
				t.Errorf("the model got %d requests, want 2: the steered text ran as a turn of its own?", n)
			}
		})
	}
}
