package cronjobs

import (
	"context"
	"time"

	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
)

// Assembly is what cron's capability is made with: what every
// capability is, and cron's own parts.
type Assembly interface {
	capability.Assembled
	Cron() Store
	// Agent is the conversations' agent, whose model and settings
	// fires run on.
	Agent() *agent.Agent
	// ServeCron adds the local API's cron routes, served by jobs.
	ServeCron(jobs Manager)
}

// parts are the scheduled jobs' pieces: the manager every way of
// changing jobs goes through, and the scheduler that fires them.
type parts struct {
	manager   Manager
	scheduler *Scheduler
}

// Capability is the scheduled jobs as a gateway runs them: it registers
// cronjob, /cron and the local API's cron routes and,
// with cron.enabled, fires the jobs here. Fires run on the agent's model
// and settings, with the tools of the conversations' tool sets (or those
// a job names) but those a fire runs without.
func Capability(as Assembly) (*capability.Capability, error) {
	a := as.Assembly()
	p := &parts{}
	targets := TargetsFor(a.Config, a.Platforms())
	p.manager = ManagerFor(a.Config, as.Cron(), a.Platforms())
	p.manager.Changed = func() { p.wake() }
	p.manager.Clock = a.Clock
	if err := a.Registry.Register(Toolset, Tool(p.manager)); err != nil {
		return nil, err
	}
	if err := RegisterCommands(a.Commands, p.manager); err != nil {
		return nil, err
	}
	c := &capability.Capability{
		Settled: p.settled,
		// A job a turn's commit created may be due before the next poll.
		Committed: map[string]func(sessions.Committed, sessions.Write){
			WriteCreate: func(_ sessions.Committed, w sessions.Write) {
				if c, ok := w.(Create); ok {
					p.manager.Made(c.Job)
					return
				}
				p.wake()
			},
		},
	}
	as.ServeCron(p.manager)
	if !a.Config.Cron.Enabled {
		return c, nil
	}
	var err error
	p.scheduler, err = NewScheduler(SchedulerOptions{
		Store:         as.Cron(),
		Once:          a.Store.Once(),
		Outbox:        a.Outbox,
		Agent:         TurnAgent(as.Agent(), a.Registry, a.Toolsets),
		Targets:       targets,
		Outputs:       OutputsFor(a.Config),
		Name:          a.Name,
		ScriptTimeout: a.Config.Cron.ScriptTimeout,
		ScriptsDir:    a.Config.CronScriptsDir(),
		Env:           a.Config.SubprocessEnv(),
		Redact:        a.Redact,
		// A fire's claim follows the conversations' lease: a deployment
		// that hands a dead instance's turns over quickly hands its
		// fires over as quickly.
		ClaimTTL: a.Config.Store.LeaseTTL,
		Clock:    a.Clock,
		Logger:   a.Logger.With("part", "cron"),
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
func (p *parts) wake() {
	if p.scheduler != nil {
		p.scheduler.Wake()
	}
}

// settled records how a report's delivery ended on its run and job.
func (p *parts) settled(m outbox.Message, accepted bool, reason string) {
	if p.scheduler == nil || m.Kind != KindReport {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.scheduler.Delivered(ctx, m, accepted, reason)
}
