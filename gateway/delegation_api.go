package gateway

import "github.com/heraldgw/herald/delegation"

// delegationService is the lifecycle of background work the HTTP API
// serves (POST /api/v1/delegations and the rest): it dispatches as
// delegate_task does, on the same limits, wakes this instance's runner,
// and stops a child here at once or, through the store's signals,
// wherever it runs.
func (g *Gateway) delegationService(p *delegationParts) *delegation.Service {
	return &delegation.Service{
		Store:       g.db.Delegations(),
		Signals:     g.db.Signals(),
		Runner:      p.runner,
		Meta:        g.db.Sessions().Meta,
		MaxChildren: g.cfg.Delegation.MaxConcurrentChildren,
		Independent: g.cfg.Delegation.IndependentCompletions,
		Cancelled:   "cancelled from the API",
		Clock:       g.clock,
	}
}
