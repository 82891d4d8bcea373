package delegation

import (
	"cmp"
	"time"
)

// treeSummaryMax bounds a result's summary in a Tree: the whole is
// GET /api/v1/delegations/{id}'s.
const treeSummaryMax = 2000

// Tree is a delegation as a live list shows it: each child with what it
// is doing or how it ended, and an orchestrator's workers under it.
type Tree struct {
	ID     string `json:"id"`
	Status Status `json:"status"`
	Conv   string `json:"conv"`
	Source string `json:"source"`
	// Orchestrator is, for workers whose orchestrator is not in the
	// same list, that orchestrator's id.
	Orchestrator string    `json:"orchestrator,omitempty"`
	Done         int       `json:"done"`
	Total        int       `json:"total"`
	CreatedAt    time.Time `json:"created_at"`
	Children     []Branch  `json:"children"`
}

// Branch is one child in a Tree: its progress while it runs, its
// result's once it ended.
type Branch struct {
	ID string `json:"id"`
	// Delegation is the delegation the child is of ("" for a worker
	// known only from its orchestrator's progress).
	Delegation   string    `json:"delegation_id,omitempty"`
	Goal         string    `json:"goal"`
	Role         string    `json:"role,omitempty"`
	Status       Status    `json:"status"`
	Owner        string    `json:"owner,omitempty"` // the instance running it
	CurrentTool  string    `json:"current_tool,omitempty"`
	APICalls     int       `json:"api_calls"`
	InputTokens  int       `json:"input_tokens"`
	OutputTokens int       `json:"output_tokens"`
	Tokens       int       `json:"tokens"`
	Model        string    `json:"model,omitempty"`
	CostUSD      *float64  `json:"cost_usd,omitempty"` // nil when the model has no price
	StartedAt    time.Time `json:"started_at,omitzero"`
	EndedAt      time.Time `json:"ended_at,omitzero"`
	LastActivity time.Time `json:"last_activity,omitzero"`
	Summary      string    `json:"summary,omitempty"`
	Error        string    `json:"error,omitempty"`
	Workers      []Branch  `json:"workers,omitempty"`
}

// Forest is ds (newest first, as Store.List answers) as trees: the
// workers of an orchestrator listed among ds are its branch's Workers,
// not trees of their own; an orchestrator's workers whose delegation is
// not among ds are its progress's (WorkerProgress). Costs are from
// prices where a result has none.
func Forest(ds []Delegation, prices Prices) []Tree {
	listed := map[string]bool{} // child ids
	workers := map[string][]Delegation{}
	for _, d := range ds {
		for _, c := range d.Children {
			listed[c.ID] = true
		}
		if d.Orchestrator != "" {
			workers[d.Orchestrator] = append(workers[d.Orchestrator], d)
		}
	}
	f := forest{workers: workers, prices: prices}
	trees := []Tree{}
	for _, d := range ds {
		if d.Orchestrator != "" && listed[d.Orchestrator] {
			continue // under its orchestrator
		}
		v := ViewOf(d)
		t := Tree{ID: d.ID, Status: v.Status, Conv: d.Conv, Source: d.Source, Orchestrator: d.Orchestrator,
			Done: v.Done, Total: v.Total, CreatedAt: d.CreatedAt, Children: []Branch{}}
		for _, c := range d.Children {
			t.Children = append(t.Children, f.branch(c, 0))
		}
		trees = append(trees, t)
	}
	return trees
}

// forest builds a Forest's branches.
type forest struct {
	workers map[string][]Delegation // by orchestrator id, oldest last
	prices  Prices
}

// maxTreeDepth bounds how deep workers nest in a Tree, beyond any
// delegation.max_spawn_depth.
const maxTreeDepth = 8

// branch is c's Branch, its workers under it, depth deep.
func (f forest) branch(c Child, depth int) Branch {
	b := Branch{ID: c.ID, Delegation: c.Delegation, Goal: c.Goal, Role: c.Role, Status: c.Status,
		StartedAt: c.StartedAt, EndedAt: c.EndedAt, LastActivity: c.Progress.LastActivity}
	p := c.Progress
	var cost *float64
	if r := c.Result; r != nil {
		p.APICalls, p.InputTokens, p.OutputTokens = r.APICalls, r.InputTokens, r.OutputTokens
		p.Model = cmp.Or(r.Model, p.Model)
		cost = r.CostUSD
		b.Summary, b.Error = excerpt(r.Summary, treeSummaryMax), r.Error
	} else {
		b.Owner, b.CurrentTool = c.Owner, p.CurrentTool
	}
	if cost == nil {
		cost = f.prices.Cost(p.Model, p.InputTokens, p.OutputTokens)
	}
	b.APICalls, b.InputTokens, b.OutputTokens, b.Model, b.CostUSD = p.APICalls, p.InputTokens, p.OutputTokens, p.Model, cost
	b.Tokens = p.InputTokens + p.OutputTokens
	if depth >= maxTreeDepth {
		return b
	}
	seen := map[string]bool{}
	ws := f.workers[c.ID]
	for i := len(ws) - 1; i >= 0; i-- { // oldest call's workers first
		for _, w := range ws[i].Children {
			b.Workers = append(b.Workers, f.branch(w, depth+1))
			seen[w.ID] = true
		}
	}
	for _, w := range c.Progress.Workers {
		if !seen[w.ID] {
			b.Workers = append(b.Workers, Branch{ID: w.ID, Goal: w.Goal, Status: w.Status, APICalls: w.APICalls, CurrentTool: w.CurrentTool, Tokens: w.Tokens})
		}
	}
	return b
}
