package gateway

import (
	"context"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/tools"
)

// controllerParts are the session controllers' pieces: the commands'
// view of them, the runner the turns go through and the scheduler that
// fires what is due.
type controllerParts struct {
	set       controllers.Set
	runner    *controllers.Runner
	scheduler *controllers.Scheduler
}

// buildControllers registers /goal, /subgoal, /loop and /heartbeat in
// commands and makes the runner around agent: the goal's judge runs on
// auxiliary.goal's model, else on main.
func (g *Gateway) buildControllers(commands *sessions.Commands, agent sessions.TurnRunner, main llm.Client, workspace *tools.WorkspaceTools) (*controllerParts, error) {
	store := g.db.Controllers()
	p := &controllerParts{}
	p.set = controllers.Set{
		Goals:      &controllers.Goals{Store: store, MaxTurns: g.cfg.Goal.MaxTurns},
		Loops:      &controllers.Loops{Store: store, MinInterval: g.cfg.Loop.MinInterval},
		Heartbeats: &controllers.Heartbeats{Store: store, MinInterval: g.cfg.Heartbeat.MinInterval},
		Changed:    p.changed,
	}
	if err := controllers.RegisterCommands(commands, p.set); err != nil {
		return nil, err
	}
	client, err := g.auxClient(g.cfg.Auxiliary.Goal, "auxiliary.goal.api_key", nil, main)
	if err != nil {
		return nil, err
	}
	model := g.cfg.Auxiliary.Goal.Fallback(g.cfg.Model).Model
	judge := func(ctx context.Context, system, user string) (string, error) {
		resp, err := client.Complete(ctx, llm.Request{Model: model, Messages: []chat.Message{
			{Role: "system", Content: system}, {Role: "user", Content: user},
		}})
		if err != nil {
			return "", err
		}
		return resp.Message.Content, nil
	}
	ended := func(ctx context.Context, conv string, w controllers.Wait) bool {
		switch {
		case w.Delegation != "":
			d, err := g.db.Delegations().Delegation(ctx, w.Delegation)
			// One that is not there will not end: the wait is over.
			return errs.Is(err, errs.NotFound) || (err == nil && d.Status().Terminal())
		case w.Process != "":
			return !workspace.ProcessRunning(conv, w.Process)
		}
		return true
	}
	p.runner, err = controllers.NewRunner(controllers.RunnerOptions{
		Agent:        agent,
		Store:        store,
		Judge:        judge,
		JudgeTimeout: g.cfg.Goal.JudgeTimeout,
		LoopMaxTicks: g.cfg.Loop.MaxTicks,
		Ended:        ended,
		Dropped:      func(k controllers.Kind) { g.metrics.controllerStale.WithLabelValues(string(k)).Inc() },
		Clock:        g.clock,
		Logger:       g.log.With("part", "controllers"),
	})
	if err != nil {
		return nil, err
	}
	p.scheduler, err = controllers.NewScheduler(controllers.SchedulerOptions{
		Store:  store,
		Once:   g.db.Once(),
		Inbox:  lateInbox{g: g},
		Outbox: notifyingOutbox{Store: g.db.Outbox(), notify: func() { g.delivery.Notify() }},
		Busy:   g.convBusy,
		Ended:  ended,
		Fired: func(k controllers.Kind, outcome string) {
			g.metrics.controllerFires.WithLabelValues(string(k), outcome).Inc()
		},
		Name: g.opts.Name,
		// A fire's claim follows the conversations' lease, as cron's.
		ClaimTTL: g.cfg.Store.LeaseTTL,
		Clock:    g.clock,
		Logger:   g.log.With("part", "controllers"),
	})
	return p, err
}

// convBusy is the scheduler's idle check: whether a turn of conv runs,
// in this process or, by the mark its worker leaves in the metadata, in
// another. Unread, the metadata says idle: the tick's turn looks again
// when it starts.
func (g *Gateway) convBusy(ctx context.Context, conv string) bool {
	if _, ok := g.turns.RunningTurn(conv); ok {
		return true
	}
	meta, err := g.db.Sessions().Meta(ctx, conv)
	return err == nil && meta[sessions.ConvMetaTurn] != ""
}

// changed is told of a change to conv's controllers made here.
func (p *controllerParts) changed(conv string) {
	if p.runner != nil {
		p.runner.Forget(conv)
	}
	p.wake()
}

// wake tells the scheduler a controller changed here.
func (p *controllerParts) wake() {
	if p.scheduler != nil {
		p.scheduler.Wake()
	}
}

// committed wakes the scheduler for the states a turn's commit wrote:
// a continuation owed fires at once.
func (p *controllerParts) committed(c sessions.Committed) {
	for _, w := range c.Writes {
		if _, ok := w.(controllers.Put); ok {
			p.wake()
			return
		}
	}
}

// lateInbox is the router, made after the scheduler.
type lateInbox struct{ g *Gateway }

func (in lateInbox) Deliver(ctx context.Context, e sessions.Inbound) error {
	return in.g.router.Deliver(ctx, e)
}
