package gateway

import (
	"context"
	"github.com/heraldgw/herald/capability"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/sessions"
)

// controllerParts are the session controllers' pieces: the commands'
// view of them, the runner the turns go through and the scheduler that
// fires what is due.
type controllerParts struct {
	set       controllers.Set
	runner    *controllers.Runner
	scheduler *controllers.Scheduler
}

// newControllers is the session controllers: it registers /goal,
// /subgoal, /loop and /heartbeat, runs the turns through the
// controllers' runner, whose goal judge runs on auxiliary.goal's model,
// else on the main one, and, once the router exists, fires what is due
// through it.
func newControllers(a *assembly) (*capability.Capability, error) {
	store := a.db.Controllers()
	p := &controllerParts{}
	p.set = controllers.Set{
		Goals:      &controllers.Goals{Store: store, MaxTurns: a.cfg.Goal.MaxTurns},
		Loops:      &controllers.Loops{Store: store, MinInterval: a.cfg.Loop.MinInterval},
		Heartbeats: &controllers.Heartbeats{Store: store, MinInterval: a.cfg.Heartbeat.MinInterval},
		Changed:    p.changed,
	}
	if err := controllers.RegisterCommands(a.commands, p.set); err != nil {
		return nil, err
	}
	client, err := a.auxClient(a.cfg.Auxiliary.Goal, "auxiliary.goal.api_key", nil, a.model)
	if err != nil {
		return nil, err
	}
	model := a.cfg.Auxiliary.Goal.Fallback(a.cfg.Model).Model
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
			d, err := a.db.Delegations().Delegation(ctx, w.Delegation)
			// One that is not there will not end: the wait is over.
			return errs.Is(err, errs.NotFound) || (err == nil && d.Status().Terminal())
		case w.Process != "":
			return !a.workspace.ProcessRunning(conv, w.Process)
		}
		return true
	}
	p.runner, err = controllers.NewRunner(controllers.RunnerOptions{
		Agent:        a.runner,
		Store:        store,
		Judge:        judge,
		JudgeTimeout: a.cfg.Goal.JudgeTimeout,
		LoopMaxTicks: a.cfg.Loop.MaxTicks,
		Ended:        ended,
		Dropped:      func(k controllers.Kind) { a.metrics.ControllerDropped(string(k)) },
		Clock:        a.clock,
		Logger:       a.log.With("part", "controllers"),
	})
	if err != nil {
		return nil, err
	}
	// A state a turn's commit wrote may owe a continuation at once.
	c := &capability.Capability{Runner: p.runner, Committed: map[string]func(sessions.Committed, sessions.Write){
		controllers.WritePut: func(sessions.Committed, sessions.Write) { p.wake() },
	}}
	// Controllers queue their ticks through the router, as completions.
	c.Routed = func(r *sessions.Router) error {
		var err error
		p.scheduler, err = controllers.NewScheduler(controllers.SchedulerOptions{
			Store:  store,
			Once:   a.db.Once(),
			Inbox:  r,
			Outbox: a.outbox,
			Busy:   a.convBusy,
			Ended:  ended,
			Fired: func(k controllers.Kind, outcome string) {
				a.metrics.ControllerFired(string(k), outcome)
			},
			Name: a.opts.Name,
			// A fire's claim follows the conversations' lease, as cron's.
			ClaimTTL: a.cfg.Store.LeaseTTL,
			Clock:    a.clock,
			Logger:   a.log.With("part", "controllers"),
		})
		if err != nil {
			return err
		}
		c.Components = []capability.Component{{Name: "controllers", Loop: p.scheduler}}
		return nil
	}
	return c, nil
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
