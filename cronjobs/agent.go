package cronjobs

import (
	"context"
	"errors"

	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
	"github.com/heraldgw/herald/tools"
)

// excluded are the tools a job's fire runs without: it has no user to
// ask, no conversation of its own to take results back or to schedule
// from, its reply is its report, and it has no turn's commit to write
// notes with (memory) or to queue messages and files on (send_message,
// send_file).
var excluded = []string{ToolName, "clarify", "send_message", "send_file", delegation.ToolName, "memory"}

// TurnAgent runs a job's prompt as one turn of a session of its own:
// no history, base's model and settings (the job's model when it names
// one), the tools of toolsets (or those the job names) in registry but
// those a fire runs without, the origin's user for the per-user
// features. The turn's reply is the report.
func TurnAgent(base *agent.Agent, registry *tools.Registry, toolsets []string) AgentFunc {
	return func(ctx context.Context, j Job, r Run, prompt string) (string, error) {
		sets := toolsets
		if len(j.Toolsets) > 0 {
			sets = j.Toolsets
		}
		set, err := registry.Set(sets, excluded...)
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
		out, err := a.Run(ctx, &in)
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
