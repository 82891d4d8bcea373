package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.uber.org/goleak"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

const testKey = "hk-test-0123456789"

var epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	api   *api.Server
	tl    *timeline
	inbox *inbox
	srv   *httptest.Server
	turns sync.WaitGroup // turns the fake inbox is running
}

// newFixture serves an api.Server over httptest with fake inbox and
// timeline; edit adjusts the options.
func newFixture(t *testing.T, edit func(*api.Options)) *fixture {
	t.Helper()
	f := &fixture{tl: newTimeline(), inbox: newInbox()}
	opts := api.Options{
		Inbox:    f.inbox,
		Timeline: f.tl,
		Clock:    clock.NewFake(epoch),
		Logger:   slog.New(slog.DiscardHandler),
		Poll:     20 * time.Millisecond,
	}
	if edit != nil {
		edit(&opts)
	}
	f.api = api.New(opts)
	f.srv = httptest.NewServer(f.api)
	t.Cleanup(func() {
		f.turns.Wait()
		f.srv.Close()
	})
	return f
}

var outSeq atomic.Int64

// replyTo is the outbox message a turn for in sends.
func replyTo(in sessions.Inbound, kind, text string) outbox.Message {
	tg, err := outbox.ParseTarget(in.Meta["target"])
	if err != nil {
		panic(err)
	}
	return outbox.Message{
		ID:      fmt.Sprintf("out-%d", outSeq.Add(1)),
		Target:  tg,
		Conv:    in.Conv,
		Text:    text,
		ReplyTo: in.MessageID,
		Kind:    kind,
	}
}

// echoTurns makes every delivery run a turn that, after d, sends
// "echo: <text>" back through the adapter.
func (f *fixture) echoTurns(d time.Duration) {
	f.inbox.OnDeliver(func(_ context.Context, in sessions.Inbound) error {
		f.turns.Add(1)
		time.AfterFunc(d, func() {
			defer f.turns.Done()
			if r := f.api.Send(context.Background(), replyTo(in, "reply", "echo: "+in.Text)); r.Outcome != adapters.Accepted {
				panic(r.Reason)
			}
		})
		return nil
	})
}

func (f *fixture) client(opts ...option.RequestOption) *openai.Client {
	c := openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(f.srv.URL + "/v1"),
		option.WithAPIKey(testKey),
		option.WithMaxRetries(0),
	}, opts...)...)
	return &c
}

func chat(msgs ...openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "herald-test", Messages: msgs}
}

// do sends a request to the fixture and returns the status and body.
func (f *fixture) do(t *testing.T, method, path, body string, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

type errorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// Two requests on one conversation each get their own reply, also when
// the replies come through another process (another api.Server on the
// same store), in the other order: the timeline says what each answers.
func TestCompletionTakesItsOwnReplyFromAnotherProcess(t *testing.T) {
	f := newFixture(t, nil)
	other := api.New(api.Options{Inbox: f.inbox, Timeline: f.tl, Clock: clock.NewFake(epoch), Logger: slog.New(slog.DiscardHandler), Poll: 20 * time.Millisecond})
	var (
		mu   sync.Mutex
		ins  []sessions.Inbound
		both = make(chan struct{})
	)
	f.inbox.OnDeliver(func(_ context.Context, in sessions.Inbound) error {
		mu.Lock()
		defer mu.Unlock()
		if ins = append(ins, in); len(ins) == 2 {
			close(both)
		}
		return nil
	})
	c := f.client(option.WithHeader("X-Herald-Conversation", "shared"))
	texts := []string{"first", "second"}
	got := make([]chan string, len(texts))
	for i, text := range texts {
		got[i] = make(chan string, 1)
		go func() {
			res, err := c.Chat.Completions.New(context.Background(), chat(openai.UserMessage(text)))
			if err != nil || len(res.Choices) != 1 {
				got[i] <- fmt.Sprintf("error %v", err)
				return
			}
			got[i] <- res.Choices[0].Message.Content
		}()
	}
	<-both
	for i := len(ins) - 1; i >= 0; i-- {
		if r := other.Send(context.Background(), replyTo(ins[i], "reply", "echo: "+ins[i].Text)); r.Outcome != adapters.Accepted {
			t.Fatalf("the other process's send: %+v", r)
		}
	}
	for i, text := range texts {
		if reply := <-got[i]; reply != "echo: "+text {
			t.Errorf("request %q got %q, want its own reply", text, reply)
		}
	}
	items, err := f.tl.ReadTimeline(context.Background(), "api:shared", "", 10)
	if err != nil || len(items) != 2 || items[0].ReplyTo != ins[1].MessageID || items[1].ReplyTo != ins[0].MessageID {
		t.Errorf("timeline = %+v, %v; want each reply to say which message it answers", items, err)
	}
}

// A turn that ends in a notice for the message (stopped, dropped, not
// saved) ends the request with it; a notice for another message, or for
// none, does not.
func TestCompletionEndsWithItsTurnsNotice(t *testing.T) {
	f := newFixture(t, nil)
	f.inbox.OnDeliver(func(_ context.Context, in sessions.Inbound) error {
		f.turns.Add(1)
		go func() {
			defer f.turns.Done()
			other := replyTo(in, "notice", "not yours")
			other.ReplyTo = "another-message"
			general := replyTo(in, "notice", "for nobody")
			general.ReplyTo = ""
			for _, m := range []outbox.Message{other, general, replyTo(in, "notice", "Stopped.")} {
				if r := f.api.Send(context.Background(), m); r.Outcome != adapters.Accepted {
					panic(r.Reason)
				}
			}
		}()
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := f.client(option.WithHeader("X-Herald-Conversation", "n1")).Chat.Completions.New(ctx, chat(openai.UserMessage("a long job")))
	if err != nil || len(got.Choices) != 1 || got.Choices[0].Message.Content != "Stopped." {
		t.Fatalf("completion = %+v, %v; want the notice that ended its turn", got, err)
	}
}

func TestCompletion(t *testing.T) {
	f := newFixture(t, nil)
	f.echoTurns(20 * time.Millisecond)
	c := f.client(option.WithHeader("X-Herald-Conversation", "alice"))

	got, err := c.Chat.Completions.New(context.Background(), chat(
		openai.SystemMessage("be brief"),
		openai.UserMessage("first"),
		openai.AssistantMessage("an earlier answer"),
		openai.UserMessage("hello"),
	))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 1 {
		t.Fatalf("choices = %d, want 1", len(got.Choices))
	}
	ch := got.Choices[0]
	if ch.Message.Content != "echo: hello" || ch.Message.Role != "assistant" || ch.FinishReason != "stop" {
		t.Errorf("choice = %+v, want the assistant's reply to the last user message", ch)
	}
	if got.Object != "chat.completion" || got.Model != "herald-test" || got.Created != epoch.Unix() || !strings.HasPrefix(got.ID, "chatcmpl-") {
		t.Errorf("completion = id %q object %q model %q created %d", got.ID, got.Object, got.Model, got.Created)
	}
	in := f.inbox.Got()
	if len(in) != 1 {
		t.Fatalf("deliveries = %d, want 1", len(in))
	}
	// The request's system message travels with the turn.
	want := sessions.Inbound{Conv: "api:alice", Sender: "api", Text: "hello", Kind: sessions.KindUser,
		Meta: map[string]string{"target": "api:alice", sessions.MetaSystem: "be brief"}}
	if in[0].MessageID == "" {
		t.Error("inbound has no message id")
	}
	in[0].MessageID = ""
	if d := cmp.Diff(want, in[0]); d != "" {
		t.Errorf("inbound (-want +got):\n%s", d)
	}
}

func TestCompletionContentParts(t *testing.T) {
	f := newFixture(t, nil)
	f.echoTurns(0)
	got, err := f.client().Chat.Completions.New(context.Background(), chat(openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
		openai.TextContentPart("look"),
		openai.TextContentPart("here"),
	})))
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content != "echo: look\nhere" {
		t.Errorf("reply = %q", got.Choices[0].Message.Content)
	}
}

func TestCompletionConversation(t *testing.T) {
	tests := []struct {
		desc   string
		header string
		user   string
		want   string // conversation key; "" means a fresh one
	}{
		{desc: "header", header: "h-1", want: "api:h-1"},
		{desc: "user field", user: "bob", want: "api:bob"},
		{desc: "header wins over user", header: "h-2", user: "bob", want: "api:h-2"},
		{desc: "neither: a new conversation"},
	}
	f := newFixture(t, nil)
	f.echoTurns(5 * time.Millisecond)
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var opts []option.RequestOption
			if tt.header != "" {
				opts = append(opts, option.WithHeader("X-Herald-Conversation", tt.header))
			}
			params := chat(openai.UserMessage("hi"))
			if tt.user != "" {
				params.User = openai.String(tt.user)
			}
			var res *http.Response
			opts = append(opts, option.WithResponseInto(&res))
			if _, err := f.client(opts...).Chat.Completions.New(context.Background(), params); err != nil {
				t.Fatal(err)
			}
			in := f.inbox.Next(t)
			switch {
			case tt.want != "" && in.Conv != tt.want:
				t.Errorf("conversation = %q, want %q", in.Conv, tt.want)
			case tt.want == "" && (!strings.HasPrefix(in.Conv, "api:") || seen[in.Conv]):
				t.Errorf("conversation = %q, want a new api conversation", in.Conv)
			}
			seen[in.Conv] = true
			if h := res.Header.Get("X-Herald-Conversation"); "api:"+h != in.Conv {
				t.Errorf("X-Herald-Conversation = %q, want the id of %q", h, in.Conv)
			}
			if tt.user != "" && in.Sender != tt.user {
				t.Errorf("sender = %q, want %q", in.Sender, tt.user)
			}
		})
	}
}

func TestCompletionStream(t *testing.T) {
	f := newFixture(t, nil)
	f.echoTurns(30 * time.Millisecond)
	c := f.client(option.WithHeader("X-Herald-Conversation", "s"), option.WithHeader("Idempotency-Key", "key-1"))

	params := chat(openai.UserMessage("stream me"))
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		chunks++
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("chunk %d does not accumulate: %s", chunks, stream.Current().RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("choices = %d, want 1", len(acc.Choices))
	}
	ch := acc.Choices[0]
	if ch.Message.Content != "echo: stream me" || ch.Message.Role != "assistant" || ch.FinishReason != "stop" {
		t.Errorf("accumulated choice = %+v", ch)
	}
	if chunks != 4 {
		t.Errorf("chunks = %d, want role, content, finish and usage", chunks)
	}
	if acc.Model != "herald-test" {
		t.Errorf("model = %q", acc.Model)
	}
	if in := f.inbox.Got(); len(in) != 1 || in[0].MessageID != "key-1" || in[0].Conv != "api:s" {
		t.Errorf("deliveries = %+v, want one to api:s with the idempotency key as message id", in)
	}
}

// A reply delivered by another gateway process lands in the shared
// timeline without a local Send; polling finds it.
func TestReplyFromAnotherProcess(t *testing.T) {
	f := newFixture(t, nil)
	f.inbox.OnDeliver(func(_ context.Context, in sessions.Inbound) error {
		f.turns.Add(1)
		time.AfterFunc(60*time.Millisecond, func() {
			defer f.turns.Done()
			// A background completion first: not the reply.
			f.tl.AppendTimeline(context.Background(), sessions.TimelineItem{ID: "elsewhere-1", Conv: in.Conv, Kind: "completion", Text: "sub-agent done"})
			f.tl.AppendTimeline(context.Background(), sessions.TimelineItem{ID: "elsewhere-2", Conv: in.Conv, Kind: "reply", Text: "from afar"})
		})
		return nil
	})
	// An earlier reply is already in the timeline: it is not this turn's.
	f.tl.AppendTimeline(context.Background(), sessions.TimelineItem{ID: "old", Conv: "api:far", Kind: "reply", Text: "old reply"})

	got, err := f.client(option.WithHeader("X-Herald-Conversation", "far")).Chat.Completions.New(context.Background(), chat(openai.UserMessage("hi")))
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content != "from afar" {
		t.Errorf("reply = %q, want the one delivered elsewhere", got.Choices[0].Message.Content)
	}
}

// Two requests wait on one conversation; each gets the reply to its own
// message though the replies arrive in the other order.
func TestRepliesFindTheirRequests(t *testing.T) {
	f := newFixture(t, nil)
	c := f.client(option.WithHeader("X-Herald-Conversation", "pair"))
	type result struct {
		text string
		err  error
	}
	ask := func(text string, out chan<- result) {
		got, err := c.Chat.Completions.New(context.Background(), chat(openai.UserMessage(text)))
		if err != nil {
			out <- result{err: err}
			return
		}
		out <- result{text: got.Choices[0].Message.Content}
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go ask("one", first)
	inOne := f.inbox.Next(t)
	go ask("two", second)
	inTwo := f.inbox.Next(t)

	f.api.Send(context.Background(), replyTo(inTwo, "reply", "answer two"))
	f.api.Send(context.Background(), replyTo(inOne, "reply", "answer one"))
	for _, want := range []struct {
		ch   chan result
		text string
	}{{first, "answer one"}, {second, "answer two"}} {
		r := <-want.ch
		if r.err != nil || r.text != want.text {
			t.Errorf("got %q, %v; want %q", r.text, r.err, want.text)
		}
	}
}

// Many conversations at once, each with a few turns in a row.
func TestManyConversations(t *testing.T) {
	f := newFixture(t, nil)
	f.echoTurns(2 * time.Millisecond)
	c := f.client()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			conv := option.WithHeader("X-Herald-Conversation", fmt.Sprintf("many-%d", i))
			for j := range 3 {
				want := fmt.Sprintf("echo: %d.%d", i, j)
				got, err := c.Chat.Completions.New(context.Background(), chat(openai.UserMessage(fmt.Sprintf("%d.%d", i, j))), conv)
				if err != nil {
					t.Error(err)
					return
				}
				if got.Choices[0].Message.Content != want {
					t.Errorf("reply %q, want %q", got.Choices[0].Message.Content, want)
				}
			}
		})
	}
	wg.Wait()
}

func TestPostMessage(t *testing.T) {
	f := newFixture(t, nil)
	status, body := f.do(t, "POST", "/api/v1/conversations/m1/messages", `{"text":"remind me"}`, "Idempotency-Key", "idem-7")
	if status != http.StatusAccepted {
		t.Fatalf("status = %d %s, want 202", status, body)
	}
	var res struct {
		MessageID string `json:"message_id"`
	}
	if err := json.Unmarshal(body, &res); err != nil || res.MessageID != "idem-7" {
		t.Errorf("body = %s, want message_id idem-7", body)
	}
	in := f.inbox.Next(t)
	if in.Conv != "api:m1" || in.Text != "remind me" || in.MessageID != "idem-7" || in.Meta["target"] != "api:m1" {
		t.Errorf("inbound = %+v", in)
	}

	status, body = f.do(t, "POST", "/api/v1/conversations/m1/messages", `{"text":"again"}`)
	if err := json.Unmarshal(body, &res); status != http.StatusAccepted || err != nil || res.MessageID == "" || res.MessageID == "idem-7" {
		t.Errorf("without a key: %d %s, want 202 with a fresh id", status, body)
	}
}

type page struct {
	Items []sessions.TimelineItem `json:"items"`
	Next  string                  `json:"next"`
}

func TestTimeline(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	for _, m := range []outbox.Message{
		{ID: "o1", Target: outbox.Target{Platform: "api", Chat: "t"}, Conv: "api:t", Kind: "reply", Text: "one"},
		{ID: "o2", Target: outbox.Target{Platform: "api", Chat: "t"}, Kind: "completion", Text: "two"}, // conversation from the target
		{ID: "o3", Target: outbox.Target{Platform: "api", Chat: "t"}, Conv: "api:t", Kind: "notice", Text: "three"},
		{ID: "o1", Target: outbox.Target{Platform: "api", Chat: "t"}, Conv: "api:t", Kind: "reply", Text: "one"}, // a resend
		{ID: "x1", Target: outbox.Target{Platform: "api", Chat: "other"}, Conv: "api:other", Kind: "reply", Text: "elsewhere"},
	} {
		if r := f.api.Send(ctx, m); r.Outcome != adapters.Accepted {
			t.Fatalf("send %s: %v %s", m.ID, r.Outcome, r.Reason)
		}
	}
	read := func(query string) page {
		t.Helper()
		status, body := f.do(t, "GET", "/api/v1/conversations/t/timeline"+query, "")
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", query, status, body)
		}
		var p page
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	texts := func(p page) []string {
		var out []string
		for _, it := range p.Items {
			out = append(out, it.Text)
		}
		return out
	}

	all := read("")
	if d := cmp.Diff([]string{"one", "two", "three"}, texts(all)); d != "" {
		t.Fatalf("timeline (-want +got):\n%s", d)
	}
	for i, it := range all.Items {
		if it.Cursor == "" || it.Conv != "api:t" || (i > 0 && it.Cursor <= all.Items[i-1].Cursor) {
			t.Errorf("item %d = %+v: want increasing cursors in api:t", i, it)
		}
	}
	if all.Next != all.Items[2].Cursor {
		t.Errorf("next = %q, want the last cursor %q", all.Next, all.Items[2].Cursor)
	}
	if d := cmp.Diff([]string{"two", "three"}, texts(read("?after="+all.Items[0].Cursor))); d != "" {
		t.Errorf("after the first (-want +got):\n%s", d)
	}
	first := read("?limit=1")
	if d := cmp.Diff([]string{"one"}, texts(first)); d != "" || first.Next != all.Items[0].Cursor {
		t.Errorf("limit 1: %v next %q", texts(first), first.Next)
	}
	end := read("?after=" + all.Next)
	if end.Items == nil || len(end.Items) != 0 || end.Next != all.Next {
		t.Errorf("at the end: %+v, want no items and the same cursor", end)
	}

	for _, q := range []string{"?after=bogus", "?limit=0", "?limit=x"} {
		if status, body := f.do(t, "GET", "/api/v1/conversations/t/timeline"+q, ""); status != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s, want 400", q, status, body)
		}
	}
}

// event is one server-sent event.
type event struct {
	id, name, data string
}

// readEvents parses server-sent events from r onto a channel, skipping
// comments, until r ends.
func readEvents(r io.Reader) <-chan event {
	out := make(chan event, 16)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(r)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev != (event{}) {
					out <- ev
				}
				ev = event{}
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return out
}

func nextEvent(t *testing.T, ch <-chan event) (event, sessions.TimelineItem) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("event stream ended")
		}
		var it sessions.TimelineItem
		if err := json.Unmarshal([]byte(ev.data), &it); err != nil {
			t.Fatalf("event data %q: %v", ev.data, err)
		}
		if ev.name != "message" || ev.id != it.Cursor {
			t.Errorf("event %+v: want event message with the item's cursor as id", ev)
		}
		return ev, it
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return event{}, sessions.TimelineItem{}
}

func TestEvents(t *testing.T) {
	f := newFixture(t, func(o *api.Options) { o.KeepAlive = 10 * time.Millisecond })
	ctx := context.Background()
	send := func(id, text string) {
		t.Helper()
		m := outbox.Message{ID: id, Target: outbox.Target{Platform: "api", Chat: "ev"}, Conv: "api:ev", Kind: "reply", Text: text}
		if r := f.api.Send(ctx, m); r.Outcome != adapters.Accepted {
			t.Fatalf("send: %v %s", r.Outcome, r.Reason)
		}
	}
	open := func(query string, header ...string) (*http.Response, <-chan event) {
		t.Helper()
		req, _ := http.NewRequest("GET", f.srv.URL+"/api/v1/conversations/ev/events"+query, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
		}
		return res, readEvents(res.Body)
	}

	send("e1", "one")
	send("e2", "two")
	res, events := open("")
	_, one := nextEvent(t, events)
	ev2, two := nextEvent(t, events)
	send("e3", "three")
	_, three := nextEvent(t, events)
	if one.Text != "one" || two.Text != "two" || three.Text != "three" {
		t.Errorf("events = %q %q %q", one.Text, two.Text, three.Text)
	}
	res.Body.Close()

	// Resume where the client was.
	res, events = open("", "Last-Event-ID", ev2.id)
	if _, it := nextEvent(t, events); it.Text != "three" {
		t.Errorf("resumed with Last-Event-ID at %q: %q", ev2.id, it.Text)
	}
	res.Body.Close()
	res, events = open("?after=" + ev2.id)
	if _, it := nextEvent(t, events); it.Text != "three" {
		t.Errorf("resumed with after: %q", it.Text)
	}
	res.Body.Close()

	if status, body := f.do(t, "GET", "/api/v1/conversations/ev/events?after=bogus", ""); status != http.StatusBadRequest {
		t.Errorf("bad cursor: %d %s, want 400", status, body)
	}
}

// The events stream sends keep-alive comments while idle.
func TestEventsKeepAlive(t *testing.T) {
	f := newFixture(t, func(o *api.Options) { o.KeepAlive = 10 * time.Millisecond })
	res, err := http.Get(f.srv.URL + "/api/v1/conversations/quiet/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, ":") {
		t.Errorf("first line = %q, %v; want a comment", line, err)
	}
}

func TestErrors(t *testing.T) {
	f := newFixture(t, func(o *api.Options) { o.MaxBodyBytes = 1024 })
	big := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 2048) + `"}]}`
	tests := []struct {
		desc         string
		method, path string
		body         string
		status       int
		typ          string
	}{
		{"bad JSON", "POST", "/v1/chat/completions", `{"messages": [`, 400, "invalid_request_error"},
		{"no messages", "POST", "/v1/chat/completions", `{"model":"m"}`, 400, "invalid_request_error"},
		{"empty messages", "POST", "/v1/chat/completions", `{"messages":[]}`, 400, "invalid_request_error"},
		{"no user message", "POST", "/v1/chat/completions", `{"messages":[{"role":"system","content":"hi"}]}`, 400, "invalid_request_error"},
		{"empty user message", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"  "}]}`, 400, "invalid_request_error"},
		{"content of the wrong shape", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":7}]}`, 400, "invalid_request_error"},
		{"over the body limit", "POST", "/v1/chat/completions", big, 413, "request_too_large"},
		{"message over the limit", "POST", "/api/v1/conversations/a/messages", `{"text":"` + strings.Repeat("x", 2048) + `"}`, 413, "request_too_large"},
		{"message without text", "POST", "/api/v1/conversations/a/messages", `{}`, 400, "invalid_request_error"},
		{"message bad JSON", "POST", "/api/v1/conversations/a/messages", `text`, 400, "invalid_request_error"},
		{"colon in the conversation id", "POST", "/api/v1/conversations/a:b/messages", `{"text":"hi"}`, 400, "invalid_request_error"},
		{"unknown route", "GET", "/v2/nothing", "", 404, "not_found_error"},
		{"root", "GET", "/", "", 404, "not_found_error"},
		{"wrong method", "GET", "/v1/chat/completions", "", 405, "invalid_request_error"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			status, body := f.do(t, tt.method, tt.path, tt.body, "Content-Type", "application/json")
			var e errorBody
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("body %q is not a JSON error: %v", body, err)
			}
			if status != tt.status || e.Error.Type != tt.typ || e.Error.Message == "" {
				t.Errorf("got %d %s, want %d with type %s", status, body, tt.status, tt.typ)
			}
		})
	}
	if n := len(f.inbox.Got()); n != 0 {
		t.Errorf("%d deliveries from bad requests", n)
	}
}

func TestAuth(t *testing.T) {
	f := newFixture(t, func(o *api.Options) { o.APIKey = testKey })
	f.echoTurns(0)
	for _, tt := range []struct {
		desc   string
		auth   string
		path   string
		status int
	}{
		{"no key", "", "/api/v1/conversations/a/timeline", 401},
		{"wrong key", "Bearer nope", "/api/v1/conversations/a/timeline", 401},
		{"key without scheme", testKey, "/api/v1/conversations/a/timeline", 401},
		{"prefix of the key", "Bearer " + testKey[:5], "/api/v1/conversations/a/timeline", 401},
		{"right key", "Bearer " + testKey, "/api/v1/conversations/a/timeline", 200},
		{"scheme in lower case", "bearer " + testKey, "/api/v1/conversations/a/timeline", 200},
		{"unknown route without a key", "", "/v2/nothing", 401},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			var header []string
			if tt.auth != "" {
				header = []string{"Authorization", tt.auth}
			}
			status, body := f.do(t, "GET", tt.path, "", header...)
			if status != tt.status {
				t.Errorf("status = %d %s, want %d", status, body, tt.status)
			}
			if status == 401 {
				var e errorBody
				if err := json.Unmarshal(body, &e); err != nil || e.Error.Type != "authentication_error" {
					t.Errorf("body = %s", body)
				}
			}
		})
	}

	_, err := f.client(option.WithAPIKey("wrong")).Chat.Completions.New(context.Background(), chat(openai.UserMessage("hi")))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Errorf("openai-go with a wrong key: %v, want a 401", err)
	}
	if _, err := f.client().Chat.Completions.New(context.Background(), chat(openai.UserMessage("hi"))); err != nil {
		t.Errorf("openai-go with the key: %v", err)
	}
}

func TestInboxErrors(t *testing.T) {
	tests := []struct {
		desc   string
		err    error
		status int
		typ    string
	}{
		{"unavailable", errs.E("router", errs.Unavailable, "redis down"), 503, "service_unavailable"},
		{"closed", errs.E("router", errs.Closed, "closed"), 503, "service_unavailable"},
		{"too large", errs.E("router", errs.TooLarge, "entry is too big"), 413, "request_too_large"},
		{"invalid", errs.E("router", errs.Invalid, "bad key"), 400, "invalid_request_error"},
		{"a bug", errors.New("boom"), 500, "server_error"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f := newFixture(t, nil)
			f.inbox.OnDeliver(func(context.Context, sessions.Inbound) error { return tt.err })
			_, err := f.client().Chat.Completions.New(context.Background(), chat(openai.UserMessage("hi")))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.status {
				t.Fatalf("completion: %v, want status %d", err, tt.status)
			}
			var e errorBody
			if err := json.Unmarshal([]byte(apiErr.RawJSON()), &e.Error); err != nil || e.Error.Type != tt.typ {
				t.Errorf("error %s, want type %s", apiErr.RawJSON(), tt.typ)
			}
			if status, body := f.do(t, "POST", "/api/v1/conversations/a/messages", `{"text":"hi"}`); status != tt.status {
				t.Errorf("messages: %d %s, want %d", status, body, tt.status)
			}
		})
	}
}

func TestWaitLimit(t *testing.T) {
	f := newFixture(t, func(o *api.Options) { o.MaxWait = 100 * time.Millisecond })
	c := f.client()
	_, err := c.Chat.Completions.New(context.Background(), chat(openai.UserMessage("hi")))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("completion without a reply: %v, want 504", err)
	}

	stream := c.Chat.Completions.NewStreaming(context.Background(), chat(openai.UserMessage("hi")))
	for stream.Next() {
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "no reply within") {
		t.Errorf("stream without a reply: %v, want the wait limit's error", err)
	}
	// The turn goes on: the same request again would queue its message
	// once more, so the client is told not to retry; with an
	// Idempotency-Key a retry waits for the same turn, and may.
	for _, key := range []string{"", "idem-1"} {
		status, h := f.postHeaders(t, `{"messages":[{"role":"user","content":"hi"}]}`, "Idempotency-Key", key)
		want := map[string]string{"": "false", "idem-1": ""}[key]
		if status != http.StatusGatewayTimeout || h.Get("X-Should-Retry") != want {
			t.Errorf("504 with Idempotency-Key %q: %d, x-should-retry %q; want %q", key, status, h.Get("X-Should-Retry"), want)
		}
	}
}

// postHeaders posts body to /v1/chat/completions and returns the
// answer's status and headers.
func (f *fixture) postHeaders(t *testing.T, body string, header ...string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest("POST", f.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			req.Header.Set(header[i], header[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode, res.Header
}

// A client that gives up while waiting leaves nothing running; its turn
// goes on and its reply still lands in the timeline.
func TestDisconnectWhileWaiting(t *testing.T) {
	f := newFixture(t, nil)
	ignore := goleak.IgnoreCurrent()
	for _, stream := range []bool{false, true} {
		transport := &http.Transport{}
		c := f.client(option.WithHTTPClient(&http.Client{Transport: transport}))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			params := chat(openai.UserMessage("slow"))
			params.User = openai.String("gone")
			if stream {
				s := c.Chat.Completions.NewStreaming(ctx, params)
				for s.Next() {
				}
				done <- s.Err()
				return
			}
			_, err := c.Chat.Completions.New(ctx, params)
			done <- err
		}()
		in := f.inbox.Next(t)
		time.Sleep(50 * time.Millisecond) // a few polls into the wait
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("stream %v: client error %v, want canceled", stream, err)
		}
		transport.CloseIdleConnections()
		goleak.VerifyNone(t, ignore)

		if r := f.api.Send(context.Background(), replyTo(in, "reply", "late")); r.Outcome != adapters.Accepted {
			t.Errorf("late reply: %v", r.Outcome)
		}
	}
	if items := f.tl.Items("api:gone"); len(items) != 2 || items[1].Text != "late" {
		t.Errorf("timeline = %+v, want both late replies", items)
	}
}

func TestSend(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	for _, tt := range []struct {
		desc string
		m    outbox.Message
		want adapters.Outcome
	}{
		{"conversation", outbox.Message{ID: "a", Conv: "api:x", Target: outbox.Target{Platform: "api", Chat: "x"}, Kind: "reply", Text: "t"}, adapters.Accepted},
		{"target only", outbox.Message{ID: "b", Target: outbox.Target{Platform: "api", Chat: "x"}, Kind: "notice", Text: "t"}, adapters.Accepted},
		{"sent from another conversation", outbox.Message{ID: "e", Conv: "telegram:1", Target: outbox.Target{Platform: "api", Chat: "x"}, Kind: "message", Text: "t"}, adapters.Accepted},
		{"conversation without a target", outbox.Message{ID: "f", Conv: "api:x", Kind: "notice", Text: "t"}, adapters.Accepted},
		{"another platform's target", outbox.Message{ID: "c", Target: outbox.Target{Platform: "slack", Chat: "C1"}, Text: "t"}, adapters.Permanent},
		{"another platform's target and conversation", outbox.Message{ID: "g", Conv: "api:x", Target: outbox.Target{Platform: "slack", Chat: "C1"}, Text: "t"}, adapters.Permanent},
		{"no id", outbox.Message{Conv: "api:x", Target: outbox.Target{Platform: "api", Chat: "x"}, Text: "t"}, adapters.Permanent},
	} {
		if r := f.api.Send(ctx, tt.m); r.Outcome != tt.want {
			t.Errorf("%s: %v (%s), want %v", tt.desc, r.Outcome, r.Reason, tt.want)
		}
	}
	var ids []string
	for _, it := range f.tl.Items("api:x") {
		ids = append(ids, it.ID)
	}
	if d := cmp.Diff([]string{"a", "b", "e", "f"}, ids); d != "" {
		t.Errorf("api:x timeline (-want +got):\n%s", d)
	}

	f.tl.SetFail(errs.E("fake", errs.Unavailable, "down"))
	if r := f.api.Send(ctx, outbox.Message{ID: "d", Target: outbox.Target{Platform: "api", Chat: "x"}, Text: "t"}); r.Outcome != adapters.Transient {
		t.Errorf("store down: %v, want transient", r.Outcome)
	}
	if f.api.Platform() != "api" {
		t.Errorf("platform = %q", f.api.Platform())
	}
}

// Without Options.Inbox the server waits for Run's; when Run returns,
// streams and waits end.
func TestRun(t *testing.T) {
	f := newFixture(t, func(o *api.Options) { o.Inbox = nil })
	if status, body := f.do(t, "POST", "/api/v1/conversations/r/messages", `{"text":"hi"}`); status != 503 {
		t.Errorf("before Run: %d %s, want 503", status, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- f.api.Run(ctx, f.inbox) }()
	testkit.EventuallyWithin(t, 5*time.Second, func() (bool, string) {
		status, _ := f.do(t, "POST", "/api/v1/conversations/r/messages", `{"text":"hi"}`)
		return status == http.StatusAccepted, fmt.Sprintf("still %d after Run", status)
	})

	f.inbox.Next(t)

	res, err := http.Get(f.srv.URL + "/api/v1/conversations/r/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	waiting := make(chan error, 1)
	go func() {
		_, err := f.client().Chat.Completions.New(context.Background(), chat(openai.UserMessage("hi")), option.WithHeader("X-Herald-Conversation", "r"))
		waiting <- err
	}()
	f.inbox.Next(t)
	cancel()
	if err := <-ran; err != nil {
		t.Errorf("Run = %v", err)
	}
	if _, err := io.ReadAll(res.Body); err != nil {
		t.Errorf("stream did not end cleanly: %v", err)
	}
	var apiErr *openai.Error
	if err := <-waiting; !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a completion waiting at shutdown: %v, want 503", err)
	}
}

func TestMount(t *testing.T) {
	tl := newTimeline()
	s := api.New(api.Options{Timeline: tl, Inbox: newInbox(), APIKey: testKey, Logger: slog.New(slog.DiscardHandler)})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	s.Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path, auth string) int {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := get("/healthz", ""); got != 200 {
		t.Errorf("/healthz = %d, want 200 without a key", got)
	}
	if got := get("/api/v1/conversations/a/timeline", ""); got != 401 {
		t.Errorf("timeline without a key = %d, want 401", got)
	}
	if got := get("/api/v1/conversations/a/timeline", testKey); got != 200 {
		t.Errorf("timeline with the key = %d, want 200", got)
	}
	if got := get("/nothing", testKey); got != 404 {
		t.Errorf("/nothing = %d, want 404", got)
	}
}

func TestRequireKey(t *testing.T) {
	for _, tt := range []struct {
		addr, key string
		ok        bool
	}{
		{"127.0.0.1:8642", "", true},
		{"localhost:8642", "", true},
		{"[::1]:8642", "", true},
		{":8642", "", false},
		{"0.0.0.0:8642", "", false},
		{"10.0.0.5:8642", "", false},
		{"0.0.0.0:8642", "k", true},
	} {
		err := api.RequireKey(tt.addr, tt.key)
		if (err == nil) != tt.ok {
			t.Errorf("RequireKey(%q, %q) = %v, want ok %v", tt.addr, tt.key, err, tt.ok)
		}
		if err != nil && !errs.Is(err, errs.Invalid) {
			t.Errorf("RequireKey(%q): code %v, want invalid", tt.addr, errs.CodeOf(err))
		}
	}
}

// A completion whose turn failed on the model tells the client whether
// and when to try again: Retry-After when herald knows when to come back
// (the keys cooling until a time), x-should-retry: false, which the
// OpenAI clients honour, when no retry can succeed (a refused key, no
// model, or a wait longer than a client waits). The official client,
// with its default retries, then sends the request once.
func TestCompletionFailureSaysWhetherToRetry(t *testing.T) {
	tests := []struct {
		desc       string
		class      string
		retryIn    time.Duration // from the fake clock's now; 0 for none
		status     int
		retryAfter string
		retry      string // x-should-retry
		idemKey    string
	}{
		{desc: "the model's server is down", class: "unavailable", status: 503},
		// A retry with the key is answered with the same failure.
		{desc: "the model's server is down, with an Idempotency-Key", class: "unavailable", status: 503, retry: "false", idemKey: "idem-1"},
		{desc: "keys cooling for 20.2s", class: "rate_limited", retryIn: 20200 * time.Millisecond, status: 429, retryAfter: "21"},
		{desc: "keys cooling for an hour", class: "rate_limited", retryIn: time.Hour, status: 429, retryAfter: "3600", retry: "false"},
		{desc: "a server down for maintenance", class: "unavailable", retryIn: 10 * time.Minute, status: 503, retryAfter: "600", retry: "false"},
		{desc: "a refused key", class: "auth", status: 502, retry: "false"},
		{desc: "billing", class: "payment", status: 502, retry: "false"},
		{desc: "the model is not known", class: "model_not_found", status: 502, retry: "false"},
		{desc: "a refused request", class: "bad_request", status: 502, retry: "false"},
		{desc: "a conversation too long", class: "context_overflow", status: 502, retry: "false"},
		{desc: "no model configured", class: "not_configured", status: 503, retry: "false"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f := newFixture(t, nil)
			f.inbox.OnDeliver(func(_ context.Context, in sessions.Inbound) error {
				m := replyTo(in, "reply", "the model failed: "+tt.class)
				m.Meta = map[string]string{sessions.ReplyMetaEnd: string(sessions.TurnModelError), sessions.ReplyMetaErrorClass: tt.class}
				if tt.retryIn > 0 {
					m.Meta[sessions.ReplyMetaRetryAt] = epoch.Add(tt.retryIn).Format(time.RFC3339Nano)
				}
				f.turns.Add(1)
				go func() {
					defer f.turns.Done()
					if r := f.api.Send(context.Background(), m); r.Outcome != adapters.Accepted {
						panic(r.Reason)
					}
				}()
				return nil
			})
			status, h := f.postHeaders(t, `{"messages":[{"role":"user","content":"hi"}]}`, "Idempotency-Key", tt.idemKey)
			got := []any{status, h.Get("Retry-After"), h.Get("X-Should-Retry")}
			if want := []any{tt.status, tt.retryAfter, tt.retry}; !cmp.Equal(got, want) {
				t.Errorf("status, Retry-After, x-should-retry = %v, want %v", got, want)
			}
			if tt.retry != "false" {
				return
			}
			// The official client, retrying by default, sends it once.
			before := len(f.inbox.Got())
			c := f.client(option.WithMaxRetries(2), option.WithHeader("X-Herald-Conversation", "r"), option.WithHeader("Idempotency-Key", tt.idemKey+"-client"))
			if tt.idemKey == "" {
				c = f.client(option.WithMaxRetries(2), option.WithHeader("X-Herald-Conversation", "r"))
			}
			if _, err := c.Chat.Completions.New(context.Background(), chat(openai.UserMessage("hi"))); err == nil {
				t.Fatal("completion succeeded, want the failure")
			}
			if n := len(f.inbox.Got()) - before; n != 1 {
				t.Errorf("the client sent the request %d times, want once", n)
			}
		})
	}
}
