package controllers

import (
	"context"

	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/sessions"
)

// Assembly is what the controllers' capability is made with: what every
// capability is, and the controllers' own parts.
type Assembly interface {
	capability.Assembled
	Controllers() Store
	// DelegationEnded reports whether the delegation a wait is on
	// ended, or is not there and so will not.
	DelegationEnded(ctx context.Context, id string) bool
}

// parts are the session controllers' pieces: the commands' view of
// them, the runner the turns go through and the scheduler that fires
// what is due.
type parts struct {
	set       Set
	runner    *Runner
	scheduler *Scheduler
}

// Capability is the session controllers as a gateway runs them: it
// registers /goal, /subgoal, /loop and /heartbeat, runs the turns
// through the controllers' runner, whose goal judge runs on
// auxiliary.goal's model, else on the main one, and, once the router
// exists, fires what is due through it.
func Capability(as Assembly) (*capability.Capability, error) {
	a := as.Assembly()
	store := as.Controllers()
	p := &parts{}
	p.set = Set{
		Goals:      &Goals{Store: store, MaxTurns: a.Config.Goal.MaxTurns},
		Loops:      &Loops{Store: store, MinInterval: a.Config.Loop.MinInterval},
		Heartbeats: &Heartbeats{Store: store, MinInterval: a.Config.Heartbeat.MinInterval},
		Changed:    p.changed,
	}
	if err := RegisterCommands(a.Commands, p.set); err != nil {
		return nil, err
	}
	client, err := a.AuxClient(a.Config.Auxiliary.Goal, "auxiliary.goal.api_key", nil, a.Model)
	if err != nil {
		return nil, err
	}
	model := a.Config.Auxiliary.Goal.Fallback(a.Config.Model).Model
	judge := func(ctx context.Context, system, user string) (string, error) {
		resp, err := client.Complete(ctx, llm.Request{Model: model, Messages: []chat.Message{
			{Role: "system", Content: system}, {Role: "user", Content: user},
		}})
		if err != nil {
			return "", err
		}
		return resp.Message.Content, nil
	}
	ended := func(ctx context.Context, conv string, w Wait) bool {
		switch {
		case w.Delegation != "":
			return as.DelegationEnded(ctx, w.Delegation)
		case w.Process != "":
			return !a.Workspace.ProcessRunning(conv, w.Process)
		}
		return true
	}
	p.runner, err = NewRunner(RunnerOptions{
		Agent:        a.Runner,
		Store:        store,
		Judge:        judge,
		JudgeTimeout: a.Config.Goal.JudgeTimeout,
		LoopMaxTicks: a.Config.Loop.MaxTicks,
		Ended:        ended,
		Dropped:      func(k Kind) { a.Metrics.ControllerDropped(string(k)) },
		Clock:        a.Clock,
		Logger:       a.Logger.With("part", "controllers"),
	})
	if err != nil {
		return nil, err
	}
	// A state a turn's commit wrote may owe a continuation at once.
	c := &capability.Capability{Runner: p.runner, Committed: map[string]func(sessions.Committed, sessions.Write){
		WritePut: func(sessions.Committed, sessions.Write) { p.wake() },
	}}
	// Controllers queue their ticks through the router, as completions.
	c.Routed = func(r *sessions.Router) error {
		var err error
		p.scheduler, err = NewScheduler(SchedulerOptions{
			Store:  store,
			Once:   a.Store.Once(),
			Inbox:  r,
			Outbox: a.Outbox,
			Busy:   a.Busy,
			Ended:  ended,
			Fired: func(k Kind, outcome string) {
				a.Metrics.ControllerFired(string(k), outcome)
			},
			Name: a.Name,
			// A fire's claim follows the conversations' lease, as cron's.
			ClaimTTL: a.Config.Store.LeaseTTL,
			Clock:    a.Clock,
			Logger:   a.Logger.With("part", "controllers"),
		})
		if err != nil {
			return err
		}
		c.Components = []capability.Component{{Name: "controllers", Loop: p.scheduler}}
		return nil
	}
	return c, nil
}

// changed is told of a change to conv's controllers made here.
func (p *parts) changed(conv string) {
	if p.runner != nil {
		p.runner.Forget(conv)
	}
	p.wake()
}

// wake tells the scheduler a controller changed here.
func (p *parts) wake() {
	if p.scheduler != nil {
		p.scheduler.Wake()
	}
}
