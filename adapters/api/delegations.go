package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// Delegations is the lifecycle of background work the API serves
// (delegation.Service is one): start, read and cancel a delegation.
type Delegations interface {
	// Start dispatches req. Errors: Invalid (bad input), Conflict (the
	// conversation has no place for that many children), Unavailable.
	Start(ctx context.Context, req delegation.Request) (delegation.Delegation, error)
	// Get reads a delegation. Errors: NotFound, Unavailable.
	Get(ctx context.Context, id string) (delegation.Delegation, error)
	// Cancel stops a delegation's running children and returns it with
	// the ones the stop went to. Errors: NotFound, Unavailable.
	Cancel(ctx context.Context, id string) (delegation.Delegation, []string, error)
	// List returns the delegations q selects, newest first, as trees.
	// Errors: Unavailable.
	List(ctx context.Context, q delegation.Query) ([]delegation.Tree, error)
	// StopChild stops one child of d and reports whether it was not
	// terminal. Errors: NotFound (no such child), Unavailable.
	StopChild(ctx context.Context, d delegation.Delegation, child string) (bool, error)
	// Transcript reads one child's transcript as this instance keeps
	// it. Errors: NotFound (no such child, or no transcript of it
	// here), Unavailable.
	Transcript(ctx context.Context, d delegation.Delegation, child string) (delegation.ChildLog, error)
}

// Long-polling a delegation (GET …?wait=).
const (
	maxDelegationWait = 5 * time.Minute
	delegationPoll    = 250 * time.Millisecond
)

// How many delegations GET /api/v1/delegations lists.
const (
	defaultDelegations = 50
	maxDelegations     = 200
)

// typeConflict is the error type of a request the state refuses: a
// conversation with no free place for more sub-agents.
const typeConflict = "conflict_error"

type delegationRequest struct {
	Conversation string            `json:"conversation"`
	Goal         string            `json:"goal"`
	Context      string            `json:"context"`
	OutputSchema json.RawMessage   `json:"output_schema"`
	Role         string            `json:"role"`
	Tasks        []delegation.Task `json:"tasks"`
}

// delegationResponse is a delegation as the API answers it; Stopping
// is, for a cancel, the children the stop went to.
type delegationResponse struct {
	delegation.View
	Stopping []string `json:"stopping,omitempty"`
}

// DelegationRoutes are the background work routes under
// /api/v1/delegations, served by svc.
func DelegationRoutes(svc Delegations) Routes { return delegationRoutes{svc} }

type delegationRoutes struct{ svc Delegations }

func (d delegationRoutes) mount(s *Server) {
	s.delegations = d.svc
	s.routeMethods("/api/v1/delegations", map[string]http.HandlerFunc{
		"GET":  s.live(s.listDelegations),
		"POST": s.startDelegation,
	})
	s.route("GET", "/api/v1/delegations/{id}", s.live(s.getDelegation))
	s.route("POST", "/api/v1/delegations/{id}/cancel", s.cancelDelegation)
	s.route("GET", "/api/v1/delegations/{id}/children/{child}/transcript", s.live(s.childTranscript))
	s.route("POST", "/api/v1/delegations/{id}/children/{child}/stop", s.stopChild)
}

// listDelegations lists delegations newest first, each as a tree of
// its children (an orchestrator's workers under it) with their status,
// current tool, tokens and cost: of ?conversation= (a conversation key,
// "telegram:42", or an API conversation's id) or of every conversation,
// only those with a child not ended with ?active=1, at most ?limit=
// (50, at most 200).
func (s *Server) listDelegations(w http.ResponseWriter, r *http.Request) {
	const op = "api.listDelegations"
	v := r.URL.Query()
	q := delegation.Query{Limit: defaultDelegations}
	var err error
	if q.Conv, err = conversationFilter(v.Get("conversation")); err != nil {
		s.fail(w, r, err)
		return
	}
	if a := v.Get("active"); a != "" {
		if q.Active, err = strconv.ParseBool(a); err != nil {
			s.fail(w, r, errs.E(op, errs.Invalid, "active %q is not 1, 0, true or false", a))
			return
		}
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			s.fail(w, r, errs.E(op, errs.Invalid, "limit %q is not a positive number", l))
			return
		}
		q.Limit = min(n, maxDelegations)
	}
	trees, err := s.delegations.List(r.Context(), q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"delegations": trees})
}

// childTranscript answers one child's transcript as this instance keeps
// it (transcripts are written where a child runs): 404 when it keeps
// none.
func (s *Server) childTranscript(w http.ResponseWriter, r *http.Request) {
	d, ok := s.scopedDelegation(w, r)
	if !ok {
		return
	}
	log, err := s.delegations.Transcript(r.Context(), d, r.PathValue("child"))
	if err != nil {
		s.failChild(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, log)
}

// stopChild stops one child of a delegation, wherever it runs, as a
// cancel stops each: it ends cancelled. The answer is the delegation
// as it stood, with the child in stopping when the stop went to it.
func (s *Server) stopChild(w http.ResponseWriter, r *http.Request) {
	d, ok := s.scopedDelegation(w, r)
	if !ok {
		return
	}
	child := r.PathValue("child")
	stopped, err := s.delegations.StopChild(r.Context(), d, child)
	if err != nil {
		s.failChild(w, r, err)
		return
	}
	res := delegationResponse{View: delegation.ViewOf(d), Stopping: []string{}}
	if stopped {
		res.Stopping = append(res.Stopping, child)
	}
	writeJSON(w, http.StatusOK, res)
}

// scopedDelegation reads the delegation the path names, within the
// request's conversation (scope), or answers why not.
func (s *Server) scopedDelegation(w http.ResponseWriter, r *http.Request) (delegation.Delegation, bool) {
	d, err := s.delegations.Get(r.Context(), r.PathValue("id"))
	if err == nil {
		err = scope(r, d)
	}
	if err != nil {
		s.failDelegation(w, r, err)
		return delegation.Delegation{}, false
	}
	return d, true
}

// failChild answers the errors of a route about one child: a missing
// child or transcript is a 404 that says which.
func (s *Server) failChild(w http.ResponseWriter, r *http.Request, err error) {
	if errs.CodeOf(err) == errs.NotFound {
		writeError(w, http.StatusNotFound, typeNotFound, reason(err))
		return
	}
	s.fail(w, r, err)
}

// startDelegation dispatches background work for a conversation of
// this API; its results come back to that conversation as a turn, and
// the answer is the delegation's handle. An Idempotency-Key makes a
// retried request answer the delegation the first one started.
func (s *Server) startDelegation(w http.ResponseWriter, r *http.Request) {
	var req delegationRequest
	if err := s.decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	conv, err := conversation(req.Conversation)
	if err != nil {
		s.fail(w, r, errs.E("api.startDelegation", errs.Invalid, "conversation: %s", reason(err)))
		return
	}
	d, err := s.delegations.Start(r.Context(), delegation.Request{
		Conv:   conv,
		Origin: outbox.Target{Platform: Platform, Chat: req.Conversation},
		// Whom a message posted here is from, as the agent names it.
		User:         Platform + ":" + Platform,
		Key:          strings.TrimSpace(r.Header.Get("Idempotency-Key")),
		Goal:         req.Goal,
		Context:      req.Context,
		OutputSchema: req.OutputSchema,
		Role:         req.Role,
		Tasks:        req.Tasks,
	})
	if err != nil {
		s.failDelegation(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, delegationResponse{View: delegation.ViewOf(d)})
}

// getDelegation answers a delegation with its children and their
// results. With ?wait=DURATION it answers once every child has ended,
// or when the wait (at most 5 minutes) has passed, as it then stands.
func (s *Server) getDelegation(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		var err error
		if wait, err = time.ParseDuration(v); err != nil || wait < 0 {
			s.fail(w, r, errs.E("api.getDelegation", errs.Invalid, "wait %q is not a duration such as 30s or 2m", v))
			return
		}
		wait = min(wait, maxDelegationWait)
	}
	d, err := s.delegations.Get(r.Context(), id)
	if err == nil {
		err = scope(r, d)
	}
	if err != nil {
		s.failDelegation(w, r, err)
		return
	}
	if wait > 0 && d.Status() == delegation.StatusRunning {
		clearWriteDeadline(w)
		var ok bool
		if d, ok = s.awaitDelegation(r.Context(), d, wait); !ok {
			return // the client went away
		}
	}
	writeJSON(w, http.StatusOK, delegationResponse{View: delegation.ViewOf(d)})
}

// awaitDelegation reads d from the store every delegationPoll until
// every child has ended or wait has passed, and returns it as it last
// read it. A read that fails is tried again at the next poll; it
// reports false when ctx ended first.
func (s *Server) awaitDelegation(ctx context.Context, d delegation.Delegation, wait time.Duration) (delegation.Delegation, bool) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTicker(delegationPoll)
	defer poll.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return d, false
		case <-s.done:
			return d, true
		case <-deadline.C:
			return d, true
		case <-poll.C:
		}
		cur, err := s.delegations.Get(ctx, d.ID)
		switch {
		case err == nil:
			d, failing = cur, false
		case ctx.Err() != nil:
			return d, false
		case !failing:
			s.log.Warn("reading a delegation failed; polling on", "delegation", d.ID, "err", err)
			failing = true
		}
		if d.Status() != delegation.StatusRunning {
			return d, true
		}
	}
}

// cancelDelegation stops a delegation's running children, wherever
// they run. A delegation that has ended is answered as it is.
func (s *Server) cancelDelegation(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("conversation") {
		// Scoped: another conversation's delegation is not touched.
		d, err := s.delegations.Get(r.Context(), r.PathValue("id"))
		if err == nil {
			err = scope(r, d)
		}
		if err != nil {
			s.failDelegation(w, r, err)
			return
		}
	}
	d, stopping, err := s.delegations.Cancel(r.Context(), r.PathValue("id"))
	if err != nil {
		s.failDelegation(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, delegationResponse{View: delegation.ViewOf(d), Stopping: stopping})
}

// scope refuses d when the request names a conversation
// (?conversation=ID, as a start's body names it) and d is not of it: as
// NotFound, the answer an unknown id gets, so a caller that scopes its
// requests reads and cancels only its own conversation's delegations.
// Without the parameter every delegation answers, behind the API key.
func scope(r *http.Request, d delegation.Delegation) error {
	const op = "api.delegation"
	q := r.URL.Query()
	if !q.Has("conversation") {
		return nil
	}
	conv, err := conversation(q.Get("conversation"))
	if err != nil {
		return errs.E(op, errs.Invalid, "conversation: %s", reason(err))
	}
	if d.Conv != conv {
		return errs.E(op, errs.NotFound, "delegation %q is not of conversation %q", d.ID, q.Get("conversation"))
	}
	return nil
}

// failDelegation answers the errors of the delegation routes: those the
// API's other routes answer, and a missing delegation and a full
// conversation, which only these have.
func (s *Server) failDelegation(w http.ResponseWriter, r *http.Request, err error) {
	switch errs.CodeOf(err) {
	case errs.NotFound:
		writeError(w, http.StatusNotFound, typeNotFound, fmt.Sprintf("no delegation %q", r.PathValue("id")))
	case errs.Conflict:
		writeError(w, http.StatusConflict, typeConflict, reason(err))
	default:
		s.fail(w, r, err)
	}
}
