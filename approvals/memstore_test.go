package approvals_test

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// memStore is an approvals.Store in memory, as its interface comments
// say.
type memStore struct {
	mu     sync.Mutex
	byID   map[string]approvals.Approval
	order  []string
	grants []approvals.Grant
}

var _ approvals.Store = (*memStore)(nil)

func newMemStore() *memStore { return &memStore{byID: map[string]approvals.Approval{}} }

func (s *memStore) CreateApproval(_ context.Context, a approvals.Approval) error {
	if err := approvals.CheckApproval("mem.CreateApproval", a); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byID[a.ID]; ok {
		return errs.E("mem.CreateApproval", errs.Conflict, "approval %s exists", a.ID)
	}
	for id, old := range s.byID {
		if old.Conv == a.Conv && old.Key == a.Key && old.Pending() {
			old.Decision, old.DecidedBy, old.DecidedAt = approvals.Expired, approvals.Herald, a.CreatedAt
			s.byID[id] = old
		}
	}
	s.byID[a.ID] = a
	s.order = append(s.order, a.ID)
	return nil
}

func (s *memStore) Approval(_ context.Context, id string) (approvals.Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.byID[id]
	if !ok {
		return approvals.Approval{}, errs.E("mem.Approval", errs.NotFound, "no approval %s", id)
	}
	return a, nil
}

func (s *memStore) Decide(_ context.Context, id string, d approvals.Decision, by string, at time.Time, message string) (approvals.Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.byID[id]
	switch {
	case !ok:
		return approvals.Approval{}, errs.E("mem.Decide", errs.NotFound, "no approval %s", id)
	case !a.Pending():
		return a, errs.E("mem.Decide", errs.Conflict, "approval %s was decided", id)
	}
	a.Decision, a.DecidedBy, a.DecidedAt = d, by, at
	if message != "" {
		a.MessageID = message
	}
	s.byID[id] = a
	return a, nil
}

func (s *memStore) SetMessage(_ context.Context, id, message string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.byID[id]
	if !ok {
		return errs.E("mem.SetMessage", errs.NotFound, "no approval %s", id)
	}
	a.MessageID = message
	s.byID[id] = a
	return nil
}

func (s *memStore) PendingApprovals(_ context.Context, conv string) ([]approvals.Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []approvals.Approval
	for _, id := range s.order {
		if a := s.byID[id]; a.Pending() && (conv == "" || a.Conv == conv) {
			out = append(out, a)
		}
	}
	return out, nil
}

func (s *memStore) Decided(_ context.Context, conv string, limit int) ([]approvals.Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []approvals.Approval
	for _, id := range slices.Backward(s.order) {
		if a := s.byID[id]; !a.Pending() && (conv == "" || a.Conv == conv) && len(out) < limit {
			out = append(out, a)
		}
	}
	return out, nil
}

func (s *memStore) AddGrant(_ context.Context, g approvals.Grant) error {
	if err := approvals.CheckGrant("mem.AddGrant", g); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grants = slices.DeleteFunc(s.grants, func(o approvals.Grant) bool {
		return o.Pattern == g.Pattern && o.Conv == g.Conv && o.Session == g.Session
	})
	s.grants = append(s.grants, g)
	return nil
}

func (s *memStore) Grants(_ context.Context, conv, session string) ([]approvals.Grant, error) {
	if err := approvals.CheckScope("mem.Grants", conv, session); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []approvals.Grant
	for _, g := range s.grants {
		if g.Conv == "" || g.Conv == conv && g.Session == session {
			out = append(out, g)
		}
	}
	return out, nil
}

func (s *memStore) Revoke(_ context.Context, pattern string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.grants)
	s.grants = slices.DeleteFunc(s.grants, func(g approvals.Grant) bool { return g.Conv == "" && g.Pattern == pattern })
	return len(s.grants) < n, nil
}

// memOutbox records what is enqueued; nothing else of an outbox.Store
// is used.
type memOutbox struct {
	outbox.Store
	mu   sync.Mutex
	sent []outbox.Message
}

func (o *memOutbox) Enqueue(_ context.Context, m outbox.Message) (string, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sent = append(o.sent, m)
	return "m" + string(rune('0'+len(o.sent))), false, nil
}

func (o *memOutbox) messages() []outbox.Message {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.sent)
}
