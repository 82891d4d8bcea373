package slack

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/slackfake"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// withFiles is ev carrying files, as Slack sends a message with files.
func withFiles(ev map[string]any, files ...slackfake.File) map[string]any {
	objs := make([]map[string]any, len(files))
	for i, f := range files {
		objs[i] = f.Object()
	}
	ev["files"] = objs
	if ev["type"] == "message" {
		ev["subtype"] = "file_share"
	}
	return ev
}

func TestFilesArriveAsAttachmentsAndFetch(t *testing.T) {
	f := newFixture(t, false)
	srv := f.events(t)
	photo := f.fake.PutFile(slackfake.File{Name: "whiteboard.jpg", MIME: "image/jpeg", Data: testkit.Bytes(4000, 1)})
	clip := f.fake.PutFile(slackfake.File{Name: "audio_message.webm", MIME: "audio/webm", Subtype: "slack_audio", Data: testkit.Bytes(6000, 2)})
	doc := f.fake.PutFile(slackfake.File{Name: "notes.pdf", MIME: "application/pdf", Data: testkit.Bytes(90_000, 3)})

	for i, ev := range []map[string]any{
		withFiles(dm(alice, "D1", "1700000100.000100", "", "what is on it?"), photo),
		withFiles(dm(alice, "D1", "1700000100.000200", "", ""), clip),
		withFiles(mention(alice, "C1", "1700000100.000300", "", "<@U0HERALDBOT> read this"), doc),
	} {
		if status, body := post(t, signedEvent(srv.URL, slackfake.EventCallback(team, "Ev"+string(rune('1'+i)), ev))); status != http.StatusOK {
			t.Fatalf("event %d: status %d %s", i+1, status, body)
		}
	}
	got := f.inbox.Wait(t, 3)
	want := [][]sessions.Attachment{
		{{Name: "whiteboard.jpg", MIME: "image/jpeg", Size: 4000, Kind: sessions.AttachImage, URL: photo.URLPrivate, PlatformID: photo.ID}},
		{{Name: "audio_message.webm", MIME: "audio/webm", Size: 6000, Kind: sessions.AttachVoice, URL: clip.URLPrivate, PlatformID: clip.ID}},
		{{Name: "notes.pdf", MIME: "application/pdf", Size: 90_000, Kind: sessions.AttachDocument, URL: doc.URLPrivate, PlatformID: doc.ID}},
	}
	for i, g := range got {
		if diff := cmp.Diff(want[i], g.Attachments); diff != "" {
			t.Errorf("message %d's attachments (-want +got):\n%s", i+1, diff)
		}
	}
	if got[0].Text != "what is on it?" || got[1].Text != "" || got[2].Text != "read this" {
		t.Errorf("texts %q %q %q", got[0].Text, got[1].Text, got[2].Text)
	}

	for i, file := range []slackfake.File{photo, clip, doc} {
		data, err := f.a.Fetch(context.Background(), got[i].Attachments[0], 1<<20)
		if err != nil || !bytes.Equal(data, file.Data) {
			t.Errorf("Fetch of %s = %d bytes, %v; want its %d bytes", file.Name, len(data), err, len(file.Data))
		}
	}
	for _, c := range f.fake.Calls(slackfake.Download) {
		if c.Token != slackfake.BotToken {
			t.Errorf("a download with token %q, want the bot token", c.Token)
		}
	}
}

func TestFetchRefusals(t *testing.T) {
	counter := &testkit.ReadCounter{Prefix: "/files-pri/"}
	f := newFixture(t, false, func(o *Options) { o.HTTPClient = counter.Client() })
	file := f.fake.PutFile(slackfake.File{Name: "big.bin", MIME: "application/octet-stream", Data: testkit.Bytes(64<<10, 4)})
	att := sessions.Attachment{Name: file.Name, URL: file.URLPrivate, PlatformID: file.ID}
	const max = 16 << 10
	tests := []struct {
		desc      string
		script    func()
		att       sessions.Attachment
		max       int64
		code      errs.Code
		words     string
		downloads int
	}{
		{desc: "a size Slack told over the limit", att: sessions.Attachment{Name: "big.bin", URL: file.URLPrivate, Size: 64 << 10},
			max: max, code: errs.TooLarge, words: "big.bin is 64 KiB, over the limit of 16 KiB"},
		{desc: "a length the answer tells over the limit", att: att, max: max, code: errs.TooLarge, words: "big.bin", downloads: 1},
		{desc: "the file is gone", script: func() { f.fake.Fail(slackfake.Download, slackfake.Failure{Status: 404}) },
			att: att, max: 1 << 20, code: errs.NotFound, words: "Slack answered 404 Not Found", downloads: 1},
		{desc: "a server error", script: func() { f.fake.Fail(slackfake.Download, slackfake.Failure{Status: 503}) },
			att: att, max: 1 << 20, code: errs.Unavailable, words: "503", downloads: 1},
		{desc: "a forbidden file", script: func() { f.fake.Fail(slackfake.Download, slackfake.Failure{Status: 403}) },
			att: att, max: 1 << 20, code: errs.Invalid, words: "Slack answered 403 Forbidden", downloads: 1},
		{desc: "a URL off Slack gets no token", att: sessions.Attachment{Name: "x.png", URL: "https://evil.example/x.png"},
			max: 1 << 20, code: errs.Invalid, words: "not on Slack"},
		{desc: "a file Slack gave no address for", att: sessions.Attachment{Name: "shared.doc", PlatformID: "F0OTHER"},
			max: 1 << 20, code: errs.NotFound, words: "no download address"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if tc.script != nil {
				tc.script()
			}
			before := len(f.fake.Calls(slackfake.Download))
			counter.Reset()
			data, err := f.a.Fetch(context.Background(), tc.att, tc.max)
			if !errs.Is(err, tc.code) || data != nil || !strings.Contains(err.Error(), tc.words) {
				t.Errorf("Fetch = %d bytes, %v; want %s with %q", len(data), err, tc.code, tc.words)
			}
			if n := len(f.fake.Calls(slackfake.Download)) - before; n != tc.downloads {
				t.Errorf("%d downloads, want %d", n, tc.downloads)
			}
			if n := counter.Read(); n > tc.max+1 {
				t.Errorf("%d bytes read, want at most %d", n, tc.max+1)
			}
		})
	}
}

// A bot whose token may not read the file is sent to Slack's sign-in
// page: that page is not the file.
func TestFetchOfAFileTheBotMayNotRead(t *testing.T) {
	f := newFixture(t, false, func(o *Options) { o.Config.BotToken = "xoxb-another-app" })
	file := f.fake.PutFile(slackfake.File{Name: "secret.txt", MIME: "text/plain", Data: []byte("s3cret")})
	data, err := f.a.Fetch(context.Background(), sessions.Attachment{Name: file.Name, URL: file.URLPrivate, PlatformID: file.ID}, 1<<20)
	if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "sign-in page") || !strings.Contains(err.Error(), "files:read") || data != nil {
		t.Fatalf("Fetch = %q, %v; want Invalid naming the sign-in page and files:read", data, err)
	}
}

func TestSendFilesToTheThread(t *testing.T) {
	f := newFixture(t, false)
	chart := outbox.File{Name: "chart.png", MIME: "image/png", Photo: true, Data: testkit.Bytes(5000, 5)}
	csv := outbox.File{Name: "data.csv", MIME: "text/csv", Data: []byte("a,b\n1,2\n")}
	res := f.a.Send(context.Background(), outbox.Message{ID: "m1", Target: thread, Text: "The **chart** & the data", Files: []outbox.File{chart, csv}})
	if res.Outcome != adapters.Accepted {
		t.Fatalf("Send = %+v", res)
	}
	ups := f.fake.Uploads()
	if len(ups) != 2 {
		t.Fatalf("%d files shared, want 2", len(ups))
	}
	want := []slackfake.Uploaded{
		{ID: ups[0].ID, Name: "chart.png", Title: "chart.png", Data: chart.Data, Channel: "C1", Thread: "1700000300.000100", Comment: "The *chart* &amp; the data"},
		{ID: ups[1].ID, Name: "data.csv", Title: "data.csv", Data: csv.Data, Channel: "C1", Thread: "1700000300.000100"},
	}
	if diff := cmp.Diff(want, ups); diff != "" {
		t.Errorf("shared files (-want +got):\n%s", diff)
	}
	if res.MessageID != ups[0].ID {
		t.Errorf("result id %q, want the first file's %q", res.MessageID, ups[0].ID)
	}
	if n := len(f.fake.Calls("chat.postMessage")); n != 0 {
		t.Errorf("%d posts, want none: the text is the first file's comment", n)
	}
}

func TestAFailedUploadIsRetriedWithoutTheText(t *testing.T) {
	f := newFixture(t, false)
	report := outbox.File{Name: "report.txt", Data: []byte("the whole report")}
	m := outbox.Message{ID: "m1", Target: thread, Text: longReply(), Files: []outbox.File{report}}
	var kept []outbox.Parts
	ctx := adapters.WithParts(context.Background(), func(p outbox.Parts) error {
		kept = append(kept, p)
		return nil
	})
	f.fake.Fail(slackfake.Upload, slackfake.Failure{Status: http.StatusBadGateway})
	res := f.a.Send(ctx, m)
	posts := len(f.fake.Calls("chat.postMessage"))
	if res.Outcome != adapters.Transient || posts < 3 || len(kept) != posts || kept[posts-1].Done != posts {
		t.Fatalf("Send with the upload failing = %+v after %d posts, kept %+v; want transient with every text part kept", res, posts, kept)
	}
	m.Parts = kept[len(kept)-1]
	if res := f.a.Send(ctx, m); res.Outcome != adapters.Accepted || res.MessageID != m.Parts.First {
		t.Fatalf("retry = %+v, want accepted with the first post's ts %q", res, m.Parts.First)
	}
	if n := len(f.fake.Calls("chat.postMessage")); n != posts {
		t.Errorf("the retry posted %d text parts again", n-posts)
	}
	ups := f.fake.Uploads()
	if len(ups) != 1 || !bytes.Equal(ups[0].Data, report.Data) || ups[0].Comment != "" {
		t.Errorf("shared %+v, want the report once without a comment", ups)
	}
}

func TestSendFileRefusals(t *testing.T) {
	tests := []struct {
		desc    string
		file    outbox.File
		script  func(*slackfake.Server)
		outcome adapters.Outcome
		reason  string
	}{
		{desc: "no bytes", file: outbox.File{Name: "gone.pdf", Blob: "b1"}, outcome: adapters.Permanent, reason: `"gone.pdf" has no bytes`},
		{desc: "too large for Slack", file: outbox.File{Name: "big.zip", Data: []byte("zip")}, outcome: adapters.Permanent, reason: "413",
			script: func(s *slackfake.Server) {
				s.Fail(slackfake.Upload, slackfake.Failure{Status: http.StatusRequestEntityTooLarge})
			}},
		{desc: "not in the channel", file: outbox.File{Name: "a.txt", Data: []byte("a")}, outcome: adapters.Permanent, reason: "not_in_channel",
			script: func(s *slackfake.Server) {
				s.Fail("files.completeUploadExternal", slackfake.Failure{Error: "not_in_channel"})
			}},
		{desc: "rate limited", file: outbox.File{Name: "a.txt", Data: []byte("a")}, outcome: adapters.RateLimited,
			script: func(s *slackfake.Server) {
				s.Fail("files.getUploadURLExternal", slackfake.Failure{Status: http.StatusTooManyRequests, RetryAfter: 3})
			}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, false)
			if tc.script != nil {
				tc.script(f.fake)
			}
			res := f.a.Send(context.Background(), outbox.Message{ID: "m1", Target: thread, Files: []outbox.File{tc.file}})
			if res.Outcome != tc.outcome || !strings.Contains(res.Reason, tc.reason) {
				t.Errorf("Send = %+v, want %v with %q", res, tc.outcome, tc.reason)
			}
			if ups := f.fake.Uploads(); len(ups) != 0 {
				t.Errorf("shared %+v, want nothing", ups)
			}
		})
	}
}
