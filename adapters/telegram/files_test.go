package telegram_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/telegram"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

func TestFilesArriveAsAttachmentsAndFetch(t *testing.T) {
	fake, a, in := polling(t, nil)
	photo := fake.PutFile(telegramfake.File{Data: testkit.Bytes(3000, 1)})
	voice := fake.PutFile(telegramfake.File{MIME: "audio/ogg", Data: testkit.Bytes(5000, 2)})
	doc := fake.PutFile(telegramfake.File{Name: "report.pdf", MIME: "application/pdf", Data: testkit.Bytes(70_000, 3)})
	u1 := fake.Queue(telegramfake.Incoming{Text: "what is this?", Photo: photo.ID})
	u2 := fake.Queue(telegramfake.Incoming{Voice: voice.ID})
	fake.Queue(telegramfake.Incoming{Document: doc.ID})

	got := in.Wait(t, 3)
	id := func(u telegramfake.Update) string { return strconv.Itoa(u.MessageID) }
	want := [][]sessions.Attachment{
		{{Name: "photo-" + id(u1) + ".jpg", MIME: "image/jpeg", Size: 3000, Kind: sessions.AttachImage, PlatformID: photo.ID}},
		{{Name: "voice-" + id(u2) + ".ogg", MIME: "audio/ogg", Size: 5000, Kind: sessions.AttachVoice, PlatformID: voice.ID}},
		{{Name: "report.pdf", MIME: "application/pdf", Size: 70_000, Kind: sessions.AttachDocument, PlatformID: doc.ID}},
	}
	for i, g := range got {
		if diff := cmp.Diff(want[i], g.Attachments); diff != "" {
			t.Errorf("message %d's attachments (-want +got):\n%s", i+1, diff)
		}
		raw, _ := json.Marshal(g)
		if strings.Contains(string(raw), fake.Token()) || strings.Contains(string(raw), "/file/bot") {
			t.Errorf("message %d carries the bot token or a file URL: %s", i+1, raw)
		}
	}
	if got[0].Text != "what is this?" {
		t.Errorf("the photo's caption came as %q", got[0].Text)
	}

	for i, f := range []telegramfake.File{photo, voice, doc} {
		data, err := a.Fetch(context.Background(), got[i].Attachments[0], 1<<20)
		if err != nil || !bytes.Equal(data, f.Data) {
			t.Errorf("Fetch of %s = %d bytes, %v; want its %d bytes", got[i].Attachments[0].Name, len(data), err, len(f.Data))
		}
	}
	if calls := fake.Calls("getFile"); len(calls) != 3 || calls[0].Params["file_id"] != photo.ID {
		t.Errorf("getFile calls %+v, want one per file, by the largest photo size's id first", calls)
	}
}

func TestFetchRefusesWhatIsTooLarge(t *testing.T) {
	fake := telegramfake.New(t, "")
	counter := &testkit.ReadCounter{Prefix: "/file/"}
	opts := options(fake)
	opts.HTTPClient = counter.Client()
	a := newAdapter(t, opts)
	const max = 16 << 10
	told := fake.PutFile(telegramfake.File{Data: testkit.Bytes(max+1, 4)})
	untold := fake.PutFile(telegramfake.File{Data: testkit.Bytes(256<<10, 5), Size: -1})
	huge := fake.PutFile(telegramfake.File{Data: testkit.Bytes(100, 6), Size: 30 << 20})

	tests := []struct {
		desc      string
		att       sessions.Attachment
		downloads int // downloads the fake saw
	}{
		{desc: "the size the message told", att: sessions.Attachment{Name: "a.bin", PlatformID: told.ID, Size: told.Size + max + 1}},
		{desc: "the size getFile tells", att: sessions.Attachment{Name: "b.bin", PlatformID: told.ID}},
		{desc: "no size told: the read stops", att: sessions.Attachment{Name: "c.bin", PlatformID: untold.ID}, downloads: 1},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			before := len(fake.Calls(telegramfake.Download))
			counter.Reset()
			data, err := a.Fetch(context.Background(), tc.att, max)
			if !errs.Is(err, errs.TooLarge) || data != nil || !strings.Contains(err.Error(), tc.att.Name) {
				t.Fatalf("Fetch = %d bytes, %v; want TooLarge naming the file", len(data), err)
			}
			if n := len(fake.Calls(telegramfake.Download)) - before; n != tc.downloads {
				t.Errorf("%d downloads, want %d", n, tc.downloads)
			}
			if n := counter.Read(); n > max+1 {
				t.Errorf("%d bytes read, want at most max+1 = %d", n, max+1)
			}
		})
	}
	// Telegram itself serves a bot files up to 20 MB.
	_, err := a.Fetch(context.Background(), sessions.Attachment{Name: "big.mov", PlatformID: huge.ID}, 64<<20)
	if !errs.Is(err, errs.TooLarge) || !strings.Contains(err.Error(), "20 MB") {
		t.Errorf("Fetch of a 30 MB file = %v, want TooLarge for Telegram's 20 MB", err)
	}
}

func TestFetchFailuresSayWhatHappened(t *testing.T) {
	fake, a := sender(t)
	f := fake.PutFile(telegramfake.File{Name: "x.txt", Data: []byte("hello")})
	att := sessions.Attachment{Name: "x.txt", PlatformID: f.ID}
	tests := []struct {
		desc   string
		script func()
		att    sessions.Attachment
		code   errs.Code
		words  string
	}{
		{desc: "a server error", script: func() { fake.Fail(telegramfake.Download, 1, telegramfake.ServerError) },
			att: att, code: errs.Unavailable, words: "Telegram answered 500 Internal Server Error: Internal Server Error"},
		{desc: "a proxy's page", script: func() { fake.Fail(telegramfake.Download, 1, telegramfake.BadGateway) },
			att: att, code: errs.Unavailable, words: "502 Bad Gateway"},
		{desc: "the file is gone", script: func() {
			fake.Fail(telegramfake.Download, 1, telegramfake.Failure{Status: 404, Description: "Not Found"})
		},
			att: att, code: errs.NotFound, words: "Telegram answered 404 Not Found"},
		{desc: "a file id Telegram does not know", att: sessions.Attachment{Name: "y.txt", PlatformID: "no-such-file"},
			code: errs.NotFound, words: "invalid file_id"},
		{desc: "getFile fails", script: func() { fake.Fail("getFile", 1, telegramfake.ServerError) },
			att: att, code: errs.Unavailable, words: "x.txt"},
		{desc: "an attachment of another adapter", att: sessions.Attachment{Name: "z.txt", URL: "https://example.com/z.txt"},
			code: errs.Invalid, words: "no Telegram file id"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if tc.script != nil {
				tc.script()
			}
			_, err := a.Fetch(context.Background(), tc.att, 1<<20)
			if !errs.Is(err, tc.code) || !strings.Contains(err.Error(), tc.words) {
				t.Errorf("Fetch = %v, want %s with %q", err, tc.code, tc.words)
			}
			if err != nil && strings.Contains(err.Error(), fake.Token()) {
				t.Errorf("the error shows the bot token: %v", err)
			}
		})
	}
	if data, err := a.Fetch(context.Background(), att, 1<<20); err != nil || string(data) != "hello" {
		t.Errorf("Fetch after the failures = %q, %v", data, err)
	}
}

// fileMessage is a message to a forum topic that sends files.
func fileMessage(text string, files ...outbox.File) outbox.Message {
	return outbox.Message{ID: "o1", Target: outbox.Target{Platform: telegram.Platform, Chat: "-100200", Thread: "7"},
		Text: text, ReplyTo: "-100200:5", Kind: "reply", Files: files}
}

func TestSendPhotoAndDocument(t *testing.T) {
	fake, a := sender(t)
	photo := outbox.File{Name: "chart.png", MIME: "image/png", Photo: true, Data: testkit.Bytes(4000, 7)}
	doc := outbox.File{Name: "data.csv", MIME: "text/csv", Data: []byte("a,b\n1,2\n")}
	res := a.Send(context.Background(), fileMessage("Here is **the chart** & the data", photo, doc))
	if res.Outcome != adapters.Accepted {
		t.Fatalf("Send: %+v", res)
	}
	sent := fake.Sent(-100200)
	if len(sent) != 2 {
		t.Fatalf("sent %d messages, want the photo and the document", len(sent))
	}
	p, d := sent[0], sent[1]
	if p.Media != "photo" || !bytes.Equal(p.Data, photo.Data) || p.FileName != "chart.png" ||
		p.Text != "Here is <b>the chart</b> &amp; the data" || p.ParseMode != "HTML" || p.Thread != 7 || p.ReplyTo != 5 {
		t.Errorf("photo sent as %+v", p)
	}
	if d.Media != "document" || !bytes.Equal(d.Data, doc.Data) || d.FileName != "data.csv" || d.Text != "" || d.Thread != 7 || d.ReplyTo != 0 {
		t.Errorf("document sent as %+v", d)
	}
	if res.MessageID != strconv.Itoa(p.ID) {
		t.Errorf("result id %q, want the photo's %d", res.MessageID, p.ID)
	}
	if n := len(fake.Calls("sendMessage")); n != 0 {
		t.Errorf("%d sendMessage calls, want none: the text is the caption", n)
	}
}

func TestALongTextGoesBeforeItsFile(t *testing.T) {
	fake, a := sender(t)
	text := strings.Repeat("A sentence of the report. ", 60) // over 1,024
	doc := outbox.File{Name: "report.txt", Data: []byte("the report")}
	var kept []outbox.Parts
	ctx := adapters.WithParts(context.Background(), func(p outbox.Parts) error {
		kept = append(kept, p)
		return nil
	})
	fake.Fail("sendDocument", 1, telegramfake.ServerError)
	m := fileMessage(text, doc)
	res := a.Send(ctx, m)
	if res.Outcome != adapters.Transient || !strings.Contains(res.Reason, "part 2 of 2") {
		t.Fatalf("Send with the document failing = %+v, want transient on part 2", res)
	}
	if len(kept) != 1 || kept[0].Done != 1 {
		t.Fatalf("parts kept %+v, want the text part done", kept)
	}
	m.Parts = kept[0]
	if res := a.Send(ctx, m); res.Outcome != adapters.Accepted || res.MessageID != kept[0].First {
		t.Fatalf("retry = %+v, want accepted with the text's id %q", res, kept[0].First)
	}
	sent := fake.Sent(-100200)
	if len(sent) != 2 || sent[0].Media != "" || sent[0].ReplyTo != 5 || sent[1].Media != "document" || sent[1].Text != "" {
		t.Fatalf("sent %+v, want the text replying, then the document without a caption", sent)
	}
	if n := len(fake.Calls("sendMessage")); n != 1 {
		t.Errorf("the text was sent %d times, want once", n)
	}
}

func TestSendFileRefusals(t *testing.T) {
	tests := []struct {
		desc    string
		file    outbox.File
		script  func(*telegramfake.Server)
		outcome adapters.Outcome
		reason  string
		media   string // what was sent in the end, if anything
	}{
		{desc: "no bytes", file: outbox.File{Name: "gone.pdf", Blob: "b1"}, outcome: adapters.Permanent, reason: `"gone.pdf" has no bytes`},
		{desc: "too large for Telegram", outcome: adapters.Permanent, reason: "Request Entity Too Large",
			file: outbox.File{Name: "big.zip", Data: []byte("zip")},
			script: func(f *telegramfake.Server) {
				f.Fail("sendDocument", 1, telegramfake.Failure{Status: 413, Description: "Request Entity Too Large"})
			}},
		{desc: "rate limited", outcome: adapters.RateLimited, reason: "retry after 3",
			file:   outbox.File{Name: "a.txt", Data: []byte("a")},
			script: func(f *telegramfake.Server) { f.Fail("sendDocument", 1, telegramfake.TooManyRequests(3)) }},
		{desc: "a photo Telegram cannot take as one goes as a document", outcome: adapters.Accepted, media: "document",
			file: outbox.File{Name: "panorama.jpg", Photo: true, Data: []byte("jpeg")},
			script: func(f *telegramfake.Server) {
				f.Fail("sendPhoto", 1, telegramfake.Failure{Status: 400, Description: "Bad Request: PHOTO_INVALID_DIMENSIONS"})
			}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			fake, a := sender(t)
			if tc.script != nil {
				tc.script(fake)
			}
			res := a.Send(context.Background(), fileMessage("", tc.file))
			if res.Outcome != tc.outcome || !strings.Contains(res.Reason, tc.reason) {
				t.Errorf("Send = %+v, want %v with %q", res, tc.outcome, tc.reason)
			}
			sent := fake.Sent(-100200)
			if tc.media == "" && len(sent) != 0 || tc.media != "" && (len(sent) != 1 || sent[0].Media != tc.media) {
				t.Errorf("sent %+v, want %q", sent, tc.media)
			}
		})
	}
}

// A reply shown in progress whose first part is a file is not edited
// into the file: the file is posted and the message in progress deleted.
func TestAStreamedReplyWithAPhotoReplacesTheMessageShown(t *testing.T) {
	fake, a := sender(t)
	m := fileMessage("Here it is", outbox.File{Name: "chart.png", Photo: true, Data: []byte("png")})
	shown, err := a.StreamText(context.Background(), m.Target, m.ReplyTo, "", "Here it")
	if err != nil {
		t.Fatalf("StreamText: %v", err)
	}
	res := a.SendStreamed(context.Background(), m, shown)
	if res.Outcome != adapters.Accepted {
		t.Fatalf("SendStreamed = %+v", res)
	}
	sent := fake.Sent(-100200)
	if len(sent) != 1 || sent[0].Media != "photo" || sent[0].Text != "Here it is" || strconv.Itoa(sent[0].ID) == shown {
		t.Errorf("standing now %+v, want only the photo with its caption", sent)
	}
	if n := len(fake.Calls("editMessageText")); n != 0 {
		t.Errorf("%d edits, want none", n)
	}
}
