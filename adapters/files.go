package adapters

import (
	"mime"
	"path"
	"strings"

	"github.com/heraldgw/herald/sessions"
)

// KindOf is what a file of type mimeType is to the agent when its
// platform says no more: an image, audio, or else a document. A voice
// note is the platform's to tell (Telegram's voice, Slack's and
// Discord's voice messages).
func KindOf(mimeType string) sessions.AttachmentKind {
	switch {
	case strings.HasPrefix(mimeType, "image/"):
		return sessions.AttachImage
	case strings.HasPrefix(mimeType, "audio/"):
		return sessions.AttachAudio
	}
	return sessions.AttachDocument
}

// MIMEOf guesses a file's type from its name's extension, without
// parameters; "" when the extension says nothing.
func MIMEOf(name string) string {
	t, _, err := mime.ParseMediaType(mime.TypeByExtension(strings.ToLower(path.Ext(name))))
	if err != nil {
		return ""
	}
	return t
}

// FileName is name, or for a file its platform gave no name,
// "<what>-<id>" with the extension of mimeType: "photo-42.jpg",
// "voice-7.ogg".
func FileName(name, what, id, mimeType string) string {
	if name = strings.TrimSpace(name); name != "" {
		return name
	}
	return what + "-" + id + extensions[mimeType]
}

// extensions are the usual extensions of the types platforms send
// without a name. mime.ExtensionsByType would do, but it lists every
// extension of a type in alphabetical order (".jfif" before ".jpg").
var extensions = map[string]string{
	"image/jpeg": ".jpg", "image/png": ".png", "image/gif": ".gif", "image/webp": ".webp",
	"audio/ogg": ".ogg", "audio/mpeg": ".mp3", "audio/mp4": ".m4a", "audio/webm": ".webm", "audio/x-wav": ".wav", "audio/wav": ".wav",
	"video/mp4": ".mp4", "video/quicktime": ".mov", "video/webm": ".webm",
	"application/pdf": ".pdf", "text/plain": ".txt", "application/zip": ".zip",
}
