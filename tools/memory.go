package tools

import (
	"context"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/notes"
)

// MemoryLimits bound what the memory tool keeps per user. Notes are meant
// to be small facts ("prefers metric units"), not documents: they are
// shown to the model on every turn.
type MemoryLimits struct {
	MaxNotes     int // notes per user; default DefaultMaxNotes
	MaxNoteChars int // characters per note; default DefaultMaxNoteChars
}

// Defaults for MemoryLimits.
const (
	DefaultMaxNotes     = 50
	DefaultMaxNoteChars = 500
)

// WithDefaults fills the zero fields of l.
func (l MemoryLimits) WithDefaults() MemoryLimits {
	if l.MaxNotes <= 0 {
		l.MaxNotes = DefaultMaxNotes
	}
	if l.MaxNoteChars <= 0 {
		l.MaxNoteChars = DefaultMaxNoteChars
	}
	return l
}

const memorySchema = `{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["add", "list", "remove"], "description": "add a note, list the notes, or remove one."},
    "text": {"type": "string", "description": "For add: the note, one short fact."},
    "id": {"type": "string", "description": "For remove: the id of the note, as list shows it."}
  },
  "required": ["action"],
  "additionalProperties": false
}`

type memoryArgs struct {
	Action string `json:"action"`
	Text   string `json:"text"`
	ID     string `json:"id"`
}

// memoryNote is a note as the model sees it.
type memoryNote struct {
	ID   string    `json:"id"`
	Text string    `json:"text"`
	At   time.Time `json:"at,omitzero"`
}

// Memory is the memory tool: small notes about the user that outlive the
// session (/new keeps them), kept in store under the turn's user. A note
// added or removed is written with the turn's commit (notes.Add,
// notes.Remove), so a turn that lost its lease writes none; until
// then the turn's own calls see it as written.
func Memory(store notes.Store, lim MemoryLimits) Tool {
	lim = lim.WithDefaults()
	return Tool{
		Name: "memory",
		Description: "Keep short notes about the user that last across conversations: preferences, facts about them, " +
			"things they asked you to remember. add stores one note, list shows them with their ids, remove deletes one by id. " +
			"Keep each note to one short fact.",
		Schema: []byte(memorySchema),
		Handler: Func(func(ctx context.Context, turn *Turn, a memoryArgs) (Result, error) {
			const op = "tools.memory"
			if turn == nil || turn.User == "" {
				return Result{}, errs.E(op, errs.Invalid, "memory is not available here: this turn has no user to keep notes for")
			}
			switch a.Action {
			case "add":
				return memoryAdd(ctx, store, lim, turn, a.Text)
			case "list":
				list, err := turnNotes(ctx, store, turn)
				if err != nil {
					return Result{}, errs.Wrap(op, errs.Unavailable, err)
				}
				out := make([]memoryNote, len(list))
				for i, n := range list {
					out[i] = memoryNote(n)
				}
				return JSON(map[string]any{"notes": out, "count": len(out), "limit": lim.MaxNotes}), nil
			case "remove":
				id := strings.TrimSpace(a.ID)
				if id == "" {
					return Result{}, errs.E(op, errs.Invalid, "id is required to remove a note; list the notes to see their ids")
				}
				list, err := turnNotes(ctx, store, turn)
				if err != nil {
					return Result{}, errs.Wrap(op, errs.Unavailable, err)
				}
				if !slices.ContainsFunc(list, func(n notes.Note) bool { return n.ID == id }) {
					return Result{}, errs.E(op, errs.NotFound, "there is no note with id %q; list the notes to see their ids", id)
				}
				turn.Write(notes.Remove{User: turn.User, ID: id})
				return JSON(map[string]string{"status": "removed", "id": id}), nil
			}
			return Result{}, errs.E(op, errs.Invalid, "unknown action %q: use add, list or remove", a.Action)
		}),
	}
}

// turnNotes are the user's notes as the turn sees them: those stored,
// with the adds and removals the turn will commit applied in order.
func turnNotes(ctx context.Context, store notes.Store, turn *Turn) ([]notes.Note, error) {
	list, err := store.Notes(ctx, turn.User)
	if err != nil {
		return nil, err
	}
	for _, w := range turn.Writes() {
		switch w := w.(type) {
		case notes.Add:
			if w.User == turn.User {
				list = append(list, notes.Note{ID: w.ID, Text: w.Text})
			}
		case notes.Remove:
			if w.User == turn.User {
				list = slices.DeleteFunc(list, func(n notes.Note) bool { return n.ID == w.ID })
			}
		}
	}
	return list, nil
}

func memoryAdd(ctx context.Context, store notes.Store, lim MemoryLimits, turn *Turn, text string) (Result, error) {
	const op = "tools.memory"
	text = strings.TrimSpace(text)
	if text == "" {
		return Result{}, errs.E(op, errs.Invalid, "text is required to add a note")
	}
	if n := utf8.RuneCountInString(text); n > lim.MaxNoteChars {
		return Result{}, errs.E(op, errs.TooLarge, "the note is %d characters, over the limit of %d: keep it to one short fact", n, lim.MaxNoteChars)
	}
	// Count first: the store's own limits are wider, and a full memory is
	// something the model should resolve by choosing what to forget.
	list, err := turnNotes(ctx, store, turn)
	if err != nil {
		return Result{}, errs.Wrap(op, errs.Unavailable, err)
	}
	if len(list) >= lim.MaxNotes {
		return Result{}, errs.E(op, errs.TooLarge, "memory is full (%d notes, the limit): remove a note that no longer matters (action remove with its id), then add this one", len(list))
	}
	for _, n := range list {
		if n.Text == text {
			return JSON(map[string]string{"status": "exists", "id": n.ID}), nil
		}
	}
	id := notes.NewID()
	turn.Write(notes.Add{User: turn.User, ID: id, Text: text})
	return JSON(map[string]string{"status": "added", "id": id}), nil
}
