package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
	"github.com/heraldgw/herald/tools"
)

const (
	conv      = "telegram:100"
	system    = "You are herald."
	userKey   = "telegram:42" // the sender, qualified by the origin's platform
	modelName = "test-model"
)

var (
	t0     = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	origin = outbox.Target{Platform: "telegram", Chat: "100"}
)

// fixture is an agent wired to a scripted model server through the real
// client, with the core tools and a test toolset.
type fixture struct {
	ms    *testkit.ModelServer
	notes *memNotes
	agent *agent.Agent

	// onTool runs inside the "probe" test tool.
	onTool func(ctx context.Context) error
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{ms: testkit.NewModelServer(t), notes: newMemNotes(t0)}
	client, err := llm.NewOpenAI(llm.OpenAIOptions{
		BaseURL:    f.ms.URL(),
		Model:      modelName,
		Timeout:    10 * time.Second,
		MaxRetries: -1,
		Sleep:      func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	err = tools.RegisterCore(reg, tools.CoreOptions{
		Notes:          f.notes,
		Memory:         tools.MemoryLimits{MaxNotes: 3, MaxNoteChars: 40},
		AllowedTargets: []string{"telegram:555", "slack:*"},
	})
	if err != nil {
		t.Fatal(err)
	}
	probe := tools.Tool{
		Name:        "probe",
		Description: "A tool whose behaviour the test sets.",
		Handler: func(ctx context.Context, _ *tools.Turn, _ json.RawMessage) (tools.Result, error) {
			if f.onTool != nil {
				return tools.Result{}, f.onTool(ctx)
			}
			return tools.Result{}, nil
		},
	}
	if err := reg.Register("test", probe); err != nil {
		t.Fatal(err)
	}
	set, err := reg.Set([]string{tools.Core, "test"})
	if err != nil {
		t.Fatal(err)
	}
	f.agent = &agent.Agent{
		Client:       client,
		Tools:        set,
		SystemPrompt: system,
		Clock:        clock.NewFake(t0),
	}
	return f
}

func input(text string) sessions.TurnInput {
	return sessions.TurnInput{
		Entry: sessions.Entry{
			Inbound: sessions.Inbound{Conv: conv, Sender: "42", MessageID: "m1", Text: text, Kind: sessions.KindUser},
			ID:      "e1",
		},
		Origin: origin,
	}
}

// History helpers; every message is stamped t0 by the fake clock.
func user(s string) chat.Message { return chat.Message{Role: "user", Content: s, At: t0} }
func said(s string) chat.Message { return chat.Message{Role: "assistant", Content: s, At: t0} }
func result(id, name, content string) chat.Message {
	return chat.Message{Role: "tool", ToolCallID: id, Name: name, Content: content, At: t0}
}
func calls(cs ...chat.ToolCall) chat.Message {
	return chat.Message{Role: "assistant", ToolCalls: cs, At: t0}
}

// call is a tool call as the history records it. The model server names
// its calls call_<request>_<index>.
func call(id, name, args string) chat.ToolCall {
	return chat.ToolCall{ID: id, Name: name, Arguments: args}
}

func reply(text string) outbox.Message {
	return outbox.Message{Target: origin, Conv: conv, Text: text, ReplyTo: "m1", Kind: agent.KindReply}
}

func sent(target outbox.Target, text string) outbox.Message {
	return outbox.Message{Target: target, Conv: conv, Text: text, Kind: tools.KindMessage}
}

const (
	sendArgs   = `{"target":"telegram:555","text":"build is green"}`
	sendResult = `{"note":"sent to telegram:555 when this turn finishes","status":"queued","target":"telegram:555"}`
)

var tg555 = outbox.Target{Platform: "telegram", Chat: "555"}

func TestRun(t *testing.T) {
	tests := []struct {
		desc    string
		script  []testkit.Step
		setup   func(f *fixture) // before the run
		in      func(in *sessions.TurnInput)
		end     sessions.TurnEnd
		calls   int
		history []chat.Message
		outbox  []outbox.Message
		check   func(t *testing.T, reqs []testkit.RecordedRequest)
	}{
		{
			desc:    "plain turn",
			script:  []testkit.Step{testkit.Reply("hello there")},
			end:     sessions.TurnDone,
			calls:   1,
			history: []chat.Message{user("hi"), said("hello there")},
			outbox:  []outbox.Message{reply("hello there")},
			check: func(t *testing.T, reqs []testkit.RecordedRequest) {
				want := []testkit.ModelMessage{{Role: "system", Content: system}, {Role: "user", Content: "hi"}}
				if diff := cmp.Diff(want, reqs[0].Messages); diff != "" {
					t.Errorf("messages the model saw (-want +got):\n%s", diff)
				}
				var names []string
				for _, tl := range reqs[0].Tools {
					names = append(names, tl.Name)
				}
				if diff := cmp.Diff([]string{"clarify", "memory", "send_message", "probe"}, names); diff != "" {
					t.Errorf("tools offered (-want +got):\n%s", diff)
				}
				if reqs[0].Model != modelName || reqs[0].User != agent.ModelUser(conv) || strings.Contains(reqs[0].User, conv) {
					t.Errorf("model %q user %q, want %q and a hash of the conversation key", reqs[0].Model, reqs[0].User, modelName)
				}
			},
		},
		{
			desc: "tool call turn: send_message, then the reply",
			script: []testkit.Step{
				testkit.CallTools(testkit.ToolCall("send_message", sendArgs)),
				testkit.Reply("Told them."),
			},
			end:   sessions.TurnDone,
			calls: 2,
			history: []chat.Message{
				user("hi"),
				calls(call("call_1_0", "send_message", sendArgs)),
				result("call_1_0", "send_message", sendResult),
				said("Told them."),
			},
			outbox: []outbox.Message{sent(tg555, "build is green"), reply("Told them.")},
			check: func(t *testing.T, reqs []testkit.RecordedRequest) {
				want := []testkit.ModelMessage{
					{Role: "system", Content: system},
					{Role: "user", Content: "hi"},
					{Role: "assistant", ToolCalls: []testkit.ModelToolCall{{ID: "call_1_0", Name: "send_message", Arguments: sendArgs}}},
					{Role: "tool", ToolCallID: "call_1_0", Content: sendResult},
				}
				if diff := cmp.Diff(want, reqs[1].Messages); diff != "" {
					t.Errorf("second request's messages (-want +got):\n%s", diff)
				}
			},
		},
		{
			desc: "invalid arguments: the model reads the error and corrects its call",
			script: []testkit.Step{
				testkit.CallTools(testkit.ToolCall("send_message", `{"target":555,"text":"build is green"}`)),
				testkit.CallTools(testkit.ToolCall("send_message", sendArgs)),
				testkit.Reply("Told them."),
			},
			end:   sessions.TurnDone,
			calls: 3,
			history: []chat.Message{
				user("hi"),
				calls(call("call_1_0", "send_message", `{"target":555,"text":"build is green"}`)),
				result("call_1_0", "send_message", `{"error":"invalid arguments for send_message: target: got number, want string"}`),
				calls(call("call_2_0", "send_message", sendArgs)),
				result("call_2_0", "send_message", sendResult),
				said("Told them."),
			},
			outbox: []outbox.Message{sent(tg555, "build is green"), reply("Told them.")},
			check: func(t *testing.T, reqs []testkit.RecordedRequest) {
				last := reqs[1].Messages[len(reqs[1].Messages)-1]
				if last.Role != "tool" || !strings.Contains(last.Content, "target: got number, want string") {
					t.Errorf("the model did not see the error: last message %+v", last)
				}
			},
		},
		{
			desc: "bad JSON arguments",
			script: []testkit.Step{
				testkit.CallTools(testkit.ToolCall("send_message", `{"target":`)),
				testkit.Reply("Sorry."),
			},
			end:   sessions.TurnDone,
			calls: 2,
			history: []chat.Message{
				user("hi"),
				calls(call("call_1_0", "send_message", `{"target":`)),
				result("call_1_0", "send_message", `{"error":"arguments of send_message are not valid JSON (unexpected EOF); send a JSON object"}`),
				said("Sorry."),
			},
			outbox: []outbox.Message{reply("Sorry.")},
		},
		{
			desc: "unknown tool",
			script: []testkit.Step{
				testkit.CallTools(testkit.ToolCall("deploy", `{}`)),
				testkit.Reply("I cannot deploy."),
			},
			end:   sessions.TurnDone,
			calls: 2,
			history: []chat.Message{
				user("hi"),
				calls(call("call_1_0", "deploy", `{}`)),
				result("call_1_0", "deploy", `{"error":"unknown tool \"deploy\"; the tools are: clarify, memory, send_message, probe"}`),
				said("I cannot deploy."),
			},
			outbox: []outbox.Message{reply("I cannot deploy.")},
		},
		{
			desc:  "a tool that panics",
			setup: func(f *fixture) { f.onTool = func(context.Context) error { panic("probe broke") } },
			script: []testkit.Step{
				testkit.CallTools(testkit.ToolCall("probe", `{}`)),
				testkit.Reply("The probe failed."),
			},
			end:   sessions.TurnDone,
			calls: 2,
			history: []chat.Message{
				user("hi"),
				calls(call("call_1_0", "probe", `{}`)),
				result("call_1_0", "probe", `{"error":"tool probe failed unexpectedly (probe broke); this is a fault in herald, not in your arguments"}`),
				said("The probe failed."),
			},
			outbox: []outbox.Message{reply("The probe failed.")},
		},
		{
			desc: "clarify ends the turn with the question; later calls are skipped",
			script: []testkit.Step{testkit.CallTools(
				testkit.ToolCall("clarify", `{"question":"Which environment?","choices":["staging","production"]}`),
				testkit.ToolCall("send_message", sendArgs),
			)},
			end:   sessions.TurnClarify,
			calls: 1,
			history: []chat.Message{
				user("hi"),
				calls(
					call("call_1_0", "clarify", `{"question":"Which environment?","choices":["staging","production"]}`),
					call("call_1_1", "send_message", sendArgs),
				),
				result("call_1_0", "clarify", `{"status":"asked"}`),
				result("call_1_1", "send_message", `{"error":"skipped: the turn ended before this tool ran"}`),
				said("Which environment?\n\n1. staging\n2. production"),
			},
			outbox: []outbox.Message{reply("Which environment?\n\n1. staging\n2. production")},
		},
		{
			desc:    "401: one line the user can act on, and no Go error",
			setup:   func(f *fixture) { f.ms.RequireAPIKey("sk-the-right-key-000") },
			end:     sessions.TurnModelError,
			calls:   1,
			history: []chat.Message{user("hi")},
			outbox:  []outbox.Message{reply("the model API key was rejected (check HERALD_MODEL_API_KEY / model.api_key)")},
		},
		{
			desc:    "404: the model is named",
			setup:   func(f *fixture) { f.ms.Models("other-model") },
			end:     sessions.TurnModelError,
			calls:   1,
			history: []chat.Message{user("hi")},
			outbox:  []outbox.Message{reply("model not found: test-model (check HERALD_MODEL / model.name)")},
		},
		{
			desc: "a model error after a tool ran keeps the history whole and sends what was queued",
			script: []testkit.Step{
				testkit.CallTools(testkit.ToolCall("send_message", sendArgs)),
				testkit.Fail(http.StatusBadRequest, "tools[0]: invalid schema"),
			},
			end:   sessions.TurnModelError,
			calls: 2,
			history: []chat.Message{
				user("hi"),
				calls(call("call_1_0", "send_message", sendArgs)),
				result("call_1_0", "send_message", sendResult),
			},
			outbox: []outbox.Message{sent(tg555, "build is green"), reply("the model server rejected the request: tools[0]: invalid schema")},
		},
		{
			desc:    "no model configured: the reply says how to configure one",
			setup:   func(f *fixture) { f.agent.Client = nil },
			end:     sessions.TurnModelError,
			calls:   0,
			history: []chat.Message{user("hi")},
			outbox:  []outbox.Message{reply(llm.UserMessage(&llm.Error{Class: llm.ClassNotConfigured}))},
		},
		{
			desc: "a synthetic entry is an ordinary user message",
			in: func(in *sessions.TurnInput) {
				in.Entry.Kind, in.Entry.Sender, in.Entry.MessageID = sessions.KindSynthetic, "", ""
				in.Entry.Text = "[sub-agent deleg_1 finished] all tests pass"
			},
			script:  []testkit.Step{testkit.Reply("The sub-agent is done: all tests pass.")},
			end:     sessions.TurnDone,
			calls:   1,
			history: []chat.Message{user("[sub-agent deleg_1 finished] all tests pass"), said("The sub-agent is done: all tests pass.")},
			outbox:  []outbox.Message{{Target: origin, Conv: conv, Text: "The sub-agent is done: all tests pass.", Kind: agent.KindReply}},
			check: func(t *testing.T, reqs []testkit.RecordedRequest) {
				if got := reqs[0].Messages[1]; got.Role != "user" || got.Content != "[sub-agent deleg_1 finished] all tests pass" {
					t.Errorf("synthetic entry reached the model as %+v", got)
				}
			},
		},
		{
			desc: "attachments are named in the user message",
			in: func(in *sessions.TurnInput) {
				in.Entry.Attachments = []sessions.Attachment{{Name: "log.txt", MIME: "text/plain", Size: 120}}
			},
			script: []testkit.Step{testkit.Reply("ok")},
			end:    sessions.TurnDone,
			calls:  1,
			history: []chat.Message{
				user("hi\n[attachment: log.txt, text/plain, 120 bytes]"),
				said("ok"),
			},
			outbox: []outbox.Message{reply("ok")},
		},
		{
			desc: "an attachment with a kind is named by it",
			in: func(in *sessions.TurnInput) {
				in.Entry.Attachments = []sessions.Attachment{{Name: "note.ogg", MIME: "audio/ogg", Size: 900, Kind: sessions.AttachVoice}}
			},
			script:  []testkit.Step{testkit.Reply("ok")},
			end:     sessions.TurnDone,
			calls:   1,
			history: []chat.Message{user("hi\n[voice: note.ogg, audio/ogg, 900 bytes]"), said("ok")},
			outbox:  []outbox.Message{reply("ok")},
		},
		{
			desc:    "a blank reply is not sent blank",
			script:  []testkit.Step{testkit.Reply(" ")},
			end:     sessions.TurnDone,
			calls:   1,
			history: []chat.Message{user("hi"), said(" ")},
			outbox:  []outbox.Message{reply("(the model returned an empty reply)")},
		},
	}

	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t)
			f.ms.Script(tc.script...)
			if tc.setup != nil {
				tc.setup(f)
			}
			in := input("hi")
			if tc.in != nil {
				tc.in(&in)
			}
			out, err := f.agent.Run(context.Background(), &in)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if out.End != tc.end || out.ModelCalls != tc.calls {
				t.Errorf("end %q after %d model calls, want %q after %d", out.End, out.ModelCalls, tc.end, tc.calls)
			}
			if diff := cmp.Diff(tc.history, out.History); diff != "" {
				t.Errorf("history (-want +got):\n%s", diff)
			}
			// What the reply says of the turn: TestReplySaysHowTheTurnEnded.
			if diff := cmp.Diff(tc.outbox, out.Outbox, cmpopts.IgnoreFields(outbox.Message{}, "Meta")); diff != "" {
				t.Errorf("outbox (-want +got):\n%s", diff)
			}
			if got := f.ms.Count(); got != tc.calls {
				t.Errorf("model server got %d requests, want %d", got, tc.calls)
			}
			if (out.End == sessions.TurnModelError) != (out.Err != nil) {
				t.Errorf("end %q with Err %v", out.End, out.Err)
			}
			if tc.check != nil {
				tc.check(t, f.ms.Requests())
			}
		})
	}
}

func TestBudget(t *testing.T) {
	for _, limit := range []int{1, 3} {
		f := newFixture(t)
		f.agent.MaxIterations = limit
		f.ms.Respond(func(testkit.RecordedRequest) testkit.Step {
			return testkit.CallTools(testkit.ToolCall("probe", `{}`))
		})
		out, err := f.agent.Run(context.Background(), ptr(input("loop forever")))
		if err != nil {
			t.Fatal(err)
		}
		if out.End != sessions.TurnBudget || out.ModelCalls != limit || f.ms.Count() != limit {
			t.Errorf("limit %d: end %q after %d calls (server saw %d), want budget after exactly %d", limit, out.End, out.ModelCalls, f.ms.Count(), limit)
		}
		if len(out.Outbox) != 1 || !strings.Contains(out.Outbox[0].Text, "stopped this turn after") || out.Outbox[0].Kind != agent.KindReply {
			t.Fatalf("limit %d: outbox %+v, want one note saying the turn stopped", limit, out.Outbox)
		}
		note := out.Outbox[0].Text
		if !strings.Contains(note, fmt.Sprintf("after %d model calls", limit)) {
			t.Errorf("note %q does not give the number of calls", note)
		}
		// user, then (assistant, tool) per call, then the note.
		if len(out.History) != 1+2*limit+1 || !cmp.Equal(out.History[len(out.History)-1], said(note)) {
			t.Errorf("limit %d: history of %d messages ending %+v", limit, len(out.History), out.History[len(out.History)-1])
		}
	}

	// The default is 90 model calls.
	f := newFixture(t)
	f.ms.Respond(func(testkit.RecordedRequest) testkit.Step {
		return testkit.CallTools(testkit.ToolCall("probe", `{}`))
	})
	out, _ := f.agent.Run(context.Background(), ptr(input("loop forever")))
	if out.ModelCalls != agent.DefaultMaxIterations || f.ms.Count() != 90 {
		t.Errorf("default budget: %d calls, want 90", out.ModelCalls)
	}
}

func TestSteer(t *testing.T) {
	t.Run("appended after the next batch of tool results", func(t *testing.T) {
		f := newFixture(t)
		f.ms.Script(
			testkit.CallTools(testkit.ToolCall("probe", `{}`), testkit.ToolCall("probe", `{"x":1}`)),
			testkit.Reply("Checked the logs too."),
		)
		steer := &sessions.SteerQueue{}
		steer.Offer("also check the logs", 2)
		in := input("check the build")
		in.Steer = steer
		out, err := f.agent.Run(context.Background(), &in)
		if err != nil {
			t.Fatal(err)
		}
		want := []chat.Message{
			user("check the build"),
			calls(call("call_1_0", "probe", `{}`), call("call_1_1", "probe", `{"x":1}`)),
			result("call_1_0", "probe", `{"status":"ok"}`),
			result("call_1_1", "probe", `{"error":"invalid arguments for probe: additional properties 'x' not allowed"}`),
			user("also check the logs"),
			said("Checked the logs too."),
		}
		if diff := cmp.Diff(want, out.History); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
		reqs := f.ms.Requests()
		if got := reqs[0].Messages[len(reqs[0].Messages)-1]; got.Content != "check the build" {
			t.Errorf("the steer reached the first model call: last message %+v", got)
		}
		if got := reqs[1].Messages[len(reqs[1].Messages)-1]; got.Role != "user" || got.Content != "also check the logs" {
			t.Errorf("second model call ends with %+v, want the steered message", got)
		}
	})

	t.Run("a turn without tool calls leaves it to the caller", func(t *testing.T) {
		f := newFixture(t)
		f.ms.Script(testkit.Reply("done"))
		steer := &sessions.SteerQueue{}
		steer.Offer("one more thing", 1)
		in := input("hi")
		in.Steer = steer
		out, err := f.agent.Run(context.Background(), &in)
		if err != nil {
			t.Fatal(err)
		}
		if steer.Len() != 1 || len(out.History) != 2 {
			t.Errorf("steer queue holds %d, history %+v; want the message left for the caller", steer.Len(), out.History)
		}
	})

	t.Run("a closed queue is harmless", func(t *testing.T) {
		f := newFixture(t)
		f.ms.Script(testkit.CallTools(testkit.ToolCall("probe", `{}`)), testkit.Reply("done"))
		steer := &sessions.SteerQueue{}
		steer.Close()
		in := input("hi")
		in.Steer = steer
		out, err := f.agent.Run(context.Background(), &in)
		if err != nil || out.End != sessions.TurnDone || len(out.History) != 4 {
			t.Errorf("end %q, err %v, history %+v", out.End, err, out.History)
		}
	})
}

func TestCancel(t *testing.T) {
	t.Run("between tool calls: unanswered calls get an interrupted result", func(t *testing.T) {
		f := newFixture(t)
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		stop := errors.New("stopped by /stop")
		f.onTool = func(context.Context) error { cancel(stop); return nil }
		f.ms.Script(testkit.CallTools(
			testkit.ToolCall("send_message", sendArgs),
			testkit.ToolCall("probe", `{}`),
			testkit.ToolCall("memory", `{"action":"list"}`),
		))
		out, err := f.agent.Run(ctx, ptr(input("hi")))
		if !errors.Is(err, stop) {
			t.Errorf("Run error %v, want the context's cause", err)
		}
		want := []chat.Message{
			user("hi"),
			calls(call("call_1_0", "send_message", sendArgs), call("call_1_1", "probe", `{}`), call("call_1_2", "memory", `{"action":"list"}`)),
			result("call_1_0", "send_message", sendResult),
			result("call_1_1", "probe", `{"status":"ok"}`),
			result("call_1_2", "memory", `{"error":"interrupted: the turn was stopped before this tool ran"}`),
		}
		if diff := cmp.Diff(want, out.History); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
		// What a tool queued is committed (the history says it was sent);
		// there is no reply.
		if diff := cmp.Diff([]outbox.Message{sent(tg555, "build is green")}, out.Outbox); diff != "" {
			t.Errorf("outbox (-want +got):\n%s", diff)
		}
		if out.End != sessions.TurnInterrupted || out.ModelCalls != 1 {
			t.Errorf("end %q after %d calls, want interrupted after 1", out.End, out.ModelCalls)
		}
	})

	t.Run("inside a tool that honours its context", func(t *testing.T) {
		f := newFixture(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		started := make(chan struct{})
		f.onTool = func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		}
		f.ms.Script(testkit.CallTools(testkit.ToolCall("probe", `{}`)))
		go func() { <-started; cancel() }()
		out, err := f.agent.Run(ctx, ptr(input("hi")))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run error %v, want context.Canceled", err)
		}
		want := []chat.Message{
			user("hi"),
			calls(call("call_1_0", "probe", `{}`)),
			result("call_1_0", "probe", `{"error":"interrupted: the turn was stopped before this tool ran"}`),
		}
		if diff := cmp.Diff(want, out.History); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
		if out.Outbox != nil || out.End != sessions.TurnInterrupted {
			t.Errorf("end %q outbox %+v, want interrupted without a reply", out.End, out.Outbox)
		}
	})

	t.Run("during a model call: returns promptly", func(t *testing.T) {
		f := newFixture(t)
		gate := testkit.NewGate()
		f.ms.Script(testkit.CallTools(testkit.ToolCall("probe", `{}`)), testkit.Hang(gate))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		type ran struct {
			out *sessions.TurnOutput
			err error
		}
		done := make(chan ran, 1)
		go func() {
			out, err := f.agent.Run(ctx, ptr(input("hi")))
			done <- ran{out, err}
		}()
		f.ms.WaitRequests(2)
		cancel()
		var r ran
		select {
		case r = <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after its context was cancelled")
		}
		if !errors.Is(r.err, context.Canceled) || r.out.End != sessions.TurnInterrupted {
			t.Errorf("end %q err %v, want interrupted with context.Canceled", r.out.End, r.err)
		}
		want := []chat.Message{user("hi"), calls(call("call_1_0", "probe", `{}`)), result("call_1_0", "probe", `{"status":"ok"}`)}
		if diff := cmp.Diff(want, r.out.History); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
		if r.out.Outbox != nil || r.out.Err != nil {
			t.Errorf("outbox %+v, Err %v: want neither", r.out.Outbox, r.out.Err)
		}
	})

	t.Run("before the turn starts", func(t *testing.T) {
		f := newFixture(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		out, err := f.agent.Run(ctx, ptr(input("hi")))
		if !errors.Is(err, context.Canceled) || out.End != sessions.TurnInterrupted || f.ms.Count() != 0 {
			t.Errorf("end %q err %v after %d model calls", out.End, err, f.ms.Count())
		}
		if diff := cmp.Diff([]chat.Message{user("hi")}, out.History); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
	})
}

func TestHistoryIsTrimmedForTheModel(t *testing.T) {
	f := newFixture(t)
	f.agent.HistoryBudget = 20
	f.ms.Script(testkit.Reply("ok"))
	in := input("hi") // 2 characters, leaving 18 for earlier history
	in.History = []chat.Message{
		user("old old old old old"), // 19: dropped
		calls(call("c1", "probe", `{}`)),
		result("c1", "probe", "1234567"), // with its call, 14: dropped
		user("recent"),                   // 6
		said("fine, thanks"),             // 12
	}
	if _, err := f.agent.Run(context.Background(), &in); err != nil {
		t.Fatal(err)
	}
	want := []testkit.ModelMessage{
		{Role: "system", Content: system},
		{Role: "user", Content: "recent"},
		{Role: "assistant", Content: "fine, thanks"},
		{Role: "user", Content: "hi"},
	}
	if diff := cmp.Diff(want, f.ms.Requests()[0].Messages); diff != "" {
		t.Errorf("messages the model saw (-want +got):\n%s", diff)
	}

	// A negative budget sends everything.
	f = newFixture(t)
	f.agent.HistoryBudget = -1
	if _, err := f.agent.Run(context.Background(), &in); err != nil {
		t.Fatal(err)
	}
	if got := len(f.ms.Requests()[0].Messages); got != 1+len(in.History)+1 {
		t.Errorf("model saw %d messages, want all %d", got, 1+len(in.History)+1)
	}
}

// A turn's reply says how the turn ended, what its model calls used and,
// when the model failed, the failure's class.
func TestReplySaysHowTheTurnEnded(t *testing.T) {
	f := newFixture(t)
	f.ms.Script(testkit.Reply("hi you"))
	out, err := f.agent.Run(context.Background(), ptr(input("hello there")))
	if err != nil {
		t.Fatal(err)
	}
	if out.InputTokens == 0 || out.OutputTokens == 0 {
		t.Fatalf("usage %d/%d, want the model server's counts", out.InputTokens, out.OutputTokens)
	}
	want := map[string]string{
		sessions.ReplyMetaEnd:              "done",
		sessions.ReplyMetaPromptTokens:     strconv.Itoa(out.InputTokens),
		sessions.ReplyMetaCompletionTokens: strconv.Itoa(out.OutputTokens),
	}
	if diff := cmp.Diff(want, out.Outbox[len(out.Outbox)-1].Meta); diff != "" {
		t.Errorf("reply meta (-want +got):\n%s", diff)
	}

	f.ms.Script(testkit.Fail(401, "bad key"))
	out, err = f.agent.Run(context.Background(), ptr(input("again")))
	if err != nil {
		t.Fatal(err)
	}
	meta := out.Outbox[len(out.Outbox)-1].Meta
	if meta[sessions.ReplyMetaEnd] != "model_error" || meta[sessions.ReplyMetaErrorClass] != "auth" || meta[sessions.ReplyMetaRetryAt] != "" {
		t.Errorf("reply meta of a failed turn = %v, want model_error, auth, no time to retry at", meta)
	}

	// A failure that says how long to wait says until when, by the
	// turn's clock.
	f.ms.Script(testkit.RateLimited("3600"))
	out, err = f.agent.Run(context.Background(), ptr(input("later")))
	if err != nil {
		t.Fatal(err)
	}
	meta = out.Outbox[len(out.Outbox)-1].Meta
	if meta[sessions.ReplyMetaErrorClass] != "rate_limited" || meta[sessions.ReplyMetaRetryAt] != t0.Add(time.Hour).Format(time.RFC3339Nano) {
		t.Errorf("reply meta of a rate limited turn = %v, want rate_limited, retry at %s", meta, t0.Add(time.Hour))
	}
}

// A message that repeats a turn that ended without a reply (a client's
// retry of a request whose turn failed on the model) goes on with that
// turn: its message is in the history, and in what the model reads,
// once, after the work the turn did before it failed. A message after a
// reply, or another message, is a turn of its own.
func TestRepeatOfAnUnfinishedTurnGoesOnWithIt(t *testing.T) {
	tests := []struct {
		desc    string
		history []chat.Message
		text    string
		seen    []testkit.ModelMessage // after the system prompt
		added   []chat.Message
	}{
		{
			desc:    "the model failed on the message",
			history: []chat.Message{user("before"), said("ok"), user("hi")},
			text:    "hi",
			seen:    []testkit.ModelMessage{{Role: "user", Content: "before"}, {Role: "assistant", Content: "ok"}, {Role: "user", Content: "hi"}},
			added:   []chat.Message{said("echo: hi")},
		},
		{
			desc:    "the model failed after a tool ran",
			history: []chat.Message{user("hi"), calls(call("c1", "probe", `{}`)), result("c1", "probe", "done")},
			text:    "hi",
			seen: []testkit.ModelMessage{{Role: "user", Content: "hi"},
				{Role: "assistant", ToolCalls: []testkit.ModelToolCall{{ID: "c1", Name: "probe", Arguments: `{}`}}},
				{Role: "tool", Content: "done", ToolCallID: "c1"}},
			added: []chat.Message{said("echo: hi")},
		},
		{
			desc:    "a message after a reply",
			history: []chat.Message{user("hi"), said("hello")},
			text:    "hi",
			seen:    []testkit.ModelMessage{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}, {Role: "user", Content: "hi"}},
			added:   []chat.Message{user("hi"), said("echo: hi")},
		},
		{
			desc:    "another message after a failed turn",
			history: []chat.Message{user("hi")},
			text:    "something else",
			seen:    []testkit.ModelMessage{{Role: "user", Content: "hi"}, {Role: "user", Content: "something else"}},
			added:   []chat.Message{user("something else"), said("echo: something else")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f := newFixture(t)
			in := input(tt.text)
			in.History = tt.history
			out, err := f.agent.Run(context.Background(), &in)
			if err != nil || out.End != sessions.TurnDone {
				t.Fatalf("run: %s, %v", out.End, err)
			}
			if diff := cmp.Diff(tt.added, out.History); diff != "" {
				t.Errorf("history added (-want +got):\n%s", diff)
			}
			seen := f.ms.Requests()[0].Messages[1:]
			if diff := cmp.Diff(tt.seen, seen, cmpopts.IgnoreFields(testkit.ModelMessage{}, "Name")); diff != "" {
				t.Errorf("messages the model saw (-want +got):\n%s", diff)
			}
		})
	}

	// A turn that fails again adds nothing: however often it is retried,
	// the message is in the history once.
	f := newFixture(t)
	f.ms.Script(testkit.Fail(http.StatusBadGateway, "down"))
	in := input("hi")
	in.History = []chat.Message{user("hi")}
	out, err := f.agent.Run(context.Background(), &in)
	if err != nil || out.End != sessions.TurnModelError || len(out.History) != 0 {
		t.Errorf("a retry failing again: %s, %v, history added %+v; want a model error adding nothing", out.End, err, out.History)
	}
}

// A request longer than the model takes is made once more with a
// quarter of the earlier history; a second refusal ends the turn saying
// so.
func TestRunTrimsTheHistoryOnceWhenTheModelFindsItTooLong(t *testing.T) {
	for _, refusal := range []testkit.Step{
		testkit.Fail(http.StatusRequestEntityTooLarge, "request too large"),
		testkit.Fail(http.StatusBadRequest, "This model's maximum context length is 8192 tokens"),
	} {
		f := newFixture(t)
		in := input("and now?")
		for i := range 8 {
			in.History = append(in.History, user(fmt.Sprintf("earlier question %d %s", i, strings.Repeat("x", 100))), said("an answer"))
		}
		f.ms.Script(refusal, testkit.Reply("short answer"))
		out, err := f.agent.Run(context.Background(), &in)
		if err != nil {
			t.Fatal(err)
		}
		reqs := f.ms.Requests()
		if out.End != sessions.TurnDone || len(reqs) != 2 || len(reqs[1].Messages) >= len(reqs[0].Messages) {
			t.Fatalf("end %s after %d requests (%d then %d messages), want done with the history cut", out.End, len(reqs), len(reqs[0].Messages), len(reqs[len(reqs)-1].Messages))
		}
		if last := reqs[1].Messages[len(reqs[1].Messages)-1]; last.Content != "and now?" {
			t.Errorf("the turn's own message was cut: %+v", last)
		}

		f.ms.Script(refusal, refusal)
		out, _ = f.agent.Run(context.Background(), &in)
		if out.End != sessions.TurnModelError || llm.ClassOf(out.Err) != llm.ClassContextOverflow {
			t.Errorf("twice too long: end %s, err %v", out.End, out.Err)
		}
		if reply := out.Outbox[len(out.Outbox)-1].Text; !strings.Contains(reply, "/new") {
			t.Errorf("reply = %q, want it to say /new starts afresh", reply)
		}
	}
}

// ptr is the address of v, an input made in the call that runs it.
func ptr[T any](v T) *T { return &v }
