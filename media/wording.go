package media

import (
	"fmt"
	"strings"

	"github.com/heraldgw/herald/internal/errs"
)

// What herald says of a turn's files: the lines the model reads in the
// user's message, one a file it could not show as it is, and the notices
// a person is sent. Every such text is made here, from the facts the
// logic hands over.

// lineTooLarge tells the model a file was not downloaded for its size;
// size is 0 when the platform did not say it.
func lineTooLarge(name string, size, limit int64) string {
	if size > 0 {
		return fmt.Sprintf("[%s (%s) was not downloaded: it is over the %s limit on files (attachments.max_bytes)]", name, humanSize(size), humanSize(limit))
	}
	return fmt.Sprintf("[%s was not downloaded: it is over the %s limit on files (attachments.max_bytes)]", name, humanSize(limit))
}

// noticeTooLarge tells the person the same.
func noticeTooLarge(name string, size, limit int64) string {
	if size > 0 {
		return fmt.Sprintf("I could not take %s: it is %s, and files over %s are not downloaded (attachments.max_bytes in herald's configuration).", name, humanSize(size), humanSize(limit))
	}
	return fmt.Sprintf("I could not take %s: files over %s are not downloaded (attachments.max_bytes in herald's configuration).", name, humanSize(limit))
}

// lineNotFetched tells the model a file could not be had, and why, by
// the failure's code; reason is the failure's own words, made safe to
// show.
func lineNotFetched(name string, err error, reason string) string {
	why := "the download failed"
	switch errs.CodeOf(err) {
	case errs.NotFound:
		why = "it is no longer there"
	case errs.Invalid:
		why = "herald cannot download this kind of attachment"
	case errs.Unavailable:
		why = "it could not be reached"
	}
	if reason != "" {
		why += " (" + reason + ")"
	}
	return fmt.Sprintf("[%s came with the message but could not be downloaded: %s; the person may send it again]", name, why)
}

// lineNotImage tells the model a picture is of a type it cannot be
// shown.
func lineNotImage(name, mime string) string {
	if mime == "" {
		mime = "an unknown type"
	}
	return fmt.Sprintf("[%s is a picture of a type the model cannot be shown (%s; JPEG, PNG, GIF and WebP are)]", name, mime)
}

// lineDamaged tells the model a picture could not be read.
func lineDamaged(name string) string {
	return fmt.Sprintf("[%s could not be read as a picture: it is damaged or not a picture]", name)
}

// lineDescribed gives the model a picture's description.
func lineDescribed(name, description string) string {
	return fmt.Sprintf("[%s, a picture, as a vision model described it: %s]", name, description)
}

// lineNotDescribed tells the model a picture could not be described.
func lineNotDescribed(name, reason string) string {
	return fmt.Sprintf("[%s, a picture, came with the message but could not be described: %s]", name, reason)
}

// describePrompt asks the vision model for a description; caption is
// what the person wrote with the picture.
func describePrompt(caption string) string {
	p := "Describe this picture for someone who cannot see it: what it shows, any text in it word for word, and anything notable. Be factual and brief."
	if caption != "" {
		p += "\n\nThe person who sent it wrote with it: " + caption
	}
	return p
}

// lineNotHeard tells the model a voice note came that nobody transcribed.
func lineNotHeard(name string) string {
	return fmt.Sprintf("[a voice note came (%s), but it could not be heard: speech-to-text is not set up]", name)
}

// noticeNotHeard tells the person how to have voice notes heard.
const noticeNotHeard = "I could not hear your voice note: speech-to-text is not set up. " +
	"Set stt.api_key (or HERALD_STT_API_KEY) to transcribe with OpenAI, or stt.base_url to use another " +
	"OpenAI-compatible endpoint, such as a local whisper server."

// lineNotTranscribed tells the model a voice note's transcription failed.
func lineNotTranscribed(name, reason string) string {
	return fmt.Sprintf("[a voice note came (%s), but it could not be transcribed: %s]", name, reason)
}

// lineSilent tells the model a voice note's transcript was empty.
func lineSilent(name string) string {
	return fmt.Sprintf("[a voice note came (%s), but nothing could be heard in it]", name)
}

// lineCommandFailed tells the model a spoken command could not be
// handed on; its words follow as the message.
func lineCommandFailed(command string) string {
	return fmt.Sprintf("[the voice note said the command %q, which could not be run just now; it is passed on as words]", command)
}

// lineDocument tells the model where a file was saved; inline says its
// text follows.
func lineDocument(name, mime string, size int64, path string, inline bool) string {
	if mime == "" {
		mime = "unknown type"
	}
	line := fmt.Sprintf("[file %s (%s, %s) saved at %s", name, mime, humanSize(size), path)
	if inline {
		return line + "; its text follows]"
	}
	return line + "]"
}

// inlineText is a small text file's contents, between markers naming it.
func inlineText(name, text string) string {
	return strings.TrimRight(text, "\n") + "\n[end of " + name + "]"
}

// humanSize is n bytes as a person reads it: bytes, KiB or MiB.
func humanSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
