package media_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

func photoAttachment() sessions.Attachment {
	return sessions.Attachment{Name: "cat.jpg", MIME: "image/jpeg", Kind: sessions.AttachImage, PlatformID: "AgAD-photo"}
}

// A photo shown to the model: downloaded once, kept on the disk, in the
// turn's Images, gone from its attachments; the caption is the text.
func TestPhotoIsShownToAModelThatSeesImages(t *testing.T) {
	h := newHarness(t)
	jpg := encodeJPEG(t, photo(640, 480), 85)
	f := serves(jpg)
	r := h.runner(media.Options{ImageMode: config.ImagesNative}, f)
	got, out := h.run(r, entry("what is this?", photoAttachment()))
	if len(got.Images) != 1 {
		t.Fatalf("Images = %+v, want the photo", got.Images)
	}
	img := got.Images[0]
	if img.Path != h.kept("cat.jpg") || img.Name != "cat.jpg" || img.MIME != "image/jpeg" || img.Data != nil {
		t.Errorf("image = %+v, want cat.jpg at %s, image/jpeg, no bytes", img, h.kept("cat.jpg"))
	}
	if disk, err := os.ReadFile(img.Path); err != nil || !bytes.Equal(disk, jpg) {
		t.Errorf("the kept file has %d bytes (%v), want the %d downloaded", len(disk), err, len(jpg))
	}
	if got.Entry.Text != "what is this?" || len(got.Entry.Attachments) != 0 {
		t.Errorf("entry text %q with %d attachments, want the caption alone and none", got.Entry.Text, len(got.Entry.Attachments))
	}
	if len(notices(out)) != 0 || len(out.Writes) != 0 {
		t.Errorf("notices %v, writes %v; want none", notices(out), out.Writes)
	}

	// auto on a model that takes images shows it too.
	r = h.runner(media.Options{ImageMode: config.ImagesAuto, Model: "gpt-4o"}, f)
	if got, _ := h.run(r, entry("", photoAttachment())); len(got.Images) != 1 {
		t.Errorf("auto on gpt-4o: Images = %+v, want the photo", got.Images)
	}
	if n := f.count(); n != 1 {
		t.Errorf("the photo was fetched %d times, want once: the second run finds it on the disk", n)
	}
}

// A photo for a model that does not see images is described by the
// vision model, once: the description is kept for a run again.
func TestPhotoIsDescribedForAModelThatDoesNot(t *testing.T) {
	h := newHarness(t)
	ms := testkit.NewModelServer(t)
	ms.Script(testkit.Reply("A grey cat asleep on a red sofa."))
	vision, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: ms.URL(), Model: "vision-test", Timeout: 10 * time.Second, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	r := h.runner(media.Options{ImageMode: config.ImagesAuto, Model: "text-only-model", Vision: vision}, serves(encodeJPEG(t, photo(640, 480), 85)))
	for range 2 {
		got, _ := h.run(r, entry("is it asleep?", photoAttachment()))
		if len(got.Images) != 0 {
			t.Errorf("Images = %+v, want none: the model is told in words", got.Images)
		}
		want := "is it asleep?\n[cat.jpg, a picture, as a vision model described it: A grey cat asleep on a red sofa.]"
		if got.Entry.Text != want {
			t.Errorf("text = %q\nwant %q", got.Entry.Text, want)
		}
	}
	reqs := ms.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the vision model had %d requests, want one (a run again reads the kept description)", len(reqs))
	}
	if p := reqs[0].LastUser(); !strings.Contains(p, "Describe this picture") || !strings.Contains(p, "is it asleep?") {
		t.Errorf("the vision request asked %q, want the instruction and the caption", p)
	}
}

// Damaged pictures and pictures of a type no model takes are one line
// each; the turn goes on.
func TestBadPicturesAreOneLineEach(t *testing.T) {
	h := newHarness(t)
	jpg := encodeJPEG(t, photo(640, 480), 85)
	f := &fetcher{fetch: func(att sessions.Attachment, _ int64) ([]byte, error) {
		if att.Name == "broken.jpg" {
			return jpg[:len(jpg)/3], nil
		}
		return []byte("BM\x36\x00\x00\x00 a bitmap, not taken"), nil
	}}
	r := h.runner(media.Options{ImageMode: config.ImagesNative}, f)
	got, _ := h.run(r, entry("",
		sessions.Attachment{Name: "broken.jpg", MIME: "image/jpeg", Kind: sessions.AttachImage, PlatformID: "a"},
		sessions.Attachment{Name: "old.bmp", MIME: "image/bmp", Kind: sessions.AttachDocument, PlatformID: "b"},
	))
	want := "[broken.jpg could not be read as a picture: it is damaged or not a picture]\n" +
		"[old.bmp is a picture of a type the model cannot be shown (image/bmp; JPEG, PNG, GIF and WebP are)]"
	if got.Entry.Text != want || len(got.Images) != 0 || len(got.Entry.Attachments) != 0 {
		t.Errorf("text = %q, %d images, %d attachments\nwant %q and none", got.Entry.Text, len(got.Images), len(got.Entry.Attachments), want)
	}
}

// A voice note is transcribed through the speech-to-text endpoint: one
// multipart request with the model and the file, the transcript the
// person's words after a caption, kept for a run again.
func TestVoiceNoteIsTranscribedIntoThePersonsWords(t *testing.T) {
	h := newHarness(t)
	stt := newSTTServer(t, "remind me to water the plants")
	audio := []byte("OggS\x00 pretend opus")
	r := h.runner(media.Options{STT: stt.transcriber(t, "sk-stt-test")}, serves(audio))
	voice := sessions.Attachment{Name: "voice.oga", MIME: "audio/ogg", Kind: sessions.AttachVoice, PlatformID: "AwAD-voice"}

	got, out := h.run(r, entry("", voice))
	if got.Entry.Text != "remind me to water the plants" {
		t.Errorf("text = %q, want the transcript", got.Entry.Text)
	}
	if len(notices(out)) != 0 {
		t.Errorf("notices = %v, want none", notices(out))
	}
	got, _ = h.run(r, entry("note:", voice))
	if got.Entry.Text != "note:\nremind me to water the plants" {
		t.Errorf("with a caption, text = %q, want the caption, then the transcript", got.Entry.Text)
	}

	reqs := stt.requests()
	if len(reqs) != 1 {
		t.Fatalf("the endpoint had %d requests, want one (the transcript is kept)", len(reqs))
	}
	q := reqs[0]
	if q.Path != "/v1/audio/transcriptions" || q.Model != "whisper-test" || q.Auth != "Bearer sk-stt-test" {
		t.Errorf("request = %s, model %q, auth %q", q.Path, q.Model, q.Auth)
	}
	if q.Filename != "voice.ogg" || q.FileType != "audio/ogg" || !bytes.Equal(q.File, audio) {
		t.Errorf("file part = %q (%s), %d bytes; want voice.ogg, audio/ogg, the note's %d", q.Filename, q.FileType, len(q.File), len(audio))
	}
	if b, err := os.ReadFile(h.kept("voice.oga") + ".transcript.txt"); err != nil || string(b) != "remind me to water the plants" {
		t.Errorf("the kept transcript = %q (%v)", b, err)
	}
}

// Without speech-to-text the model is told a voice note came unheard,
// and the person how to set it up.
func TestVoiceNoteWithoutSTTTellsBoth(t *testing.T) {
	h := newHarness(t)
	f := serves([]byte("OggS"))
	r := h.runner(media.Options{}, f)
	got, out := h.run(r, entry("", sessions.Attachment{Name: "voice.oga", Kind: sessions.AttachVoice, PlatformID: "v"}))
	if want := "[a voice note came (voice.oga), but it could not be heard: speech-to-text is not set up]"; got.Entry.Text != want {
		t.Errorf("text = %q, want %q", got.Entry.Text, want)
	}
	n := oneNoticeSaying(t, out, "stt.api_key", "HERALD_STT_API_KEY", "stt.base_url", "whisper")
	if n[0].Target != (outbox.Target{Platform: "telegram", Chat: "42"}) || n[0].ReplyTo != msgID {
		t.Errorf("the notice goes to %v replying to %q, want the origin and the note", n[0].Target, n[0].ReplyTo)
	}
	if out.Outbox[len(out.Outbox)-1].Text != "ok" {
		t.Errorf("the turn's reply is not last: %+v", out.Outbox)
	}
	if f.count() != 0 {
		t.Errorf("a note nobody can hear was downloaded %d times", f.count())
	}
}

// An endpoint that fails is one line; the turn goes on.
func TestVoiceNoteSTTFailureIsOneLine(t *testing.T) {
	h := newHarness(t)
	stt := newSTTServer(t, "")
	stt.fail(500)
	r := h.runner(media.Options{STT: stt.transcriber(t, "k")}, serves([]byte("OggS")))
	got, out := h.run(r, entry("", sessions.Attachment{Name: "voice.oga", MIME: "audio/ogg", Kind: sessions.AttachVoice, PlatformID: "v"}))
	want := "[a voice note came (voice.oga), but it could not be transcribed: the speech-to-text server answered 500 Internal Server Error]"
	if got.Entry.Text != want || len(notices(out)) != 0 {
		t.Errorf("text = %q, notices %v\nwant %q and none", got.Entry.Text, notices(out), want)
	}
	if _, err := os.Stat(h.kept("voice.oga") + ".transcript.txt"); err == nil {
		t.Error("a failed transcription left a transcript behind")
	}
}

// A voice note that says a chat command alone is that command, as typed:
// delivered through the router as a message of its own, once however
// often the turn runs, and the turn ends without a model call.
func TestSpokenCommandIsDeliveredOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, db backend) {
		h := newHarness(t)
		stt := newSTTServer(t, "Slash status.")
		commands := sessions.DefaultCommands()
		router, err := sessions.NewRouter(sessions.RouterOptions{Store: db.Sessions(), Outbox: db.Outbox(), Commands: commands})
		if err != nil {
			t.Fatal(err)
		}
		r := h.runner(media.Options{STT: stt.transcriber(t, "k"), Commands: commands}, serves([]byte("OggS")))
		r.Routed(router)
		in := entry("", sessions.Attachment{Name: "voice.oga", MIME: "audio/ogg", Kind: sessions.AttachVoice, PlatformID: "v"})
		for range 2 {
			out, err := r.Run(context.Background(), &in)
			if err != nil {
				t.Fatal(err)
			}
			if out.End != sessions.TurnDone || len(out.History) != 0 || len(out.Outbox) != 0 || out.ModelCalls != 0 {
				t.Errorf("output = %+v, want a done turn with no history and no messages", out)
			}
		}
		if n := len(h.inner.runs()); n != 0 {
			t.Errorf("the agent ran %d times, want none", n)
		}
		pending, err := db.Outbox().Pending(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) != 1 || pending[0].Kind != sessions.KindCommand || pending[0].ReplyTo != msgID+":spoken" {
			t.Fatalf("outbox = %+v, want /status answered once, to the spoken command", pending)
		}
		if !strings.Contains(pending[0].Text, "Busy input mode") {
			t.Errorf("the answer %q is not /status's", pending[0].Text)
		}

		// Words that are no command, or a command with a caption, go to
		// the model as words.
		stt2 := newSTTServer(t, "slash dance please")
		r = h.runner(media.Options{STT: stt2.transcriber(t, "k"), Commands: commands}, serves([]byte("OggS")))
		r.Routed(router)
		in.Entry.MessageID = "18"
		got, _ := h.run(r, in)
		if got.Entry.Text != "slash dance please" {
			t.Errorf("an unknown command reached the model as %q, want the words", got.Entry.Text)
		}
	})
}

// A document is saved in the workspace's inbox; a small text file's
// contents come inline, a binary one's do not. Without a workspace it
// stays where herald keeps it.
func TestDocumentsAreSavedWhereTheAgentWorks(t *testing.T) {
	h := newHarness(t)
	ws := t.TempDir()
	pdf := append([]byte("%PDF-1.7\n"), bytes.Repeat([]byte{0, 1, 2}, 100)...)
	f := &fetcher{fetch: func(att sessions.Attachment, _ int64) ([]byte, error) {
		if att.Name == "notes.txt" {
			return []byte("buy milk\ncall Anna\n"), nil
		}
		return pdf, nil
	}}
	r := h.runner(media.Options{Workspace: ws}, f)
	got, _ := h.run(r, entry("see these",
		sessions.Attachment{Name: "notes.txt", MIME: "text/plain", PlatformID: "d1"},
		sessions.Attachment{Name: "report.pdf", MIME: "application/pdf", Kind: sessions.AttachDocument, PlatformID: "d2"},
	))
	notes, report := filepath.Join(ws, "inbox", "17-notes.txt"), filepath.Join(ws, "inbox", "17-report.pdf")
	want := "see these\n" +
		"[file notes.txt (text/plain, 19 bytes) saved at " + notes + "; its text follows]\nbuy milk\ncall Anna\n[end of notes.txt]\n" +
		"[file report.pdf (application/pdf, 309 bytes) saved at " + report + "]"
	if got.Entry.Text != want {
		t.Errorf("text =\n%s\nwant\n%s", got.Entry.Text, want)
	}
	if b, err := os.ReadFile(report); err != nil || !bytes.Equal(b, pdf) {
		t.Errorf("the workspace's copy has %d bytes (%v), want the document's", len(b), err)
	}

	// No workspace: the kept file is the path.
	h2 := newHarness(t)
	r = h2.runner(media.Options{}, f)
	got, _ = h2.run(r, entry("", sessions.Attachment{Name: "report.pdf", MIME: "application/pdf", PlatformID: "d2"}))
	if !strings.Contains(got.Entry.Text, "saved at "+h2.kept("report.pdf")+"]") {
		t.Errorf("without a workspace, text = %q, want the kept path %s", got.Entry.Text, h2.kept("report.pdf"))
	}
}

// A file over attachments.max_bytes is not downloaded: the model reads
// one line, and the person is told the name, the size, the limit and
// its key. A platform that finds it too large only as it downloads says
// the same, without the size.
func TestTooLargeFileIsRefusedWithANotice(t *testing.T) {
	h := newHarness(t)
	f := &fetcher{fetch: func(sessions.Attachment, int64) ([]byte, error) {
		return nil, errs.E("test.Fetch", errs.TooLarge, "over the limit")
	}}
	r := h.runner(media.Options{MaxBytes: 1 << 20}, f)
	got, out := h.run(r, entry("", sessions.Attachment{Name: "movie.mp4", MIME: "video/mp4", Size: 3 << 20, PlatformID: "big"}))
	if want := "[movie.mp4 (3.0 MiB) was not downloaded: it is over the 1.0 MiB limit on files (attachments.max_bytes)]"; got.Entry.Text != want {
		t.Errorf("text = %q, want %q", got.Entry.Text, want)
	}
	oneNoticeSaying(t, out, "movie.mp4", "3.0 MiB", "1.0 MiB", "attachments.max_bytes")
	if f.count() != 0 {
		t.Errorf("a file known too large was fetched %d times", f.count())
	}

	got, out = h.run(r, entry("", sessions.Attachment{Name: "movie2.mp4", PlatformID: "big"}))
	if want := "[movie2.mp4 was not downloaded: it is over the 1.0 MiB limit on files (attachments.max_bytes)]"; got.Entry.Text != want || len(notices(out)) != 1 {
		t.Errorf("text = %q, %d notices; want %q and a notice", got.Entry.Text, len(notices(out)), want)
	}
}

// A download that fails is one line; the turn goes on, and a file not
// kept is fetched again the next run.
func TestDownloadFailureIsOneLine(t *testing.T) {
	h := newHarness(t)
	jpg := encodeJPEG(t, photo(320, 240), 85)
	fail := true
	f := &fetcher{fetch: func(sessions.Attachment, int64) ([]byte, error) {
		if fail {
			return nil, errs.E("test.Fetch", errs.Unavailable, "HTTP 502 from the platform")
		}
		return jpg, nil
	}}
	r := h.runner(media.Options{ImageMode: config.ImagesNative}, f)
	got, out := h.run(r, entry("look", photoAttachment()))
	want := "look\n[cat.jpg came with the message but could not be downloaded: it could not be reached (HTTP 502 from the platform); the person may send it again]"
	if got.Entry.Text != want || len(got.Images) != 0 || len(notices(out)) != 0 {
		t.Errorf("text = %q, %d images, %d notices\nwant %q, none, none", got.Entry.Text, len(got.Images), len(notices(out)), want)
	}
	fail = false
	if got, _ := h.run(r, entry("look", photoAttachment())); len(got.Images) != 1 {
		t.Errorf("the run after a failure has %d images, want the photo", len(got.Images))
	}

	// A platform no adapter here serves is a line too.
	got, _ = h.run(h.runner(media.Options{}, nil), entry("", sessions.Attachment{Name: "x.pdf", PlatformID: "p"}))
	if !strings.Contains(got.Entry.Text, "x.pdf came with the message but could not be downloaded") {
		t.Errorf("with no fetcher, text = %q", got.Entry.Text)
	}
}

// A turn run again, here or by another gateway on the same home, finds
// its files on the disk and fetches nothing.
func TestRunAgainFindsTheFileOnTheDisk(t *testing.T) {
	h := newHarness(t)
	jpg := encodeJPEG(t, photo(320, 240), 85)
	first := serves(jpg)
	h.run(h.runner(media.Options{ImageMode: config.ImagesNative}, first), entry("", photoAttachment()))
	gone := &fetcher{fetch: func(sessions.Attachment, int64) ([]byte, error) {
		return nil, errs.E("test.Fetch", errs.NotFound, "gone")
	}}
	got, _ := h.run(h.runner(media.Options{ImageMode: config.ImagesNative}, gone), entry("", photoAttachment()))
	if len(got.Images) != 1 || gone.count() != 0 || first.count() != 1 {
		t.Errorf("run again: %d images, fetched %d then %d times; want the photo, fetched once in all", len(got.Images), first.count(), gone.count())
	}
}

// An upload kept in the store (Blob) is read from there, kept on the
// disk, and forgotten with the turn's commit (ReleaseFiles).
func TestBlobIsReadFromTheStoreAndReleasedWithTheCommit(t *testing.T) {
	eachStore(t, func(t *testing.T, db backend) {
		h := newHarness(t)
		ctx := context.Background()
		jpg := encodeJPEG(t, photo(320, 240), 85)
		if err := db.Files().PutFile(ctx, "up-1", jpg); err != nil {
			t.Fatal(err)
		}
		r := h.runner(media.Options{ImageMode: config.ImagesNative, Files: db.Files()}, nil)
		att := sessions.Attachment{Name: "cat.jpg", MIME: "image/jpeg", Kind: sessions.AttachImage, Blob: "up-1"}
		got, out := h.run(r, entry("", att))
		if len(got.Images) != 1 {
			t.Fatalf("Images = %+v, want the upload", got.Images)
		}
		if disk, err := os.ReadFile(h.kept("cat.jpg")); err != nil || !bytes.Equal(disk, jpg) {
			t.Errorf("the kept file has %d bytes (%v)", len(disk), err)
		}
		if len(out.Writes) != 1 {
			t.Fatalf("writes = %+v, want one release", out.Writes)
		}
		rel, ok := out.Writes[0].(media.ReleaseFiles)
		if !ok || len(rel.IDs) != 1 || rel.IDs[0] != "up-1" {
			t.Errorf("write = %#v, want ReleaseFiles{up-1}", out.Writes[0])
		}
	})
}
