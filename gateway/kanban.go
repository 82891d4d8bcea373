package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/tools"
)

// HeraldLane is the lane of herald's own worker agent.
const HeraldLane = "herald"

// quotaPause is how long the herald lane waits when the model provider
// says its quota is spent.
const quotaPause = 30 * time.Minute

// KanbanService is the board service over store with cfg's settings,
// its board home in $HERALD_HOME/kanban; the CLI and the gateway make
// theirs here. Completion checks run with bash in the card's workspace
// directory (or the current one), in an environment SubprocessEnv builds.
func KanbanService(store kanban.Store, cfg config.Config) *kanban.Service {
	return &kanban.Service{
		Store: store, FailureLimit: cfg.Kanban.FailureLimit, CrashGrace: cfg.Kanban.CrashGrace(), Check: completionCheck(SubprocessEnv(cfg)),
		Root: filepath.Join(cfg.Home, "kanban"), Repository: cfg.Tools.Workspace,
		AttachmentMaxBytes: cfg.Kanban.AttachmentMaxBytes,
	}
}

// completionCheck runs a card's completion check in dir with env: it
// passes when the command exits 0.
func completionCheck(env *proc.Env) func(ctx context.Context, k kanban.Card, dir string) (string, bool, error) {
	return func(ctx context.Context, k kanban.Card, dir string) (string, bool, error) {
		cmd := exec.CommandContext(ctx, "bash", "-c", k.CompletionCheck)
		cmd.Dir = dir
		cmd.Env = env.Build()
		proc.OwnGroup(cmd)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return string(out), true, nil
		case errors.As(err, &exit):
			return fmt.Sprintf("%s\n(exit %d)", out, exit.ExitCode()), false, nil
		}
		return "", false, fmt.Errorf("running the completion check %q: %w", k.CompletionCheck, err)
	}
}

// KanbanLanes are the lanes of cfg: a command for each lane that has
// one, its environment built by env (SubprocessEnv), and herald's worker
// agent (run, when set) for the lane named herald and for every lane
// without a command.
func KanbanLanes(cfg config.Kanban, env *proc.Env, run func(ctx context.Context, spec kanban.WorkerSpec, model string) error, clk clock.Clock) map[string]kanban.LaneConfig {
	lanes := map[string]kanban.LaneConfig{}
	agentLane := func(model string) kanban.LaneConfig {
		return kanban.LaneConfig{Lane: kanban.FuncLane{Run: func(ctx context.Context, spec kanban.WorkerSpec) error {
			return run(ctx, spec, model)
		}}}
	}
	if run != nil {
		lanes[HeraldLane] = agentLane("")
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Lanes)) {
		l := cfg.Lanes[name]
		if l.Command == "" {
			if run != nil {
				lc := agentLane(l.Model)
				lc.MaxConcurrent = l.MaxConcurrent
				lanes[name] = lc
			}
			continue
		}
		given := make([]string, 0, len(l.Env))
		for _, k := range slices.Sorted(maps.Keys(l.Env)) {
			given = append(given, k+"="+l.Env[k])
		}
		lanes[name] = kanban.LaneConfig{
			Lane:              kanban.CommandLane{Command: l.Command, Args: l.Args, Env: given, Inherit: env, Workdir: l.Workdir, Clock: clk},
			MaxConcurrent:     l.MaxConcurrent,
			ExitZeroCompletes: l.ExitZeroCompletes,
		}
	}
	return lanes
}

// kanbanParts are the boards' pieces in a gateway.
type kanbanParts struct {
	service    *kanban.Service
	dispatcher *kanban.Dispatcher
	notifier   *kanban.Notifier
	tokens     kanban.Tokens
}

// KanbanTokens are the worker tokens of a gateway with cfg. Their key
// comes from http.api_key, so every instance that shares it checks the
// tokens of all; with no API key each process has a key of its own, and
// a worker reports to the gateway that started it.
func KanbanTokens(cfg config.Config) kanban.Tokens {
	if cfg.HTTP.APIKey != "" {
		sum := sha256.Sum256([]byte("herald kanban worker tokens\x00" + cfg.HTTP.APIKey))
		return kanban.Tokens{Key: sum[:]}
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return kanban.Tokens{Key: key}
}

// buildKanban makes the board service, registers the board tools in
// registry and /kanban in commands, makes the notifier and, with kanban.enabled, makes the dispatcher, whose herald
// lane runs spawner's child agent on a card with the tools of toolsets
// and the worker's.
func (g *Gateway) buildKanban(registry *tools.Registry, commands *sessions.Commands, spawner *delegation.Spawner, toolsets []string) (*kanbanParts, error) {
	cfg := g.cfg.Kanban
	p := &kanbanParts{service: KanbanService(g.db.Kanban(), g.cfg), tokens: KanbanTokens(g.cfg)}
	p.service.Redact = g.redact.String
	if err := kanban.RegisterTools(registry, p.service, cfg.ClaimTTL()); err != nil {
		return nil, err
	}
	if err := kanban.RegisterCommands(commands, p.service); err != nil {
		return nil, err
	}
	var platforms []string
	for _, a := range g.opts.Adapters {
		platforms = append(platforms, a.Platform())
	}
	targets := CronTargets(g.cfg, platforms)
	var err error
	p.notifier, err = kanban.NewNotifier(kanban.NotifierOptions{
		Store:   g.db.Kanban(),
		Outbox:  notifyingOutbox{Store: g.db.Outbox(), notify: func() { g.delivery.Notify() }},
		Resolve: func(target string) ([]outbox.Target, error) { return targets.Resolve(target, nil) },
		Clock:   g.clock,
		Logger:  g.log.With("part", "kanban-notify"),
	})
	if err != nil {
		return nil, err
	}
	if !cfg.Enabled {
		return p, nil
	}
	workerTools, err := registry.Set(append(slices.Clone(toolsets), kanban.WorkerToolset))
	if err != nil {
		return nil, err
	}
	spawner = spawner.WithTools(workerTools)
	run := func(ctx context.Context, spec kanban.WorkerSpec, model string) error {
		return runCardAgent(ctx, p.service, spawner.WithWork(spec.Workspace, model), spec)
	}
	p.dispatcher, err = kanban.NewDispatcher(kanban.DispatcherOptions{
		Service:         p.service,
		Lanes:           KanbanLanes(cfg, SubprocessEnv(g.cfg), run, g.clock),
		Name:            g.opts.Name,
		Interval:        cfg.DispatchInterval(),
		ClaimTTL:        cfg.ClaimTTL(),
		MaxSpawn:        cfg.MaxSpawn,
		DefaultAssignee: cfg.DefaultAssignee,
		ReviewDispatch:  cfg.ReviewDispatch,
		ReviewLane:      cfg.ReviewLane,
		RateLimitWait:   cfg.RateLimitWait(),
		// A worker may report over the API, from any machine, with a
		// token good for its card's claim only.
		Env: func(k kanban.Card, token int64) []string {
			return []string{"HERALD_KANBAN_API_URL=http://" + g.Addr(), "HERALD_KANBAN_TOKEN=" + p.tokens.Mint(k.ID, token)}
		},
		Signals: g.db.Signals(),
		Clock:   g.clock,
		Logger:  g.log.With("part", "kanban"),
	})
	if err != nil {
		return nil, err
	}
	p.service.Ready = func() {
		p.dispatcher.Wake()
		p.notifier.Wake()
	}
	return p, nil
}

// nudgeText is what a worker agent that ended its reply without
// reporting on its card is told, once.
const nudgeText = "You ended your reply without calling kanban_complete or kanban_block, so card %s is still open and yours. Call kanban_complete now with a summary of what you did, or kanban_block with what is missing. A reply without one of them fails the run."

// runCardAgent works a card with herald's child agent: its title is the
// goal, its body and comments the context. The agent reports with its
// worker tools (kanban_complete, kanban_block, kanban_request_review);
// one whose final reply leaves the card open is told so once, and when
// it still does not report, the run ends as a protocol violation
// (kanban.NoReportError), as a command lane's silent exit 0 does. A
// review run gives its verdict in its reply's last line. Any other end
// is the run's error.
func runCardAgent(ctx context.Context, svc *kanban.Service, spawner *delegation.Spawner, spec kanban.WorkerSpec) error {
	k := spec.Card
	var b strings.Builder
	fmt.Fprintf(&b, "This is card %s of kanban board %s.", k.ID, spec.Board)
	if spec.Review {
		b.WriteString(" Review the work done on it (its result and comments below). End your reply with a line of its own: APPROVED when it is right, or CHANGES REQUESTED followed by what to change.")
	}
	if k.Body != "" {
		b.WriteString("\n\n" + k.Body)
	}
	if k.Result != nil && k.Result.Summary != "" {
		b.WriteString("\n\nWhat its worker reported:\n" + k.Result.Summary)
	}
	if comments, err := svc.Store.Comments(ctx, k.ID); err == nil {
		for _, c := range comments {
			fmt.Fprintf(&b, "\n\nComment by %s: %s", c.Author, c.Text)
		}
	}
	if spec.Workspace != "" {
		b.WriteString("\n\nIts workspace directory is " + spec.Workspace + ".")
	}
	if len(spec.Attachments) > 0 {
		b.WriteString("\n\nFiles attached to it:")
		for _, p := range spec.Attachments {
			b.WriteString("\n- " + p)
		}
	}
	child := delegation.Child{ID: "kb_" + spec.Run, Task: delegation.Task{Goal: k.Title, Context: b.String()}}
	if spec.Review {
		child.Role = delegation.RoleReviewer
	}
	ctx = kanban.WithWorker(ctx, kanban.WorkerCard{Card: k.ID, Board: spec.Board, Token: spec.Token})
	// holds reports whether the claim is still open: the agent has not
	// reported with its tools (complete, block, review).
	holds := func(ctx context.Context) bool {
		now, err := svc.Store.Card(ctx, k.ID)
		return err != nil || (now.Claim != nil && now.Claim.Token == spec.Token)
	}
	if !spec.Review {
		spawner = spawner.WithNudge(func(ctx context.Context) string {
			if !holds(ctx) {
				return ""
			}
			return fmt.Sprintf(nudgeText, k.ID)
		})
	}
	res := spawner.Run(ctx, child, 1, nil)
	if !holds(ctx) {
		return nil
	}
	switch res.ExitReason {
	case "rate_limited":
		return &kanban.RateLimitedError{After: time.Duration(res.RetryAfterSeconds) * time.Second, Reason: res.Error}
	case "quota_exhausted":
		// No reset is reported: the lane waits as long as its breaker
		// would make it.
		return &kanban.RateLimitedError{After: quotaPause, Reason: res.Error}
	}
	if res.Status != delegation.StatusCompleted {
		return fmt.Errorf("the worker agent ended %s: %s", res.Status, strings.TrimSpace(res.Error+" "+res.ExitReason))
	}
	if !spec.Review {
		did := "the worker agent ended without calling kanban_complete or kanban_block, also after it was reminded"
		if res.ExitReason == "max_iterations" {
			did = "the worker agent used up its iterations without calling kanban_complete or kanban_block"
		}
		return &kanban.NoReportError{Detail: did, LastReply: res.Summary}
	}
	if !approved(res.Summary) {
		_, err := svc.RequestChanges(ctx, k.ID, spec.Token, res.Summary, "herald")
		return err
	}
	_, err := svc.Complete(ctx, k.ID, spec.Token, kanban.Result{Summary: res.Summary}, "herald")
	return err
}

// approved reports whether a review's last line approves.
func approved(review string) bool {
	lines := strings.Split(strings.TrimSpace(review), "\n")
	last := strings.ToUpper(strings.TrimSpace(lines[len(lines)-1]))
	return strings.HasPrefix(strings.Trim(last, "*_ #"), "APPROVED")
}
