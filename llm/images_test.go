package llm_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
)

// testImages are a real PNG and a real JPEG, small.
func testImages(t *testing.T) (pngData, jpegData []byte) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	var p, j bytes.Buffer
	if err := png.Encode(&p, img); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&j, img, nil); err != nil {
		t.Fatal(err)
	}
	return p.Bytes(), j.Bytes()
}

func dataURL(mime string, data []byte) string {
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data)
}

// noHTTPURL fails the test when the request body names an http(s) URL.
func noHTTPURL(t *testing.T, body []byte) {
	t.Helper()
	if bytes.Contains(body, []byte("http://")) || bytes.Contains(body, []byte("https://")) {
		t.Errorf("the request carries an http(s) URL:\n%s", body)
	}
}

// sent is req as the fake model server received it over api, checked
// to name no http(s) URL.
func sent(t *testing.T, api string, req llm.Request) testkit.RecordedRequest {
	t.Helper()
	ms := testkit.NewModelServer(t)
	var c llm.Client
	if api == testkit.APIOpenAI {
		c, _ = newClient(t, ms, nil)
	} else {
		c, _ = newAnthropic(t, ms, nil)
	}
	if _, err := c.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	rec := ms.Requests()[0]
	noHTTPURL(t, rec.Body)
	return rec
}

// rawMessages are the raw request's messages, each as its JSON.
func rawMessages(t *testing.T, body []byte) []map[string]json.RawMessage {
	t.Helper()
	var req struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	return req.Messages
}

// photoRequest is a user message with text, a PNG, a JPEG, an image
// that was never loaded and one whose name is a URL with a token.
func photoRequest(pngData, jpegData []byte) llm.Request {
	return llm.Request{Messages: []chat.Message{
		{Role: "system", Content: "You are terse."},
		{Role: "user", Content: "what is this?", Images: []chat.Image{
			{Name: "a.png", MIME: "image/png", Path: "/home/h/files/c/1-a.png", Data: pngData},
			{Name: "b.jpg", MIME: "image/jpeg", Data: jpegData},
			{Name: "gone.png", MIME: "image/png", Path: "/home/h/files/c/2-gone.png"},
			{Name: "https://cdn.example.com/file/bot123:SECRET/photo.jpg?x=1", MIME: "image/jpeg"},
		}},
	}}
}

const unshownLines = "\n[image gone.png could not be shown: it was not loaded]" +
	"\n[image photo.jpg could not be shown: it was not loaded]"

// A user message's images go to Chat Completions as image_url parts with
// data URLs of their exact bytes, after one text part; an image without
// bytes is a line of that text, and no URL of an image is ever sent.
func TestOpenAIUserImagesAreDataURLParts(t *testing.T) {
	pngData, jpegData := testImages(t)
	rec := sent(t, testkit.APIOpenAI, photoRequest(pngData, jpegData))
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(rawMessages(t, rec.Body)[1]["content"], &parts); err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 {
		t.Fatalf("parts = %+v, want text and two images", parts)
	}
	if parts[0].Type != "text" || parts[0].Text != "what is this?"+unshownLines {
		t.Errorf("first part = %+v, want the text with a line for each image not shown", parts[0])
	}
	for i, want := range []string{dataURL("image/png", pngData), dataURL("image/jpeg", jpegData)} {
		if p := parts[i+1]; p.Type != "image_url" || p.ImageURL.URL != want {
			t.Errorf("part %d = %s %.60q, want image_url %.60q", i+1, p.Type, p.ImageURL.URL, want)
		}
	}
	if bytes.Contains(rec.Body, []byte("SECRET")) || bytes.Contains(rec.Body, []byte("/home/h")) {
		t.Errorf("the body names an image's address:\n%s", rec.Body)
	}
}

// The same message goes to the Messages API as a text block, then image
// blocks with base64 sources.
func TestAnthropicUserImagesAreBase64Blocks(t *testing.T) {
	pngData, jpegData := testImages(t)
	rec := sent(t, testkit.APIAnthropic, photoRequest(pngData, jpegData))
	var blocks []struct {
		Type   string `json:"type"`
		Text   string `json:"text"`
		Source struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
		} `json:"source"`
	}
	if err := json.Unmarshal(rawMessages(t, rec.Body)[0]["content"], &blocks); err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 || blocks[0].Type != "text" || blocks[0].Text != "what is this?"+unshownLines {
		t.Fatalf("blocks = %+v, want the text with its lines, then two images", blocks)
	}
	for i, want := range []struct {
		mime string
		data []byte
	}{{"image/png", pngData}, {"image/jpeg", jpegData}} {
		b := blocks[i+1]
		if b.Type != "image" || b.Source.Type != "base64" || b.Source.MediaType != want.mime || b.Source.Data != base64.StdEncoding.EncodeToString(want.data) {
			t.Errorf("block %d = %s %s %s %.40q, want a base64 %s image of the bytes", i+1, b.Type, b.Source.Type, b.Source.MediaType, b.Source.Data, want.mime)
		}
	}
	if bytes.Contains(rec.Body, []byte("SECRET")) {
		t.Errorf("the body names an image's address:\n%s", rec.Body)
	}
}

// A message of images alone has no empty text part (the Messages API
// refuses an empty text block); an image of a type the APIs do not take
// is named in a line instead; an image without a type is sniffed.
func TestImagesWithoutTextAndOfOtherTypes(t *testing.T) {
	pngData, _ := testImages(t)
	for _, api := range []string{testkit.APIOpenAI, testkit.APIAnthropic} {
		t.Run(api, func(t *testing.T) {
			only := llm.Request{Messages: []chat.Message{{Role: "user", Images: []chat.Image{{Name: "a.png", Data: pngData}}}}}
			odd := llm.Request{Messages: []chat.Message{{Role: "user", Content: "look", Images: []chat.Image{{Name: "x.heic", MIME: "image/heic", Data: []byte("heic")}}}}}
			got := []testkit.RecordedRequest{sent(t, api, only), sent(t, api, odd)}
			want := testkit.ModelMessage{Role: "user", Images: []string{dataURL("image/png", pngData)}}
			if d := cmp.Diff(want, got[0].Messages[0]); d != "" {
				t.Errorf("images alone (-want +got):\n%s", d)
			}
			if strings.Contains(string(got[0].Body), `"text":""`) {
				t.Errorf("an empty text part was sent:\n%s", got[0].Body)
			}
			want = testkit.ModelMessage{Role: "user", Content: "look\n[image x.heic could not be shown: its type image/heic is not one the model takes]"}
			if d := cmp.Diff(want, got[1].Messages[0]); d != "" {
				t.Errorf("an image of another type (-want +got):\n%s", d)
			}
		})
	}
}

// toolImagesRequest is a turn whose first of two tool results has an
// image.
func toolImagesRequest(pngData []byte) llm.Request {
	return llm.Request{Messages: []chat.Message{
		{Role: "user", Content: "take a screenshot"},
		{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "call_1", Name: "screenshot", Arguments: "{}"}, {ID: "call_2", Name: "clock", Arguments: "{}"}}},
		{Role: "tool", ToolCallID: "call_1", Name: "screenshot", Content: "taken", Images: []chat.Image{{Name: "shot.png", MIME: "image/png", Data: pngData}}},
		{Role: "tool", ToolCallID: "call_2", Name: "clock", Content: "noon"},
	}}
}

// Chat Completions takes no image in a tool message: a tool's images are
// shown in a user message right after the turn's tool results, which
// says which tool they came from.
func TestOpenAIToolImagesFollowTheResults(t *testing.T) {
	pngData, _ := testImages(t)
	rec := sent(t, testkit.APIOpenAI, toolImagesRequest(pngData))
	want := []testkit.ModelMessage{
		{Role: "user", Content: "take a screenshot"},
		{Role: "assistant", ToolCalls: []testkit.ModelToolCall{{ID: "call_1", Name: "screenshot", Arguments: "{}"}, {ID: "call_2", Name: "clock", Arguments: "{}"}}},
		{Role: "tool", ToolCallID: "call_1", Content: "taken"},
		{Role: "tool", ToolCallID: "call_2", Content: "noon"},
		{Role: "user", Content: "Images from the result of screenshot (call call_1):", Images: []string{dataURL("image/png", pngData)}},
	}
	if d := cmp.Diff(want, rec.Messages); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
}

// The Messages API takes a tool's images inside its tool_result, after
// its text.
func TestAnthropicToolImagesInTheResult(t *testing.T) {
	pngData, _ := testImages(t)
	rec := sent(t, testkit.APIAnthropic, toolImagesRequest(pngData))
	want := []testkit.ModelMessage{
		{Role: "user", Content: "take a screenshot"},
		{Role: "assistant", ToolCalls: []testkit.ModelToolCall{{ID: "call_1", Name: "screenshot", Arguments: "{}"}, {ID: "call_2", Name: "clock", Arguments: "{}"}}},
		{Role: "tool", ToolCallID: "call_1", Content: "taken", Images: []string{dataURL("image/png", pngData)}},
		{Role: "tool", ToolCallID: "call_2", Content: "noon"},
	}
	if d := cmp.Diff(want, rec.Messages); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
	var content []struct {
		Type string `json:"type"`
	}
	var msgs = rawMessages(t, rec.Body)
	var blocks []struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(msgs[2]["content"], &blocks); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(blocks[0].Content, &content); err != nil {
		t.Fatal(err)
	}
	if len(content) != 2 || content[0].Type != "text" || content[1].Type != "image" {
		t.Errorf("tool_result content = %+v, want text then image", content)
	}
}

func TestTakesImages(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  bool
	}{
		{"gpt-4o", true}, {"gpt-4o-mini", true}, {"chatgpt-4o-latest", true}, {"gpt-4.1-nano", true},
		{"gpt-5", true}, {"gpt-5-mini", true}, {"o1", true}, {"o3", true}, {"o4-mini", true},
		{"openai/gpt-4o", true}, {"GPT-4O", true}, {"gpt-4-turbo", true},
		{"claude-3-5-sonnet-20241022", true}, {"claude-3-haiku-20240307", true}, {"claude-sonnet-4-5", true},
		{"claude-opus-4-1", true}, {"claude-haiku-4-5", true}, {"anthropic/claude-3.7-sonnet", true},
		{"gemini-2.5-flash", true}, {"google/gemini-2.0-flash-001", true}, {"gemini-pro-vision", true},
		{"pixtral-12b-2409", true}, {"llava:13b", true}, {"qwen2.5-vl:7b", true}, {"Qwen/Qwen2.5-VL-7B-Instruct", true},
		{"llama3.2-vision", true}, {"meta-llama/llama-3.2-11b-vision-instruct", true}, {"grok-2-vision-1212", true},
		{"gemma3:4b", true}, {"llama-4-scout", true},

		{"gpt-3.5-turbo", false}, {"gpt-4", false}, {"o1-mini", false}, {"o3-mini", false},
		{"gpt-4o-audio-preview", false}, {"claude-2.1", false}, {"claude-instant-1.2", false},
		{"gemini-1.0-pro", false}, {"llama3.1:8b", false}, {"qwen2.5:7b", false}, {"mistral-large-latest", false},
		{"deepseek-chat", false}, {"gpt-oss-20b", false}, {"", false}, {"test-model", false},
	} {
		if got := llm.TakesImages(tc.model); got != tc.want {
			t.Errorf("TakesImages(%q) = %v, want %v", tc.model, got, tc.want)
		}
	}
}
