package media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// DefaultSTTBaseURL is OpenAI's API, the speech-to-text endpoint when
// stt.api_key is set and stt.base_url is not.
const DefaultSTTBaseURL = "https://api.openai.com/v1"

// DefaultSTTTimeout bounds one transcription.
const DefaultSTTTimeout = 2 * time.Minute

// TranscriberOptions configure NewTranscriber.
type TranscriberOptions struct {
	BaseURL string // DefaultSTTBaseURL when empty
	Model   string // whisper-1 when empty
	APIKey  string
	// MaxRetries are the tries after a failed one (a 5xx, a 429, a
	// dropped connection); 0 means one, a negative number none.
	MaxRetries int
	Timeout    time.Duration // DefaultSTTTimeout when 0
	HTTPClient *http.Client  // http.DefaultClient when nil
}

// Transcriber turns speech into text through an OpenAI-compatible
// /audio/transcriptions endpoint (OpenAI's, Groq's, a local whisper
// server), with openai-go.
type Transcriber struct {
	svc     openai.AudioTranscriptionService
	model   string
	timeout time.Duration
}

// NewTranscriber returns a transcriber for opts.
// Errors: Invalid (a base URL that is not http(s)).
func NewTranscriber(opts TranscriberOptions) (*Transcriber, error) {
	const op = "media.NewTranscriber"
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultSTTBaseURL
	}
	if u, err := url.Parse(opts.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL itself is left out: it may carry credentials.
		return nil, errs.E(op, errs.Invalid, "stt.base_url is not an http(s) URL")
	}
	retries := opts.MaxRetries
	switch {
	case retries == 0:
		retries = 1
	case retries < 0:
		retries = 0
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	t := &Transcriber{model: opts.Model, timeout: opts.Timeout}
	if t.model == "" {
		t.model = "whisper-1"
	}
	if t.timeout <= 0 {
		t.timeout = DefaultSTTTimeout
	}
	// Built as a service rather than through openai.NewClient, which
	// would also read OPENAI_* variables: herald's config says where
	// speech goes, and with which key.
	t.svc = openai.NewAudioTranscriptionService(
		option.WithBaseURL(opts.BaseURL),
		option.WithAPIKey(opts.APIKey),
		option.WithHTTPClient(opts.HTTPClient),
		option.WithMaxRetries(retries),
	)
	return t, nil
}

// Transcribe returns what is said in audio, a file named name of type
// mime. Errors: Unavailable, with a reason safe to show (the server's
// status, not its URL or its words).
func (t *Transcriber) Transcribe(ctx context.Context, name, mime string, audio []byte) (string, error) {
	const op = "media.Transcribe"
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	if mime == "" {
		mime = "application/octet-stream"
	}
	res, err := t.svc.New(ctx, openai.AudioTranscriptionNewParams{
		File:  openai.File(bytes.NewReader(audio), uploadName(name, mime), mime),
		Model: openai.AudioModel(t.model),
	})
	var apiErr *openai.Error
	switch {
	case errors.As(err, &apiErr):
		return "", errs.E(op, errs.Unavailable, "the speech-to-text server answered %d %s", apiErr.StatusCode, http.StatusText(apiErr.StatusCode))
	case err != nil && ctx.Err() != nil:
		return "", errs.E(op, errs.Unavailable, "the speech-to-text server took longer than %s", t.timeout)
	case err != nil:
		return "", errs.E(op, errs.Unavailable, "the speech-to-text server could not be reached")
	}
	return strings.TrimSpace(res.Text), nil
}

// sttExts are the file extensions OpenAI's endpoint reads a format
// from.
var sttExts = map[string]bool{".flac": true, ".mp3": true, ".mp4": true, ".mpeg": true, ".mpga": true, ".m4a": true, ".ogg": true, ".wav": true, ".webm": true}

// extOfAudio is the extension of an audio type the endpoint reads.
var extOfAudio = map[string]string{
	"audio/ogg": ".ogg", "audio/opus": ".ogg", "audio/mpeg": ".mp3", "audio/mp3": ".mp3",
	"audio/mp4": ".m4a", "audio/x-m4a": ".m4a", "audio/m4a": ".m4a", "audio/wav": ".wav",
	"audio/x-wav": ".wav", "audio/wave": ".wav", "audio/webm": ".webm", "audio/flac": ".flac",
	"audio/x-flac": ".flac", "video/mp4": ".mp4", "video/webm": ".webm",
}

// uploadName is the name a voice note is sent under: its own when its
// extension is one the endpoint reads, else one with the extension of
// its type (Telegram's voice notes are Opus in Ogg, often named .oga).
func uploadName(name, mime string) string {
	ext := strings.ToLower(filepath.Ext(name))
	if sttExts[ext] {
		return name
	}
	base := strings.TrimSuffix(name, filepath.Ext(name))
	if base == "" {
		base = "voice"
	}
	if e, ok := extOfAudio[strings.ToLower(strings.TrimSpace(strings.Split(mime, ";")[0]))]; ok {
		return base + e
	}
	if ext == ".oga" || ext == ".opus" {
		return base + ".ogg"
	}
	return name
}

// spokenCommand is the chat command a transcript says, as it would be
// typed, or "" when it says none: "/stop", "Slash stop." and "/goal ship
// the report." read as "/stop", "/stop" and "/goal ship the report.".
// Only a command the registry knows counts.
func spokenCommand(transcript string, commands *sessions.Commands) string {
	s := strings.TrimSpace(transcript)
	if len(s) > 6 && strings.EqualFold(s[:6], "slash ") {
		s = "/" + strings.TrimSpace(s[6:])
	}
	if !strings.HasPrefix(s, "/") {
		return ""
	}
	word, args, _ := strings.Cut(s, " ")
	word = strings.ToLower(strings.TrimRight(word, ".,!?;:"))
	args = strings.TrimSpace(strings.TrimLeft(args, ",;: "))
	if args == "" {
		s = word
	} else {
		s = word + " " + args
	}
	name, _, ok := sessions.ParseCommand(s)
	if !ok || commands == nil {
		return ""
	}
	if _, known := commands.Lookup(name); !known {
		return ""
	}
	return s
}

// spokenID is the message id of the command a voice note said, derived
// from the note's, so that a turn run again hands it on once.
func spokenID(messageID string) string { return fmt.Sprintf("%s:spoken", messageID) }
