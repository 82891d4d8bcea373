package adapters

import (
	"context"
	"fmt"

	"github.com/heraldgw/herald/outbox"
)

// partsKey carries, in a Send's context, where the parts a platform
// accepted are recorded.
type partsKey struct{}

// WithParts returns ctx carrying keep, which KeepParts calls. The
// delivery worker passes one that records the parts in the store, with
// the outbox message, under its claim.
func WithParts(ctx context.Context, keep func(outbox.Parts) error) context.Context {
	return context.WithValue(ctx, partsKey{}, keep)
}

// KeepParts records how far a message sent in parts got, after a part
// was accepted and before the next one goes: a later attempt at the
// message, by this process or another, or after a crash, reads it back
// in Message.Parts and sends only the parts left, so no part is sent
// twice. When it fails, the adapter sends no more parts of the message
// and answers Transient with the error: a part it sent then could be sent
// again. Without a keeper in ctx it records nothing.
func KeepParts(ctx context.Context, p outbox.Parts) error {
	if keep, ok := ctx.Value(partsKey{}).(func(outbox.Parts) error); ok {
		return keep(p)
	}
	return nil
}

// PartsNotKept is the Transient result of a send whose progress could not
// be recorded (see KeepParts).
func PartsNotKept(platform string, err error) SendResult {
	return SendResult{Outcome: Transient, Reason: platform + ": recording the parts sent failed: " + err.Error()}
}

// ResumeAt is where a message's send goes on: the parts an earlier
// attempt got through, at most all n of them.
func ResumeAt(m outbox.Message, n int) int {
	return min(max(m.Parts.Done, 0), n)
}

// Layout is how a message with files goes out in parts: the text's parts
// first, then one part per file, in order. The count of parts accepted
// (outbox.Parts.Done) then says which went, so a retry sends neither a
// text part nor a file twice that the platform took. When the text fits
// the platform's caption it goes as the first file's caption instead,
// and has no parts of its own.
type Layout struct {
	Text    []string // the text's rendered parts
	Caption string   // the first file's caption, rendered; only when Text is empty
	Files   []outbox.File
}

// LayOut lays m out. render renders m's text in parts under a limit:
// limit for the text's own parts, captionLimit for a caption (0 when
// the platform takes none). The same message is laid out the same way
// every time.
func LayOut(m outbox.Message, render func(limit int) []string, limit, captionLimit int) Layout {
	l := Layout{Files: m.Files}
	if len(m.Files) > 0 && captionLimit > 0 {
		if c := render(captionLimit); len(c) <= 1 {
			if len(c) == 1 {
				l.Caption = c[0]
			}
			return l
		}
	}
	l.Text = render(limit)
	return l
}

// Len is the number of parts.
func (l Layout) Len() int { return len(l.Text) + len(l.Files) }

// File is part i's file and the caption it carries, when part i is a
// file; ok is false for a text part.
func (l Layout) File(i int) (f outbox.File, caption string, ok bool) {
	if i < len(l.Text) || i >= l.Len() {
		return outbox.File{}, "", false
	}
	if i == len(l.Text) {
		caption = l.Caption
	}
	return l.Files[i-len(l.Text)], caption, true
}

// Missing is why the files of parts from on cannot be sent, or "": a
// file without bytes (the delivery worker fills Data from the store)
// is a message that can never go, dead-lettered with this reason.
func (l Layout) Missing(from int) string {
	for _, f := range l.Files[min(max(from-len(l.Text), 0), len(l.Files)):] {
		if len(f.Data) == 0 {
			return fmt.Sprintf("the file %q has no bytes to send", f.Name)
		}
	}
	return ""
}
