package delegation

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/tracing"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
)

// Service is the lifecycle of delegations made outside a turn: start
// one, read it, cancel it. The HTTP API and `herald delegations` use
// it. Everything it answers is read from the store, so a handle answers
// on any instance and after a restart.
type Service struct {
	Store   Store         // required
	Signals signals.Store // required by Cancel
	// Runner is this instance's runner, woken by Start and asked first
	// by Cancel; nil where none runs (the CLI).
	Runner *Runner
	// Meta reads the parent conversation's metadata (its session); nil
	// dispatches without one.
	Meta func(ctx context.Context, conv string) (map[string]string, error)
	// MaxChildren is delegation.max_concurrent_children; 0 means 10.
	MaxChildren int
	Independent bool // delegation.independent_completions
	// Cancelled is what a cancel through this service says in each
	// child's result, naming who cancelled: "cancelled from the API",
	// "cancelled by the operator"; "" says "cancelled".
	Cancelled string
	// Files and Workspace check the files a task hands its child, as
	// delegate_task's ToolOptions do; without Files.Resolve they are
	// refused.
	Files     HandedFiles
	Workspace string
	// Prices price a running child's tokens in List; nil shows only
	// the costs results carry.
	Prices Prices
	// Transcripts are this instance's children's logs, which Transcript
	// reads; nil has none.
	Transcripts *Transcripts
	Clock       clock.Clock
}

// Request is a dispatch asked for outside a turn: Goal (with Context,
// OutputSchema, Role) for one task, or Tasks for several.
type Request struct {
	Conv   string        // the parent conversation; required
	Origin outbox.Target // where the parent's replies, and so the results, go
	User   string        // whom the completion's turn is for
	// Key, when set, names the request: a retry with the same key (in
	// the same conversation) answers the delegation the first made.
	Key          string
	Goal         string
	Context      string
	OutputSchema json.RawMessage
	Role         string
	Tasks        []Task
}

// Start validates req as delegate_task does and writes the delegation
// (Source "api"), its children pending, when they fit beside the
// conversation's pending and running ones, counted in the same write.
// Errors: Invalid (nothing to delegate, goal and tasks both, too many
// tasks, a task without a goal, a bad output_schema, a toolset the
// parent lacks (when a Runner runs here), a file outside the
// workspace and herald's files; NotFound for one not there), Conflict (the
// conversation has no place for that many children: a *Full, FullOf),
// Unavailable.
func (s *Service) Start(ctx context.Context, req Request) (Delegation, error) {
	const op = "delegation.Start"
	if err := chat.ValidateConv(op, req.Conv); err != nil {
		return Delegation{}, err
	}
	tasks, err := s.tasks(ctx, op, req)
	if err != nil {
		return Delegation{}, err
	}
	id := commandID(sessions.Inbound{Conv: req.Conv, MessageID: req.Key})
	if req.Key != "" {
		if d, err := s.Store.Delegation(ctx, id); err == nil {
			return d, nil // a retry: started the first time
		} else if !errs.Is(err, errs.NotFound) {
			return Delegation{}, err
		}
	}
	d := Delegation{
		ID: id, Conv: req.Conv, User: req.User, Origin: req.Origin,
		Source: "api", Independent: s.Independent, CreatedAt: s.now(),
		Trace: tracing.Inject(ctx, nil),
	}
	if s.Meta != nil {
		if meta, err := s.Meta(ctx, req.Conv); err == nil {
			d.Session = meta[sessions.ConvMetaSession]
		}
	}
	d.Children = childrenOf(d.ID, tasks)
	if err := s.Store.Create(ctx, Dispatch{Delegation: d, Limit: s.maxChildren()}); err != nil {
		if _, full := FullOf(err); errs.Is(err, errs.Conflict) && !full && req.Key != "" {
			// A retry that raced the first: answer what it made.
			return s.Store.Delegation(ctx, id)
		}
		return Delegation{}, err
	}
	if s.Runner != nil {
		s.Runner.Dispatched(d)
		s.Runner.Wake()
	}
	return d, nil
}

// tasks are req's tasks, checked as delegate_task checks its own.
func (s *Service) tasks(ctx context.Context, op string, req Request) ([]taskArgs, error) {
	var tasks []taskArgs
	for _, t := range req.Tasks {
		tasks = append(tasks, taskArgs(t))
	}
	tasks, err := checkTasks(op, taskArgs{Goal: req.Goal, Context: req.Context, OutputSchema: req.OutputSchema, Role: req.Role}, tasks, s.maxChildren())
	if err != nil {
		return nil, err
	}
	if s.Runner != nil {
		if err := checkToolsets(op, tasks, s.Runner.opts.Spawner.Toolsets(ctx)); err != nil {
			return nil, err
		}
	}
	return s.Files.resolve(op, tasks, s.Workspace, req.Conv)
}

// Get returns the delegation with its children as the store has them.
// Errors: NotFound, Unavailable.
func (s *Service) Get(ctx context.Context, id string) (Delegation, error) {
	return s.Store.Delegation(ctx, id)
}

// Cancel stops the delegation's children (Stopper): one not started yet
// at once in the store, one that runs on this instance at once, any
// other by a delegation.cancel signal to whichever instance runs it.
// Each ends cancelled, its result saying who cancelled it (Cancelled),
// and its partial result comes back with the others.
// It returns the delegation as it stood and the children the stop went
// to; a delegation already ended is answered as it is. Errors:
// NotFound, Unavailable.
func (s *Service) Cancel(ctx context.Context, id string) (Delegation, []string, error) {
	const op = "delegation.Cancel"
	d, err := s.Store.Delegation(ctx, id)
	if err != nil {
		return Delegation{}, nil, err
	}
	var stopped []string
	stop := Stopper{Store: s.Store, Signals: s.Signals, Runner: s.Runner}
	cause := Cancelled(cmp.Or(s.Cancelled, "cancelled"))
	for _, c := range d.Children {
		ok, err := stop.Stop(ctx, d, c, cause)
		if err != nil {
			return d, stopped, errs.Wrap(op, errs.Unavailable, err)
		}
		if ok {
			stopped = append(stopped, c.ID)
		}
	}
	return d, stopped, nil
}

// List returns the delegations q selects, newest first, as trees: each
// child with its progress or result and its cost, an orchestrator's
// workers under it (Forest). Errors: Unavailable.
func (s *Service) List(ctx context.Context, q Query) ([]Tree, error) {
	ds, err := s.Store.List(ctx, q)
	if err != nil {
		return nil, err
	}
	return Forest(ds, s.Prices), nil
}

// StopChild stops child id of d (Stopper), as Cancel stops each of d's
// children, and reports whether it was not terminal. Errors: NotFound
// (d has no such child), Unavailable.
func (s *Service) StopChild(ctx context.Context, d Delegation, id string) (bool, error) {
	const op = "delegation.StopChild"
	c, ok := childOf(d, id)
	if !ok {
		return false, errs.E(op, errs.NotFound, "%s has no sub-agent %q", d.ID, id)
	}
	stop := Stopper{Store: s.Store, Signals: s.Signals, Runner: s.Runner}
	return stop.Stop(ctx, d, c, Cancelled(cmp.Or(s.Cancelled, "cancelled")))
}

// ChildLog is a child's transcript as this instance keeps it.
type ChildLog struct {
	Delegation string `json:"delegation_id"`
	Child      string `json:"subagent_id"`
	Text       string `json:"transcript"`
	// Truncated says the log's start is left out: Text is its end.
	Truncated bool `json:"truncated,omitempty"`
}

// Transcript reads the transcript of child id of d from Transcripts:
// an orchestrator's worker's are the lines its orchestrator's log holds
// of it. Errors: NotFound (d has no such child, or this instance keeps
// no transcript of it: transcripts are kept where a child runs),
// Unavailable.
func (s *Service) Transcript(ctx context.Context, d Delegation, id string) (ChildLog, error) {
	const op = "delegation.Transcript"
	c, ok := childOf(d, id)
	if !ok {
		return ChildLog{}, errs.E(op, errs.NotFound, "%s has no sub-agent %q", d.ID, id)
	}
	// A worker's lines are in the log of the child at the top of its
	// orchestrators.
	top := c
	for depth := 0; d.Orchestrator != "" && depth < maxTreeDepth; depth++ {
		o, err := s.Store.Child(ctx, d.Orchestrator)
		if err != nil {
			return ChildLog{}, err
		}
		if d, err = s.Store.Delegation(ctx, o.Delegation); err != nil {
			return ChildLog{}, err
		}
		top = o
	}
	text, cut, err := s.Transcripts.Read(top.Delegation, top.Index)
	if err != nil {
		if errs.Is(err, errs.NotFound) {
			return ChildLog{}, errs.E(op, errs.NotFound, "no transcript of %s on this instance: transcripts are kept where a sub-agent runs", id)
		}
		return ChildLog{}, err
	}
	if top.ID != c.ID {
		text = workerLines(text, c.ID)
	}
	return ChildLog{Delegation: c.Delegation, Child: c.ID, Text: text, Truncated: cut}, nil
}

// childOf is child id of d.
func childOf(d Delegation, id string) (Child, bool) {
	for _, c := range d.Children {
		if c.ID == id {
			return c, true
		}
	}
	return Child{}, false
}

// View is a delegation as the lifecycle's edges show it: its own
// status and how many of its children are done beside the children.
type View struct {
	ID        string    `json:"id"`
	Status    Status    `json:"status"`
	Conv      string    `json:"conv"`
	Source    string    `json:"source"`
	Done      int       `json:"done"`
	Total     int       `json:"total"`
	CreatedAt time.Time `json:"created_at"`
	Children  []Child   `json:"children"`
}

// ViewOf is d's View.
func ViewOf(d Delegation) View {
	v := View{ID: d.ID, Status: d.Status(), Conv: d.Conv, Source: d.Source, Total: len(d.Children), CreatedAt: d.CreatedAt, Children: d.Children}
	if v.Children == nil {
		v.Children = []Child{}
	}
	for _, c := range d.Children {
		if c.Status.Terminal() {
			v.Done++
		}
	}
	return v
}

// noSchema reports whether raw is no output schema: empty or null.
func noSchema(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

func (s *Service) maxChildren() int {
	if s.MaxChildren < 1 {
		return 10
	}
	return s.MaxChildren
}

func (s *Service) now() time.Time {
	if s.Clock == nil {
		return time.Now()
	}
	return s.Clock.Now()
}
