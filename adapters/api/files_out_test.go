package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// files is an in-memory store of file bytes, as media.Store reads them.
type files struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (fs *files) File(_ context.Context, id string) ([]byte, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	data, ok := fs.m[id]
	if !ok {
		return nil, errs.E("fake.File", errs.NotFound, "no file %q", id)
	}
	return data, nil
}

func (fs *files) PutFile(_ context.Context, id string, data []byte) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.m[id] = data
	return nil
}

func (fs *files) DeleteFile(_ context.Context, id string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	delete(fs.m, id)
	return nil
}

// sentFile keeps data as a file sent to the api chat chat, and returns
// it as a message's file.
func (fs *files) sentFile(chat, name string, data []byte) outbox.File {
	id := media.OutboundID(outbox.Target{Platform: api.Platform, Chat: chat}, name)
	fs.mu.Lock()
	fs.m[id] = data
	fs.mu.Unlock()
	return outbox.File{Name: name, MIME: "image/png", Size: int64(len(data)), Blob: id, Photo: true}
}

var pngHead = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

func TestSendListsFilesTheAPIServes(t *testing.T) {
	ctx := context.Background()
	fs := &files{m: map[string][]byte{}}
	f := newFixture(t, func(o *api.Options) { o.APIKey, o.Files = testKey, fs })
	chart := fs.sentFile("x", "chart 1.png", pngHead)
	other := fs.sentFile("y", "theirs.png", pngHead)
	m := outbox.Message{ID: "o1", Conv: "api:x", Target: outbox.Target{Platform: "api", Chat: "x"}, Kind: "file", Text: "the chart", Files: []outbox.File{chart}}
	if r := f.api.Send(ctx, m); r.Outcome != adapters.Accepted {
		t.Fatalf("Send: %v %s", r.Outcome, r.Reason)
	}
	code, body := f.do(t, "GET", "/api/v1/conversations/x/timeline", "", "Authorization", "Bearer "+testKey)
	var page struct {
		Items []sessions.TimelineItem `json:"items"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &page) != nil || len(page.Items) != 1 {
		t.Fatalf("timeline: %d %s", code, body)
	}
	want := []sessions.TimelineFile{{Name: "chart 1.png", MIME: "image/png", Size: int64(len(pngHead)),
		URL: "/api/v1/conversations/x/files/" + chart.Blob + "?name=chart+1.png"}}
	if d := cmp.Diff(want, page.Items[0].Files); d != "" || page.Items[0].Text != "the chart" {
		t.Errorf("the item's files (-want +got):\n%s\ntext %q", d, page.Items[0].Text)
	}

	req, _ := http.NewRequest("GET", f.srv.URL+want[0].URL, nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	h := res.Header
	if res.StatusCode != http.StatusOK || h.Get("Content-Type") != "image/png" || h.Get("X-Content-Type-Options") != "nosniff" ||
		h.Get("Content-Disposition") != `attachment; filename="chart 1.png"` || res.ContentLength != int64(len(pngHead)) {
		t.Errorf("GET the file: %d %v, want the PNG as an attachment", res.StatusCode, h)
	}

	for _, tc := range []struct {
		desc, path string
		header     []string
		status     int
	}{
		{"without the key", want[0].URL, nil, http.StatusUnauthorized},
		{"another conversation's file", "/api/v1/conversations/x/files/" + other.Blob, []string{"Authorization", "Bearer " + testKey}, http.StatusNotFound},
		{"a file no longer kept", "/api/v1/conversations/x/files/" + media.OutboundID(outbox.Target{Platform: "api", Chat: "x"}, "gone"), []string{"Authorization", "Bearer " + testKey}, http.StatusNotFound},
		{"not a sent file's id", "/api/v1/conversations/x/files/up-1", []string{"Authorization", "Bearer " + testKey}, http.StatusNotFound},
		{"a bad conversation", "/api/v1/conversations/x%3Ay/files/" + chart.Blob, []string{"Authorization", "Bearer " + testKey}, http.StatusBadRequest},
	} {
		if code, body := f.do(t, "GET", tc.path, "", tc.header...); code != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.desc, code, body, tc.status)
		}
	}
}

// A completion's answer names the files its turn sent: those sent
// before its reply, and the reply's own.
func TestCompletionMentionsTheFilesItsTurnSent(t *testing.T) {
	fs := &files{m: map[string][]byte{}}
	f := newFixture(t, func(o *api.Options) { o.Files = fs })
	f.inbox.OnDeliver(func(_ context.Context, in sessions.Inbound) error {
		f.turns.Add(1)
		time.AfterFunc(20*time.Millisecond, func() {
			defer f.turns.Done()
			sent := replyTo(in, "file", "the report")
			sent.ReplyTo = ""
			sent.Files = []outbox.File{fs.sentFile("m", "report.pdf", []byte("%PDF-1.4"))}
			sent.Files[0].MIME = "application/pdf"
			reply := replyTo(in, "reply", "here it is")
			reply.Files = []outbox.File{fs.sentFile("m", "chart.png", pngHead)}
			msgs := []outbox.Message{sent, reply}
			if in.Text == "only the picture" {
				reply.Text = ""
				msgs = []outbox.Message{reply}
			}
			for _, m := range msgs {
				if r := f.api.Send(context.Background(), m); r.Outcome != adapters.Accepted {
					panic(r.Reason)
				}
			}
		})
		return nil
	})
	c := f.client(option.WithHeader("X-Herald-Conversation", "m"))
	got, err := c.Chat.Completions.New(context.Background(), chat(openai.UserMessage("send the report")))
	if err != nil {
		t.Fatal(err)
	}
	content := got.Choices[0].Message.Content
	for _, want := range []string{"here it is\n\nFiles sent:", "- report.pdf (application/pdf, 8 bytes): /api/v1/conversations/m/files/out-", "- chart.png (image/png, 16 bytes): /api/v1/conversations/m/files/out-"} {
		if !strings.Contains(content, want) {
			t.Errorf("answer %q does not hold %q", content, want)
		}
	}

	stream := c.Chat.Completions.NewStreaming(context.Background(), chat(openai.UserMessage("once more")))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if s := acc.Choices[0].Message.Content; !strings.HasPrefix(s, "here it is\n\nFiles sent:\n- report.pdf") || strings.Count(s, "\n- ") != 2 {
		t.Errorf("streamed answer %q, want the reply and its turn's two files", s)
	}

	// A reply that is its picture alone is the list alone.
	got, err = c.Chat.Completions.New(context.Background(), chat(openai.UserMessage("only the picture")))
	if err != nil {
		t.Fatal(err)
	}
	if s := got.Choices[0].Message.Content; !strings.HasPrefix(s, "Files sent:\n- chart.png") || strings.Count(s, "\n- ") != 1 {
		t.Errorf("answer %q, want the one picture listed", s)
	}
}
