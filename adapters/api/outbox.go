package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// Outbox is what the outbox routes read and change (outbox.Store is one).
type Outbox interface {
	// Pending lists up to limit messages not delivered yet, oldest first.
	Pending(ctx context.Context, limit int) ([]outbox.Message, error)
	// DeadLetters lists up to limit dead letters, oldest first.
	DeadLetters(ctx context.Context, limit int) ([]outbox.Message, error)
	// Requeue makes a dead letter pending again, due now. Errors:
	// NotFound.
	Requeue(ctx context.Context, id string) error
}

// defaultOutboxLimit is how many messages a listing answers without
// ?limit=.
const defaultOutboxLimit = 100

// OutboxRoutes are the outbox's routes under /api/v1/outbox, as `herald
// outbox` has them: the pending messages, the dead letters with their
// reason, and a dead letter's retry.
func OutboxRoutes(o Outbox) Routes { return outboxRoutes{o} }

type outboxRoutes struct{ o Outbox }

func (o outboxRoutes) mount(s *Server) {
	list := func(read func(context.Context, int) ([]outbox.Message, error)) http.HandlerFunc {
		return s.live(func(w http.ResponseWriter, r *http.Request) { s.listOutbox(w, r, read) })
	}
	s.route("GET", "/api/v1/outbox/pending", list(o.o.Pending))
	s.route("GET", "/api/v1/outbox/dead", list(o.o.DeadLetters))
	s.route("POST", "/api/v1/outbox/dead/{id}/retry", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		err := o.o.Requeue(r.Context(), id)
		switch {
		case errs.Is(err, errs.NotFound):
			writeError(w, http.StatusNotFound, typeNotFound, fmt.Sprintf("no dead letter %q", id))
		case err != nil:
			s.fail(w, r, err)
		default:
			writeJSON(w, http.StatusOK, map[string]string{"id": id, "status": "pending"})
		}
	})
}

// outboxMessage is a listed message: what it says, where it goes, and
// how its sending went.
type outboxMessage struct {
	ID          string    `json:"id"`
	Target      string    `json:"target"`
	Conv        string    `json:"conv,omitempty"`
	Kind        string    `json:"kind,omitempty"`
	Text        string    `json:"text"`
	Files       []string  `json:"files,omitempty"` // their names
	Attempts    int       `json:"attempts"`
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	CreatedAt   time.Time `json:"created_at,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
}

// listOutbox answers up to ?limit= (default 100) messages read reads.
func (s *Server) listOutbox(w http.ResponseWriter, r *http.Request, read func(context.Context, int) ([]outbox.Message, error)) {
	limit := defaultOutboxLimit
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, typeInvalid, fmt.Sprintf("limit %q is not a positive number", l))
			return
		}
		limit = n
	}
	msgs, err := read(r.Context(), limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]outboxMessage, len(msgs))
	for i, m := range msgs {
		out[i] = outboxMessage{
			ID: m.ID, Target: m.Target.String(), Conv: m.Conv, Kind: m.Kind, Text: m.Text,
			Attempts: m.Attempts, NextAttempt: m.NextAttempt.UTC(), CreatedAt: m.CreatedAt.UTC(), LastError: m.LastError,
		}
		for _, f := range m.Files {
			out[i].Files = append(out[i].Files, f.Name)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": out})
}
