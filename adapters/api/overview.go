package api

import (
	"context"
	"net/http"

	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/instances"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/outbox"
)

// Overview is what GET /api/v1/overview reads: the roll of instances
// and the stores whose waiting work it counts. Instances is required; a
// nil source is left out of the answer.
type Overview struct {
	Instances instances.Store
	// Queue counts the turn queues' entries (sessions.Store has it).
	Queue interface {
		QueueDepth(ctx context.Context, limit int) (int, error)
	}
	// Outbox lists the pending messages and the dead letters.
	Outbox interface {
		Pending(ctx context.Context, limit int) ([]outbox.Message, error)
		DeadLetters(ctx context.Context, limit int) ([]outbox.Message, error)
	}
	// Approvals lists the pending approvals (approvals.Store has it).
	Approvals interface {
		PendingApprovals(ctx context.Context, conv string) ([]approvals.Approval, error)
	}
	// Delegations lists the delegations with a child not ended.
	Delegations interface {
		List(ctx context.Context, q delegation.Query) ([]delegation.Delegation, error)
	}
	// Boards lists the boards and their running cards.
	Boards boards
}

// boards lists the boards and their cards (kanban.Store has it).
type boards interface {
	Boards(ctx context.Context) ([]kanban.Board, error)
	Cards(ctx context.Context, q kanban.Query) ([]kanban.Card, error)
}

// overviewCap bounds each count of the overview: a count at the cap
// reads "at least" (More), and a large backlog does not make each of a
// live overview's reads read it whole.
const overviewCap = 100

// OverviewRoutes are the overview's route, GET /api/v1/overview (live):
// the live instances with what each did over the last minute, their sum,
// and the counts of what waits where.
func OverviewRoutes(o Overview) Routes { return overviewRoutes{o} }

type overviewRoutes struct{ o Overview }

// overviewJSON is the overview's answer.
type overviewJSON struct {
	Instances []instances.Instance `json:"instances"`
	// Minute is the instances' counts over their last minute, summed;
	// Errors is its turn, model and send failures together.
	Minute minuteJSON `json:"minute"`
	// Queues are the counts of what waits, by name: turns,
	// outbox_pending, outbox_dead, approvals_pending,
	// delegations_active, kanban_running.
	Queues map[string]countJSON `json:"queues"`
}

type minuteJSON struct {
	instances.Counts
	Errors int64 `json:"errors"`
}

// countJSON is a count, and whether there are more than it says.
type countJSON struct {
	Count int  `json:"count"`
	More  bool `json:"more,omitempty"`
}

func (o overviewRoutes) mount(s *Server) {
	s.route("GET", "/api/v1/overview", s.live(func(w http.ResponseWriter, r *http.Request) {
		v, err := o.read(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}))
}

// read reads the roll and counts each queue.
func (o overviewRoutes) read(ctx context.Context) (overviewJSON, error) {
	ins, err := o.o.Instances.Instances(ctx)
	if err != nil {
		return overviewJSON{}, err
	}
	if ins == nil {
		ins = []instances.Instance{}
	}
	total := instances.Total(ins)
	v := overviewJSON{Instances: ins, Minute: minuteJSON{Counts: total, Errors: total.Errors()}, Queues: map[string]countJSON{}}
	for _, q := range o.queues() {
		n, err := q.count(ctx)
		if err != nil {
			return overviewJSON{}, err
		}
		v.Queues[q.name] = countJSON{Count: min(n, overviewCap), More: n >= overviewCap}
	}
	return v, nil
}

// queue is one count of the overview: its name and how to read it, up
// to overviewCap.
type queue struct {
	name  string
	count func(context.Context) (int, error)
}

// queues are the counts of the sources the overview has.
func (o overviewRoutes) queues() []queue {
	var qs []queue
	if q := o.o.Queue; q != nil {
		qs = append(qs, queue{"turns", func(ctx context.Context) (int, error) { return q.QueueDepth(ctx, overviewCap) }})
	}
	if ob := o.o.Outbox; ob != nil {
		qs = append(qs,
			queue{"outbox_pending", func(ctx context.Context) (int, error) { return length(ob.Pending(ctx, overviewCap)) }},
			queue{"outbox_dead", func(ctx context.Context) (int, error) { return length(ob.DeadLetters(ctx, overviewCap)) }})
	}
	if ap := o.o.Approvals; ap != nil {
		qs = append(qs, queue{"approvals_pending", func(ctx context.Context) (int, error) { return length(ap.PendingApprovals(ctx, "")) }})
	}
	if dl := o.o.Delegations; dl != nil {
		qs = append(qs, queue{"delegations_active", func(ctx context.Context) (int, error) {
			return length(dl.List(ctx, delegation.Query{Active: true, Limit: overviewCap}))
		}})
	}
	if b := o.o.Boards; b != nil {
		qs = append(qs, queue{"kanban_running", func(ctx context.Context) (int, error) { return runningCards(ctx, b) }})
	}
	return qs
}

// length is the length of a listing, or its error.
func length[T any](list []T, err error) (int, error) { return len(list), err }

// runningCards counts the running cards of every board, up to the cap.
func runningCards(ctx context.Context, b boards) (int, error) {
	all, err := b.Boards(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, board := range all {
		if n >= overviewCap {
			break
		}
		cards, err := b.Cards(ctx, kanban.Query{Board: board.Slug, Statuses: []kanban.Status{kanban.StatusRunning}, Limit: overviewCap - n})
		if err != nil {
			return 0, err
		}
		n += len(cards)
	}
	return n, nil
}
