package gateway

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/delivery"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
	"github.com/heraldgw/herald/tools"
)

// cronExcluded are the tools a job's fire runs without: it has no user to
// ask, no conversation of its own to take results back or to schedule
// from, its reply is its report, and it has no turn's commit to write
// notes with (memory).
var cronExcluded = []string{cronjobs.ToolName, "clarify", "send_message", delegation.ToolName, "memory"}

// cronParts are the scheduled jobs' pieces: the manager every way of
// changing jobs goes through, and the scheduler that fires them.
type cronParts struct {
	manager   cronjobs.Manager
	scheduler *cronjobs.Scheduler
}

// CronTargets is where the jobs of a gateway with cfg's platforms can
// deliver: each platform's home channel, and the platforms served (the
// local API always is).
func CronTargets(cfg config.Config, platforms []string) cronjobs.Targets {
	return cronjobs.Targets{
		Homes: map[string]string{
			"telegram": cfg.Platforms.Telegram.HomeChannel,
			"slack":    cfg.Platforms.Slack.HomeChannel,
			"discord":  cfg.Platforms.Discord.HomeChannel,
		},
		Platforms: append([]string{api.Platform}, platforms...),
	}
}

// Toolsets are the tool sets the agent of a gateway with cfg runs with:
// the core tools, delegation, cron, the kanban board, and the workspace
// tools when tools.workspace is set.
func Toolsets(cfg config.Config) []string {
	sets := []string{tools.Core, delegation.Toolset, cronjobs.Toolset, kanban.Toolset}
	if cfg.Tools.Workspace != "" {
		sets = append(sets, tools.Workspace)
	}
	return sets
}

// CronOutputs is where the runs' outputs are kept: $HERALD_HOME/cron/output.
func CronOutputs(cfg config.Config) cronjobs.Outputs {
	return cronjobs.Outputs{Dir: filepath.Join(cfg.Home, "cron", "output")}
}

// buildCron makes the cron parts and registers cronjob in registry and
// /cron in commands. Fires run on runner's model and settings, with the
// tools of toolsets minus cronExcluded (or those a job names).
func (g *Gateway) buildCron(registry *tools.Registry, commands *sessions.Commands, runner *agent.Agent, toolsets []string) (*cronParts, error) {
	p := &cronParts{}
	var platforms []string
	for _, a := range g.opts.Adapters {
		platforms = append(platforms, a.Platform())
	}
	targets := CronTargets(g.cfg, platforms)
	p.manager = cronjobs.Manager{
		Store:      g.db.Cron(),
		Outputs:    CronOutputs(g.cfg),
		Targets:    targets,
		Timezone:   g.cfg.Cron.Timezone,
		Toolsets:   toolsets,
		ScriptsDir: g.cfg.CronScriptsDir(),
		Changed:    func() { p.wake() },
		Clock:      g.clock,
	}
	if err := registry.Register(cronjobs.Toolset, cronjobs.Tool(p.manager)); err != nil {
		return nil, err
	}
	if err := cronjobs.RegisterCommands(commands, p.manager); err != nil {
		return nil, err
	}
	if !g.cfg.Cron.Enabled {
		return p, nil
	}
	var err error
	p.scheduler, err = cronjobs.NewScheduler(cronjobs.SchedulerOptions{
		Store:         g.db.Cron(),
		Once:          g.db.Once(),
		Outbox:        delivery.NotifyingOutbox(g.db.Outbox(), func() { g.delivery.Notify() }),
		Agent:         cronAgent(runner, registry, toolsets),
		Targets:       targets,
		Outputs:       CronOutputs(g.cfg),
		Name:          g.opts.Name,
		ScriptTimeout: g.cfg.Cron.ScriptTimeout,
		Env:           SubprocessEnv(g.cfg),
		Redact:        g.redact.String,
		// A fire's claim follows the conversations' lease: a deployment
		// that hands a dead instance's turns over quickly hands its
		// fires over as quickly.
		ClaimTTL: g.cfg.Store.LeaseTTL,
		Clock:    g.clock,
		Logger:   g.log.With("part", "cron"),
	})
	return p, err
}

// wake tells the scheduler, when it runs here, that a job changed.
func (p *cronParts) wake() {
	if p.scheduler != nil {
		p.scheduler.Wake()
	}
}

// committed wakes the scheduler for the jobs a turn's commit created.
func (p *cronParts) committed(c sessions.Committed) {
	for _, w := range c.Writes {
		if _, ok := w.(cronjobs.Create); ok {
			p.wake()
			return
		}
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

// cronAgent runs a job's prompt as one turn of a session of its own:
// no history, the job's model and tools, the origin's user for the
// per-user features. The turn's reply is the report.
func cronAgent(base *agent.Agent, registry *tools.Registry, toolsets []string) cronjobs.AgentFunc {
	return func(ctx context.Context, j cronjobs.Job, r cronjobs.Run, prompt string) (string, error) {
		sets := toolsets
		if len(j.Toolsets) > 0 {
			sets = j.Toolsets
		}
		set, err := registry.Set(sets, cronExcluded...)
		if err != nil {
			return "", err
		}
		a := *base
		a.Tools = set
		if j.Model != "" {
			a.Model = j.Model
		}
		conv := "cron:" + j.ID + ":" + r.ID
		in := sessions.TurnInput{
			Conv:  conv,
			Entry: sessions.Entry{ID: r.ID, Inbound: sessions.Inbound{Conv: conv, Text: prompt, Kind: sessions.KindSynthetic}},
		}
		if j.Origin != nil {
			in.User = j.Origin.User
		}
		out, err := a.Run(ctx, in)
		if err != nil {
			return "", err
		}
		var reply string
		for _, m := range out.Outbox {
			if m.Kind == agent.KindReply {
				reply = m.Text
			}
		}
		if out.End == sessions.TurnModelError {
			return "", errors.New(reply)
		}
		return reply, nil
	}
}

// committedTo tells each of fs of a turn's committed writes.
func committedTo(fs ...func(sessions.Committed)) func(sessions.Committed) {
	return func(c sessions.Committed) {
		for _, f := range fs {
			f(c)
		}
	}
}
