package gateway

import (
	"context"
	"github.com/heraldgw/herald/capability"
	"time"

	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// cronParts are the scheduled jobs' pieces: the manager every way of
// changing jobs goes through, and the scheduler that fires them.
type cronParts struct {
	manager   cronjobs.Manager
	scheduler *cronjobs.Scheduler
}

// newCron is the scheduled jobs: it registers cronjob and /cron and,
// with cron.enabled, fires the jobs here. Fires run on the agent's model
// and settings, with the tools of the conversations' tool sets (or those
// a job names) but those a fire runs without.
func newCron(a *assembly) (*capability.Capability, error) {
	p := &cronParts{}
	targets := a.targets()
	p.manager = cronjobs.ManagerFor(a.cfg, a.db.Cron(), a.served())
	p.manager.Changed = func() { p.wake() }
	p.manager.Clock = a.clock
	if err := a.registry.Register(cronjobs.Toolset, cronjobs.Tool(p.manager)); err != nil {
		return nil, err
	}
	if err := cronjobs.RegisterCommands(a.commands, p.manager); err != nil {
		return nil, err
	}
	c := &capability.Capability{
		Settled: p.settled,
		// A job a turn's commit created may be due before the next poll.
		Committed: map[string]func(sessions.Committed, sessions.Write){
			cronjobs.WriteCreate: func(sessions.Committed, sessions.Write) { p.wake() },
		},
	}
	a.serve(api.CronRoutes(p.manager))
	if !a.cfg.Cron.Enabled {
		return c, nil
	}
	var err error
	p.scheduler, err = cronjobs.NewScheduler(cronjobs.SchedulerOptions{
		Store:         a.db.Cron(),
		Once:          a.db.Once(),
		Outbox:        a.outbox,
		Agent:         cronjobs.TurnAgent(a.agent, a.registry, a.toolsets),
		Targets:       targets,
		Outputs:       cronjobs.OutputsFor(a.cfg),
		Name:          a.opts.Name,
		ScriptTimeout: a.cfg.Cron.ScriptTimeout,
		Env:           a.cfg.SubprocessEnv(),
		Redact:        a.redact.String,
		// A fire's claim follows the conversations' lease: a deployment
		// that hands a dead instance's turns over quickly hands its
		// fires over as quickly.
		ClaimTTL: a.cfg.Store.LeaseTTL,
		Clock:    a.clock,
		Logger:   a.log.With("part", "cron"),
	})
	if err != nil {
		return nil, err
	}
	// Fires queue their reports for the delivery worker, which stops
	// after them.
	c.Components = []capability.Component{{Name: "cron", Loop: p.scheduler}}
	return c, nil
}

// wake tells the scheduler, when it runs here, that a job changed.
func (p *cronParts) wake() {
	if p.scheduler != nil {
		p.scheduler.Wake()
	}
}

// settled records how a report's delivery ended on its run and job.
func (p *cronParts) settled(m outbox.Message, accepted bool, reason string) {
	if p.scheduler == nil || m.Kind != cronjobs.KindReport {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.scheduler.Delivered(ctx, m, accepted, reason)
}
