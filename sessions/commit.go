package sessions

import (
	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/signals"
)

// Write is another domain's write that a turn's commit carries (a
// delegation's dispatch, a job's creation, a controller's state): the
// store applies it in the same atomic step as the turn's ack, history and
// outbox, under the same fencing token, so what a turn decided is written
// with the turn or not at all. sessions does not know what a write holds;
// each backend applies the kinds it implements (store/sqlite/writes.go,
// store/redis/writes.go) and refuses any other with Invalid, writing
// nothing.
type Write interface {
	// WriteKind names the write's kind, "<domain>.<name>", e.g.
	// "delegation.dispatch".
	WriteKind() string
}

// CheckWrites refuses a Finish's writes a backend must not apply: a nil
// write or a kind not of the form <domain>.<name>, the form a domain's
// signals take too (signals.KindDomain). A backend calls it
// before its own check of the kinds it knows.
func CheckWrites(op string, ws []Write) error {
	for i, w := range ws {
		if w == nil {
			return errs.E(op, errs.Invalid, "write %d of the commit is nil", i)
		}
		if k := w.WriteKind(); signals.KindDomain(k) == "" {
			return errs.E(op, errs.Invalid, "write kind %q is not <domain>.<name>", k)
		}
	}
	return nil
}

// UnknownWrite is the error of a backend given a write kind it does not
// implement.
func UnknownWrite(op string, w Write) error {
	return errs.E(op, errs.Invalid, "this store does not apply writes of kind %q", w.WriteKind())
}

// Usage adds a turn's token usage to its conversation's totals, kept in
// its metadata under UsageKeys(Model), in the turn's commit: a turn
// committed once counts once. The turn worker adds it to every agent
// turn whose model calls reported usage.
type Usage struct {
	Conv               string
	Model              string // the model the calls ran on
	Prompt, Completion int    // tokens
}

// WriteKind is "sessions.usage".
func (Usage) WriteKind() string { return "sessions.usage" }

// UsagePrefix starts the metadata keys of a conversation's token totals.
const UsagePrefix = "usage."

// UsageKeys are the metadata keys of a conversation's prompt and
// completion token totals on model.
func UsageKeys(model string) (prompt, completion string) {
	return UsagePrefix + "prompt_tokens." + model, UsagePrefix + "completion_tokens." + model
}

// Check refuses a Usage a store must not apply: Invalid for a bad
// conversation key or negative counts.
func (u Usage) Check(op string) error {
	if err := chat.ValidateConv(op, u.Conv); err != nil {
		return err
	}
	if u.Prompt < 0 || u.Completion < 0 {
		return errs.E(op, errs.Invalid, "token counts %d/%d are negative", u.Prompt, u.Completion)
	}
	return nil
}

// Committed is what TurnWorkerOptions.Committed is told of a turn whose
// commit carried writes.
type Committed struct {
	Conv   string
	Writes []Write
	// Stopped says /stop or /new ended the turn: what its writes start
	// should be stopped at once.
	Stopped bool
}
