package tools_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/tools"
)

func coreSet(t *testing.T, opts tools.CoreOptions) *tools.Set {
	t.Helper()
	r := tools.NewRegistry()
	if err := tools.RegisterCore(r, opts); err != nil {
		t.Fatal(err)
	}
	set, err := r.Set([]string{tools.Core})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestCoreToolset(t *testing.T) {
	if diff := cmp.Diff([]string{"clarify", "send_message"}, coreSet(t, tools.CoreOptions{}).Names()); diff != "" {
		t.Errorf("without notes (-want +got):\n%s", diff)
	}
	if err := tools.RegisterCore(tools.NewRegistry(), tools.CoreOptions{AllowedTargets: []string{"telegram"}}); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), `"telegram"`) {
		t.Errorf("malformed allowed target: got %v, want Invalid naming it", err)
	}
}

func TestClarify(t *testing.T) {
	set := coreSet(t, tools.CoreOptions{})
	tests := []struct {
		desc string
		args string
		want tools.Result
	}{
		{desc: "question", args: `{"question": "Which file?"}`, want: tools.Result{Content: `{"status":"asked"}`, EndTurn: true, Reply: "Which file?"}},
		{desc: "question with choices", args: `{"question": " Deploy where? ", "choices": ["staging", "production"]}`,
			want: tools.Result{Content: `{"status":"asked"}`, EndTurn: true, Reply: "Deploy where?\n\n1. staging\n2. production"}},
		{desc: "blank question", args: `{"question": "  "}`, want: tools.Result{Content: `{"error":"question is empty: write the question to ask"}`, IsError: true}},
		{desc: "missing question", args: `{"choices": ["a"]}`, want: tools.Result{Content: `{"error":"invalid arguments for clarify: missing property 'question'"}`, IsError: true}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got := set.Call(context.Background(), &tools.Turn{}, chat.ToolCall{Name: "clarify", Arguments: tc.args})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSendMessage(t *testing.T) {
	allowed := []string{"telegram:555", "slack:*", "discord:9:42"}
	tests := []struct {
		desc    string
		allowed []string
		args    string
		queued  []outbox.Message
		errWant []string
	}{
		{desc: "exact target", allowed: allowed, args: `{"target": "telegram:555", "text": "build is green"}`,
			queued: []outbox.Message{{Target: outbox.Target{Platform: "telegram", Chat: "555"}, Conv: "api:c1", Text: "build is green", Kind: tools.KindMessage}}},
		{desc: "platform wildcard, with a thread", allowed: allowed, args: `{"target": "slack:C01:1700.5", "text": "hi"}`,
			queued: []outbox.Message{{Target: outbox.Target{Platform: "slack", Chat: "C01", Thread: "1700.5"}, Conv: "api:c1", Text: "hi", Kind: tools.KindMessage}}},
		{desc: "exact thread", allowed: allowed, args: `{"target": "discord:9:42", "text": "hi"}`,
			queued: []outbox.Message{{Target: outbox.Target{Platform: "discord", Chat: "9", Thread: "42"}, Conv: "api:c1", Text: "hi", Kind: tools.KindMessage}}},
		{desc: "another chat of an exact platform", allowed: allowed, args: `{"target": "telegram:556", "text": "hi"}`,
			errWant: []string{"target telegram:556 is not allowed", "telegram:555, slack:*, discord:9:42"}},
		{desc: "the chat of an exact thread", allowed: allowed, args: `{"target": "discord:9", "text": "hi"}`,
			errWant: []string{"target discord:9 is not allowed"}},
		{desc: "nothing allowed", args: `{"target": "telegram:555", "text": "hi"}`,
			errWant: []string{"target telegram:555 is not allowed", "allowed_targets is empty"}},
		{desc: "malformed target", allowed: allowed, args: `{"target": "telegram", "text": "hi"}`,
			errWant: []string{`target "telegram" is not platform:chat[:thread]`}},
		{desc: "blank text", allowed: allowed, args: `{"target": "telegram:555", "text": " "}`, errWant: []string{"text is empty"}},
		{desc: "missing text", allowed: allowed, args: `{"target": "telegram:555"}`, errWant: []string{"missing property 'text'"}},
		{desc: "text too long", allowed: allowed, args: `{"target": "telegram:555", "text": "` + strings.Repeat("é", tools.MaxSendChars+1) + `"}`, errWant: []string{"32001 characters, over the limit of 32000"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			set := coreSet(t, tools.CoreOptions{AllowedTargets: tc.allowed})
			turn := &tools.Turn{Conv: "api:c1"}
			res := set.Call(context.Background(), turn, chat.ToolCall{Name: "send_message", Arguments: tc.args})
			if tc.errWant != nil {
				msg := errorOf(t, res)
				for _, w := range tc.errWant {
					if !strings.Contains(msg, w) {
						t.Errorf("error %q does not contain %q", msg, w)
					}
				}
			} else if res.IsError || !strings.Contains(res.Content, `"status":"queued"`) {
				t.Errorf("result %+v, want queued", res)
			}
			if diff := cmp.Diff(tc.queued, turn.Queued()); diff != "" {
				t.Errorf("queued (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseTargets(t *testing.T) {
	for _, bad := range []string{"telegram", ":*", "telegram:*:x", "*", "telegram:"} {
		if _, err := tools.ParseTargets([]string{"slack:*", bad}); !errs.Is(err, errs.Invalid) {
			t.Errorf("ParseTargets(%q): got %v, want Invalid", bad, err)
		}
	}
	ts, err := tools.ParseTargets([]string{" telegram:1 ", "slack:*"})
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[outbox.Target]bool{
		{Platform: "telegram", Chat: "1"}:              true,
		{Platform: "telegram", Chat: "1", Thread: "2"}: false,
		{Platform: "slack", Chat: "C9"}:                true,
		{Platform: "discord", Chat: "1"}:               false,
	} {
		if got, _ := ts.Allows(target); got != want {
			t.Errorf("Allows(%s) = %v, want %v", target, got, want)
		}
	}
}
