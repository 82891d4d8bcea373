package media

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// Options configure NewRunner.
type Options struct {
	// Home is $HERALD_HOME: a turn's files are kept under its files/.
	Home string
	// Workspace is tools.workspace: documents are saved in its inbox/
	// (a turn's own TurnInput.Workspace first). Empty keeps them under
	// Home only.
	Workspace string
	// MaxBytes is attachments.max_bytes; 0 means
	// config.DefaultAttachmentMaxBytes.
	MaxBytes int64
	// ImageMode is agent.image_input_mode (config.ImagesAuto, …); empty
	// means auto.
	ImageMode string
	// Model is the main model's name, which auto asks llm.TakesImages
	// about.
	Model string
	// Vision describes pictures for a model that is not shown them (the
	// auxiliary.vision client); nil describes none.
	Vision llm.Client
	// STT transcribes voice notes and audio; nil when stt is not set up.
	STT *Transcriber
	// Files are the bytes kept in the store (Attachment.Blob).
	Files Store
	// Fetcher is the adapter of a platform that downloads its files,
	// nil for none.
	Fetcher func(platform string) adapters.Fetcher
	// Commands are the chat commands a voice note may say.
	Commands *sessions.Commands
	// Redact hides herald's secrets in a failure's words before the
	// model reads them; nil leaves them as they are.
	Redact func(string) string
	Clock  clock.Clock  // times the readying, for the log; nil means the wall clock
	Logger *slog.Logger // nil means slog.Default()
}

// Runner decorates what the turns run: before the turn's own run it
// readies the files of the turn's entry (sessions.Attachment) for the
// model. Pictures are shown (TurnInput.Images) or described, voice notes
// and audio transcribed into the person's words, other files saved
// where the agent works with a line saying where; what cannot be had is
// one plain line, and the turn goes on. The bytes are kept at
// FilePath, so a run of the same turn again (after a crash, or in
// another process on the same store) fetches nothing twice.
type Runner struct {
	next  sessions.TurnRunner
	opts  Options
	inbox adapters.Inbox
	log   *slog.Logger
}

var _ sessions.TurnRunner = (*Runner)(nil)

// NewRunner returns next decorated.
func NewRunner(next sessions.TurnRunner, opts Options) *Runner {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = config.DefaultAttachmentMaxBytes
	}
	if opts.Redact == nil {
		opts.Redact = func(s string) string { return s }
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	r := &Runner{next: next, opts: opts, log: opts.Logger}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r
}

// Routed hands r the router, which a command said in a voice note is
// delivered to as a message of its own. Called before turns run.
func (r *Runner) Routed(inbox adapters.Inbox) { r.inbox = inbox }

// Run readies the entry's files, then runs the turn on what they gave:
// the entry's text with their lines and transcripts, its pictures in
// Images, and none of the attachments it took. A voice note that says a
// chat command alone ends the turn without a model call once the
// command is delivered. The notices for the person go out with the
// turn's messages, and the store's copies of its files are forgotten in
// its commit (ReleaseFiles).
func (r *Runner) Run(ctx context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error) {
	if len(in.Entry.Attachments) == 0 {
		return r.next.Run(ctx, in)
	}
	return r.runWithFiles(ctx, in)
}

// runWithFiles is Run for an entry with files, on its own copy of the
// input, which it changes for the next runner. It is apart from Run so
// that a turn without files, waiting on the model below Run, keeps none
// of its locals on the goroutine's stack.
func (r *Runner) runWithFiles(ctx context.Context, given *sessions.TurnInput) (*sessions.TurnOutput, error) {
	in := *given
	started := r.opts.Clock.Now()
	t := r.prepare(ctx, in)
	r.log.Info("the message's files are ready", "conv", in.Entry.Conv, "entry", in.Entry.ID, "files", len(in.Entry.Attachments),
		"images", len(t.images), "transcripts", len(t.words), "lines", len(t.lines), "took_ms", r.opts.Clock.Now().Sub(started).Milliseconds())
	if t.command != "" && r.handOn(ctx, in, t) {
		return &sessions.TurnOutput{End: sessions.TurnDone, Writes: t.release()}, nil
	}
	in.Entry.Text = t.text(in.Entry.Text)
	in.Entry.Attachments = nil
	in.Images = append(slices.Clip(in.Images), t.images...)
	out, err := r.next.Run(ctx, &in)
	if n := t.notify(in); len(n) > 0 {
		out.Outbox = append(n, out.Outbox...)
	}
	out.Writes = append(slices.Clip(out.Writes), t.release()...)
	return out, err
}

// turnFiles is what a turn's files gave.
type turnFiles struct {
	words   []string     // transcripts: the person's words
	lines   []string     // for the model, one a file
	images  []chat.Image // shown to the model
	notices []string     // for the person
	blobs   []string     // the store's copies, forgotten with the commit
	command string       // a chat command the entry's voice note said
}

// text is the message the model reads: caption, the transcripts, then
// the lines.
func (t *turnFiles) text(caption string) string {
	parts := make([]string, 0, 1+len(t.words)+len(t.lines))
	if strings.TrimSpace(caption) != "" {
		parts = append(parts, caption)
	}
	parts = append(parts, t.words...)
	parts = append(parts, t.lines...)
	return strings.Join(parts, "\n")
}

// notify is the notices as messages to the turn's origin.
func (t *turnFiles) notify(in sessions.TurnInput) []outbox.Message {
	var out []outbox.Message
	for _, text := range t.notices {
		out = append(out, outbox.Message{Target: in.Origin, Text: text, ReplyTo: in.Entry.MessageID, Kind: sessions.KindNotice})
	}
	return out
}

// release is the write that forgets the store's copies of the files.
func (t *turnFiles) release() []sessions.Write {
	if len(t.blobs) == 0 {
		return nil
	}
	return []sessions.Write{ReleaseFiles{IDs: t.blobs}}
}

// file is one attachment of the turn as it is handled.
type file struct {
	att  sessions.Attachment
	name string // as the person and the model see it
	path string // where herald keeps it
}

// prepare readies each of the entry's files, in order.
func (r *Runner) prepare(ctx context.Context, in sessions.TurnInput) *turnFiles {
	e := in.Entry
	conv := cmp.Or(in.Conv, e.Conv)
	msgID := cmp.Or(e.MessageID, e.ID)
	platform := in.Origin.Platform
	if platform == "" {
		platform, _, _ = strings.Cut(conv, ":")
	}
	workspace := cmp.Or(in.Workspace, r.opts.Workspace)
	t := &turnFiles{}
	seen := map[string]bool{}
	for i, att := range e.Attachments {
		if att.Blob != "" {
			t.blobs = append(t.blobs, att.Blob)
		}
		name := nameOf(att)
		kept := name
		if seen[kept] {
			// Two files of one message under one name are kept apart.
			kept = fmt.Sprintf("%d-%s", i+1, name)
		}
		seen[kept] = true
		f := file{att: att, name: name, path: FilePath(r.opts.Home, conv, msgID, kept)}
		switch handling(att) {
		case sessions.AttachImage:
			r.see(ctx, t, f, platform, e.Text)
		case sessions.AttachVoice, sessions.AttachAudio:
			r.hear(ctx, t, f, platform)
		default:
			r.keep(ctx, t, f, platform, workspace)
		}
	}
	if len(e.Attachments) == 1 && len(t.words) == 1 && strings.TrimSpace(e.Text) == "" && e.Kind != sessions.KindSynthetic {
		t.command = spokenCommand(t.words[0], r.opts.Commands)
	}
	return t
}

// handOn delivers the command a voice note said as a message of its own,
// as if typed, under a message id derived from the note's: a turn run
// again delivers it once. It reports whether it did; when not, the
// model reads the words, with a line saying the command did not run.
func (r *Runner) handOn(ctx context.Context, in sessions.TurnInput, t *turnFiles) bool {
	e := in.Entry
	if r.inbox == nil {
		return false
	}
	cmd := sessions.Inbound{
		Conv: e.Conv, Sender: e.Sender, MessageID: spokenID(cmp.Or(e.MessageID, e.ID)), Text: t.command,
		Kind: e.Kind, Priority: e.Priority, Meta: e.Meta, User: e.User,
	}
	if err := r.inbox.Deliver(ctx, cmd); err != nil {
		r.log.Warn("a command said in a voice note could not be delivered; the model reads it", "conv", e.Conv, "entry", e.ID, "err", err)
		t.lines = append(t.lines, lineCommandFailed(t.command))
		return false
	}
	r.log.Info("a voice note said a command; delivered it as typed", "conv", e.Conv, "entry", e.ID, "message_id", cmd.MessageID)
	return true
}

// get returns f's bytes, or, when they cannot be had, adds the line (and
// for a file over the limit, the notice) that says so.
func (r *Runner) get(ctx context.Context, t *turnFiles, f file, platform string) ([]byte, bool) {
	data, err := r.bytesOf(ctx, platform, f.path, f.att)
	switch {
	case err == nil:
		return data, true
	case errs.Is(err, errs.TooLarge):
		t.lines = append(t.lines, lineTooLarge(f.name, f.att.Size, r.opts.MaxBytes))
		t.notices = append(t.notices, noticeTooLarge(f.name, f.att.Size, r.opts.MaxBytes))
	default:
		r.log.Warn("a file of the message could not be had", "name", f.name, "platform", platform, "err", err)
		t.lines = append(t.lines, lineNotFetched(f.name, err, r.reason(err)))
	}
	return nil, false
}

// reason is err's own words, with herald's secrets hidden and cut short,
// for a line the model reads.
func (r *Runner) reason(err error) string {
	s := r.opts.Redact(errs.Reason(err))
	if utf8.RuneCountInString(s) > 200 {
		s = string([]rune(s)[:200]) + "…"
	}
	return s
}

// handling is how a file is handled: a picture (its kind, or an image
// type sent as a file), a voice note or audio, or a document.
func handling(att sessions.Attachment) sessions.AttachmentKind {
	switch {
	case att.Kind == sessions.AttachImage || strings.HasPrefix(att.MIME, "image/"):
		return sessions.AttachImage
	case att.Kind == sessions.AttachVoice || att.Kind == sessions.AttachAudio:
		return att.Kind
	}
	return sessions.AttachDocument
}

// extOfType names a nameless file by its type.
var extOfType = map[string]string{
	mimeJPEG: ".jpg", mimePNG: ".png", mimeGIF: ".gif", mimeWebP: ".webp",
	"audio/ogg": ".ogg", "audio/mpeg": ".mp3", "audio/mp4": ".m4a", "audio/wav": ".wav",
	"application/pdf": ".pdf", "text/plain": ".txt",
}

// nameOf is an attachment's name, or one made of its kind and type.
func nameOf(att sessions.Attachment) string {
	if strings.TrimSpace(att.Name) != "" {
		return att.Name
	}
	kind := att.Kind
	if kind == "" {
		kind = "file"
	}
	return string(kind) + extOfType[att.MIME]
}
