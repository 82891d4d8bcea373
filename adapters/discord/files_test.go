package discord

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/discordfake"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

func TestFilesArriveAsAttachmentsAndFetch(t *testing.T) {
	t.Parallel()
	h := start(t, setup{})
	ann := discordfake.User{ID: ada, Username: "ada"}
	photo := h.fake.PutAttachment(dmChannel, discordfake.Attachment{Filename: "cat.png", ContentType: "image/png", Data: testkit.Bytes(4000, 1)})
	voice := h.fake.PutAttachment(dmChannel, discordfake.Attachment{Filename: "voice-message.ogg", ContentType: "audio/ogg", Voice: true, Data: testkit.Bytes(7000, 2)})
	doc := h.fake.PutAttachment(dmChannel, discordfake.Attachment{Filename: "spec.pdf", ContentType: "application/pdf", Data: testkit.Bytes(80_000, 3)})
	h.fake.SendMessage(discordfake.MessageEvent{ChannelID: dmChannel, Author: ann, Content: "look", Attachments: []discordfake.Attachment{photo}})
	h.fake.SendMessage(discordfake.MessageEvent{ChannelID: dmChannel, Author: ann, Flags: discordfake.MessageFlagVoice, Attachments: []discordfake.Attachment{voice}})
	h.fake.SendMessage(discordfake.MessageEvent{ChannelID: dmChannel, Author: ann, Attachments: []discordfake.Attachment{doc}})

	want := [][]sessions.Attachment{
		{{Name: "cat.png", MIME: "image/png", Size: 4000, Kind: sessions.AttachImage, URL: photo.URL, PlatformID: photo.ID}},
		{{Name: "voice-message.ogg", MIME: "audio/ogg", Size: 7000, Kind: sessions.AttachVoice, URL: voice.URL, PlatformID: voice.ID}},
		{{Name: "spec.pdf", MIME: "application/pdf", Size: 80_000, Kind: sessions.AttachDocument, URL: doc.URL, PlatformID: doc.ID}},
	}
	for i, file := range []discordfake.Attachment{photo, voice, doc} {
		in := h.inbox.next(t).in
		if diff := cmp.Diff(want[i], in.Attachments); diff != "" {
			t.Errorf("message %d's attachments (-want +got):\n%s", i+1, diff)
			continue
		}
		data, err := h.a.Fetch(context.Background(), in.Attachments[0], 1<<20)
		if err != nil || !bytes.Equal(data, file.Data) {
			t.Errorf("Fetch of %s = %d bytes, %v; want its %d bytes", file.Filename, len(data), err, len(file.Data))
		}
	}
}

func TestFetchRefusals(t *testing.T) {
	t.Parallel()
	counter := &testkit.ReadCounter{Prefix: "/attachments/"}
	h := start(t, setup{noRun: true, opts: func(o *Options) { o.HTTPClient = counter.Client() }})
	file := h.fake.PutAttachment(channel, discordfake.Attachment{Filename: "big.bin", ContentType: "application/octet-stream", Data: testkit.Bytes(64<<10, 4)})
	att := sessions.Attachment{Name: file.Filename, URL: file.URL, PlatformID: file.ID}
	const max = 16 << 10
	tests := []struct {
		desc      string
		fail      *discordfake.Failure
		att       sessions.Attachment
		max       int64
		code      errs.Code
		words     string
		downloads int
	}{
		{desc: "a size Discord told over the limit", att: sessions.Attachment{Name: "big.bin", URL: file.URL, Size: 64 << 10},
			max: max, code: errs.TooLarge, words: "big.bin is 64 KiB, over the limit of 16 KiB"},
		{desc: "a length the answer tells over the limit", att: att, max: max, code: errs.TooLarge, words: "big.bin", downloads: 1},
		{desc: "an expired URL", fail: &discordfake.Failure{Status: http.StatusNotFound, Message: "This content is no longer available."},
			att: att, max: 1 << 20, code: errs.NotFound, words: "Discord answered 404 Not Found: This content is no longer available.", downloads: 1},
		{desc: "a server error", fail: &discordfake.Failure{Status: http.StatusBadGateway, Message: "bad gateway"},
			att: att, max: 1 << 20, code: errs.Unavailable, words: "502", downloads: 1},
		{desc: "a URL off Discord", att: sessions.Attachment{Name: "x.png", URL: "https://example.com/x.png"},
			max: 1 << 20, code: errs.Invalid, words: "not on Discord's CDN"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if tc.fail != nil {
				h.fake.FailNext(discordfake.RouteAttachment, 1, *tc.fail)
			}
			before := len(h.fake.Calls(discordfake.RouteAttachment))
			counter.Reset()
			data, err := h.a.Fetch(context.Background(), tc.att, tc.max)
			if !errs.Is(err, tc.code) || data != nil || !strings.Contains(err.Error(), tc.words) {
				t.Errorf("Fetch = %d bytes, %v; want %s with %q", len(data), err, tc.code, tc.words)
			}
			if n := len(h.fake.Calls(discordfake.RouteAttachment)) - before; n != tc.downloads {
				t.Errorf("%d downloads, want %d", n, tc.downloads)
			}
			if n := counter.Read(); n > tc.max+1 {
				t.Errorf("%d bytes read, want at most %d", n, tc.max+1)
			}
		})
	}
}

func TestSendPhotoAndDocument(t *testing.T) {
	t.Parallel()
	h := start(t, setup{noRun: true})
	tg, _ := outbox.ParseTarget("discord:" + guild + ":" + channel + ":" + thread)
	chart := outbox.File{Name: "chart.png", MIME: "image/png", Photo: true, Data: testkit.Bytes(5000, 5)}
	csv := outbox.File{Name: "data.csv", MIME: "text/csv", Data: []byte("a,b\n1,2\n")}
	const asked = "170000000000000001"
	res := h.a.Send(context.Background(), outbox.Message{ID: "o1", Target: tg, Text: "The **chart**", ReplyTo: asked, Files: []outbox.File{chart, csv}})
	if res.Outcome != adapters.Accepted {
		t.Fatalf("Send = %+v", res)
	}
	msgs := h.fake.Messages()
	if len(msgs) != 2 {
		t.Fatalf("posted %d messages, want one per file", len(msgs))
	}
	want := []discordfake.Message{
		{ID: msgs[0].ID, ChannelID: thread, Content: "The **chart**", ReplyTo: asked,
			Files: []discordfake.File{{Name: "chart.png", ContentType: "image/png", Data: chart.Data}}},
		{ID: msgs[1].ID, ChannelID: thread, Files: []discordfake.File{{Name: "data.csv", ContentType: "text/csv", Data: csv.Data}}},
	}
	ignore := cmp.FilterPath(func(p cmp.Path) bool {
		n := p.Last().String()
		return n == ".At" || n == ".AllowedMentions"
	}, cmp.Ignore())
	if diff := cmp.Diff(want, msgs, ignore); diff != "" {
		t.Errorf("posted (-want +got):\n%s", diff)
	}
	if res.MessageID != msgs[0].ID {
		t.Errorf("result id %s, want the first message's %s", res.MessageID, msgs[0].ID)
	}
}

func TestAFailedFileIsRetriedWithoutTheText(t *testing.T) {
	t.Parallel()
	h := start(t, setup{noRun: true})
	tg, _ := outbox.ParseTarget("discord:" + guild + ":" + channel)
	text := strings.Repeat("word ", 300) + "\n\n" + strings.Repeat("more ", 300) // two parts
	m := outbox.Message{ID: "o1", Target: tg, Text: text, Files: []outbox.File{{Name: "log.txt", Data: []byte("the log")}}}
	var kept outbox.Parts
	ctx := adapters.WithParts(context.Background(), func(p outbox.Parts) error {
		kept = p
		return nil
	})
	h.fake.FailAt(discordfake.RouteMessage, 3, discordfake.ServerError())
	if res := h.a.Send(ctx, m); res.Outcome != adapters.Transient || kept.Done != 2 {
		t.Fatalf("Send with the file failing = %+v, kept %+v; want transient with both text parts kept", res, kept)
	}
	m.Parts = kept
	if res := h.a.Send(ctx, m); res.Outcome != adapters.Accepted || res.MessageID != kept.First {
		t.Fatalf("retry = %+v, want accepted with the first part's id %s", res, kept.First)
	}
	msgs := h.fake.Messages()
	if len(msgs) != 3 || !strings.HasPrefix(msgs[0].Content, "word") || !strings.HasPrefix(msgs[1].Content, "more") ||
		msgs[2].Content != "" || len(msgs[2].Files) != 1 || string(msgs[2].Files[0].Data) != "the log" {
		t.Fatalf("posted %+v, want the two text parts once, then the file", msgs)
	}
}

func TestSendFileRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc    string
		file    outbox.File
		fail    *discordfake.Failure
		outcome adapters.Outcome
		reason  string
	}{
		{desc: "no bytes", file: outbox.File{Name: "gone.pdf", Blob: "b1"}, outcome: adapters.Permanent, reason: `"gone.pdf" has no bytes`},
		{desc: "too large for Discord", file: outbox.File{Name: "big.zip", Data: []byte("zip")}, outcome: adapters.Permanent,
			fail:   &discordfake.Failure{Status: http.StatusRequestEntityTooLarge, Code: 40005, Message: "Request entity too large"},
			reason: "413: Request entity too large (code 40005)"},
		{desc: "rate limited", file: outbox.File{Name: "a.txt", Data: []byte("a")}, outcome: adapters.RateLimited,
			fail: ptr(discordfake.RateLimit(1500 * time.Millisecond)), reason: "rate limited"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			h := start(t, setup{noRun: true})
			if tc.fail != nil {
				h.fake.FailNext(discordfake.RouteMessage, 1, *tc.fail)
			}
			tg, _ := outbox.ParseTarget("discord:dm:" + dmChannel)
			res := h.a.Send(context.Background(), outbox.Message{ID: "o1", Target: tg, Files: []outbox.File{tc.file}})
			if res.Outcome != tc.outcome || !strings.Contains(res.Reason, tc.reason) {
				t.Errorf("Send = %+v, want %v with %q", res, tc.outcome, tc.reason)
			}
			if msgs := h.fake.Messages(); len(msgs) != 0 {
				t.Errorf("posted %+v, want nothing", msgs)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
