package adapters

import (
	"context"

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
