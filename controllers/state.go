// Package controllers holds the session controllers — /goal, /loop and
// /heartbeat — that keep a conversation working on its own. Each enters
// the conversation only as a synthetic user-role entry in its queue, at
// a turn boundary and behind any real message waiting; none edits a
// running turn or the system prompt.
//
// A controller's state lives in the store (State), whole, with a
// version every change compares and sets, and with the time it next
// fires (DueAt), which whichever instance claims it fires once.
package controllers

import (
	"context"
	"encoding/json"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
)

// Kind names a controller.
type Kind string

// The controllers.
const (
	KindGoal      Kind = "goal"
	KindLoop      Kind = "loop"
	KindHeartbeat Kind = "heartbeat"
)

// Kinds lists every controller kind.
var Kinds = []Kind{KindGoal, KindLoop, KindHeartbeat}

// MaxData bounds a state's Data: a controller keeps its settings and
// counters there, not transcripts.
const MaxData = 64 << 10

// State is one controller of a conversation: a goal or a heartbeat (one
// each, ID ""), or one of its loops (ID names it). Data is the
// controller's own, as JSON; the store keeps it whole.
type State struct {
	Conv string          `json:"conv"`
	Kind Kind            `json:"kind"`
	ID   string          `json:"id,omitempty"`
	Data json.RawMessage `json:"data"`
	// DueAt is when it next fires, by the store's clock; zero: it does
	// not fire on time (a goal, which runs after each turn).
	DueAt     time.Time `json:"due_at,omitzero"`
	Version   int64     `json:"version"` // 0 for one not stored yet
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// Key is what names a state in its conversation.
type Key struct {
	Conv string
	Kind Kind
	ID   string
}

// Name is the controller k names, as a message says it: "goal", or
// "loop <id>".
func (k Key) Name() string {
	if k.ID == "" {
		return string(k.Kind)
	}
	return string(k.Kind) + " " + k.ID
}

// Key is s's key.
func (s State) Key() Key { return Key{Conv: s.Conv, Kind: s.Kind, ID: s.ID} }

// Store keeps the controllers' states. Every change is a compare and
// set on the version it read.
type Store interface {
	// Now is the store's clock, which DueAt is read by.
	Now(ctx context.Context) (time.Time, error)
	// Controller returns one state. Errors: NotFound.
	Controller(ctx context.Context, k Key) (State, error)
	// Controllers returns a conversation's states, by kind then id.
	Controllers(ctx context.Context, conv string) ([]State, error)
	// PutController writes s when the stored state's version is
	// s.Version (0: none is stored) and returns it with its new
	// version and UpdatedAt. Errors: Conflict (another wrote first, or
	// one is stored when s.Version is 0), Invalid, TooLarge.
	PutController(ctx context.Context, s State) (State, error)
	// DeleteController removes the state of k at version. Errors:
	// Conflict (another wrote first), NotFound.
	DeleteController(ctx context.Context, k Key, version int64) error
	// DueControllers returns up to limit states whose DueAt is set and
	// not after at, earliest first.
	DueControllers(ctx context.Context, at time.Time, limit int) ([]State, error)
}

// Check refuses a state a Store must not keep: Invalid for a bad
// conversation key, an unknown kind, a goal or heartbeat with an id, a
// loop without one, or Data that is not a JSON object; TooLarge for
// Data over MaxData.
func (s State) Check(op string) error {
	if err := chat.ValidateConv(op, s.Conv); err != nil {
		return err
	}
	switch s.Kind {
	case KindGoal, KindHeartbeat:
		if s.ID != "" {
			return errs.E(op, errs.Invalid, "a conversation has one %s: it takes no id (%q)", s.Kind, s.ID)
		}
	case KindLoop:
		if s.ID == "" || len(s.ID) > 64 {
			return errs.E(op, errs.Invalid, "a loop needs an id of at most 64 bytes")
		}
	default:
		return errs.E(op, errs.Invalid, "unknown controller kind %q: goal, loop or heartbeat", s.Kind)
	}
	if s.Version < 0 {
		return errs.E(op, errs.Invalid, "version %d is negative", s.Version)
	}
	if len(s.Data) > MaxData {
		return errs.E(op, errs.TooLarge, "a %s's state is %d bytes, over the limit of %d", s.Kind, len(s.Data), MaxData)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(s.Data, &obj); err != nil || obj == nil {
		return errs.E(op, errs.Invalid, "a %s's state is not a JSON object", s.Kind)
	}
	return nil
}

// Put is a state written with a turn's commit (a sessions.Write): after
// the turn that a goal's judge read, or that a loop's or heartbeat's
// tick ran, the state moves on in the same atomic step as the turn, or
// not at all. It is written only when the stored version is still
// State.Version (0: none is stored); when another writer was first (a
// /goal pause while the turn ran) it is skipped, not an error: the later
// change wins over a decision made before it.
type Put struct{ State State }

// WritePut is Put's write kind.
const WritePut = "controllers.put"

// WriteKind is WritePut.
func (Put) WriteKind() string { return WritePut }

// remove deletes k's state from st over the version it reads, reading
// again when another writer was first. Errors: NotFound.
func remove(ctx context.Context, st Store, op string, k Key) error {
	for range maxAttempts {
		s, err := st.Controller(ctx, k)
		if err != nil {
			return err
		}
		if err = st.DeleteController(ctx, k, s.Version); !errs.Is(err, errs.Conflict) {
			return err
		}
	}
	return errs.E(op, errs.Conflict, "the %s kept changing; try again", k.Name())
}
