package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// Approvals are the questions the API lists and answers
// (approvals.Approver is one).
type Approvals interface {
	// Pending lists the pending approvals of conv (every
	// conversation's when empty), oldest first. Errors: Unavailable.
	Pending(ctx context.Context, conv string) ([]approvals.Approval, error)
	// Answer decides approval id with d, as by. Errors: NotFound;
	// Conflict with the approval as it was decided; Unavailable.
	Answer(ctx context.Context, id string, d approvals.Decision, by, message string) (approvals.Approval, error)
}

// ApprovalRoutes are the approvals' routes under /api/v1/approvals,
// served by ap.
func ApprovalRoutes(ap Approvals) Routes { return approvalRoutes{ap} }

type approvalRoutes struct{ ap Approvals }

func (a approvalRoutes) mount(s *Server) {
	s.approvals = a.ap
	s.route("GET", "/api/v1/approvals", s.live(s.listApprovals))
	s.route("POST", "/api/v1/approvals/{id}", s.decideApproval)
}

// listApprovals lists the pending approvals: of ?conversation=, a
// conversation key ("telegram:42") or an API conversation's id, else
// of every conversation.
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	conv, err := conversationFilter(r.URL.Query().Get("conversation"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	list, err := s.approvals.Pending(r.Context(), conv)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if list == nil {
		list = []approvals.Approval{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": list})
}

// decideApproval answers an approval as the API's key holder ("api"):
// 400 for a decision that is not once, session, always or deny, 404
// for an unknown approval, 409 for one decided before, saying by whom.
func (s *Server) decideApproval(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Decision string `json:"decision"`
	}
	if err := s.decodeBody(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	d, ok := approvals.ParseDecision(req.Decision)
	if !ok {
		writeError(w, http.StatusBadRequest, typeInvalid, fmt.Sprintf("decision %q is not once, session, always or deny", req.Decision))
		return
	}
	id := r.PathValue("id")
	a, err := s.approvals.Answer(r.Context(), id, d, Platform, "")
	switch {
	case errs.Is(err, errs.NotFound):
		writeError(w, http.StatusNotFound, typeNotFound, fmt.Sprintf("no approval %q", id))
	case errs.Is(err, errs.Conflict):
		writeError(w, http.StatusConflict, typeConflict, fmt.Sprintf("approval %s is not pending: %s by %s", id, a.Decision, a.DecidedBy))
	case err != nil:
		s.fail(w, r, err)
	default:
		writeJSON(w, http.StatusOK, a)
	}
}

// approvalQuestion is what a stream shows of it, a timeline item of
// the conversation the stream waits on, when it is an approval's
// question: the question, with how to answer it here besides the
// commands. How it was answered is not shown: the turn's text may
// stream before that line reaches the timeline.
func approvalQuestion(it sessions.TimelineItem) (string, bool) {
	id := it.Meta[approvals.MetaApproval]
	if id == "" || it.Kind != approvals.KindQuestion {
		return "", false
	}
	return fmt.Sprintf("%s\nOr POST /api/v1/approvals/%s with {\"decision\": \"once\"} (or session, always, deny).", it.Text, id), true
}
