package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/notes"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
)

// NotesAssembly is what RememberNotes is made with: the gateway's parts
// and the conversations' agent.
type NotesAssembly interface {
	capability.Assembled
	Agent() *Agent
}

// signalTimeout bounds the signal of a note added.
const signalTimeout = 5 * time.Second

// RememberNotes makes the conversations' agent remember the users it
// found with no notes (notes.Known), so a turn of such a user reads no
// notes; a turn's commit that adds a note for a user makes every gateway
// read that user's again (notes.SignalAdded).
func RememberNotes(as NotesAssembly) (*capability.Capability, error) {
	a := as.Assembly()
	ag := as.Agent()
	if ag.Notes == nil {
		return &capability.Capability{}, nil
	}
	known := notes.NewKnown(ag.Notes, a.Clock, 0)
	ag.Notes = known
	sig := a.Store.Signals()
	log := a.Logger
	if log == nil {
		log = slog.Default()
	}
	added := func(done sessions.Committed, w sessions.Write) {
		add, ok := w.(notes.Add)
		if !ok {
			return
		}
		known.Forget(add.User)
		ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
		defer cancel()
		if err := sig.Signal(ctx, signals.Signal{Conv: done.Conv, Kind: notes.SignalAdded, Target: add.User}); err != nil {
			log.Warn("telling the other gateways of a note failed; they read it within minutes", "user", add.User, "err", err)
		}
	}
	return &capability.Capability{
		Committed: map[string]func(sessions.Committed, sessions.Write){notes.Add{}.WriteKind(): added},
		Signals:   known,
	}, nil
}
