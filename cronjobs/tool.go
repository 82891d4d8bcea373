package cronjobs

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/tools"
)

// ToolName is the cron tool's name; Toolset the toolset it is in.
const (
	ToolName = "cronjob"
	Toolset  = "cron"
)

// WriteCreate is the commit write of a job the cronjob tool made: the
// job is written with the turn that made it, or not at all.
const WriteCreate = "cron.create"

// Create is a new job carried by a turn's commit (sessions.Write).
type Create struct{ Job Job }

// WriteKind implements sessions.Write.
func (Create) WriteKind() string { return WriteCreate }

const toolSchema = `{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["create", "list", "update", "pause", "resume", "remove", "run"],
      "description": "create a job; list this conversation's jobs; update, pause, resume, remove one; run one now."},
    "job_id": {"type": "string", "description": "The job, for every action but create and list."},
    "name": {"type": "string", "description": "A short name; reports are headed by it."},
    "schedule": {"type": "string", "description": "When it runs: 30m / 2h / 1d (once, from now), every 30m (repeating), a 5-field cron expression like \"0 9 * * 1-5\", @daily, or an ISO time like 2026-12-03T09:00."},
    "prompt": {"type": "string", "description": "What the agent is asked at each run, in a fresh session that sees none of this conversation: make it self-contained."},
    "deliver": {"type": "string", "description": "Where reports go: origin (this chat, the default), local (saved only), telegram / slack / discord (that platform's home channel), platform:chat[:thread], or a comma list."},
    "script": {"type": "string", "description": "The name of a script in the gateway's scripts directory (cron.scripts_dir; no other is taken), run before the agent; its output is given to the agent (a last line {\"wakeAgent\": false} skips the agent)."},
    "no_agent": {"type": "boolean", "description": "Deliver the script's output itself, with no agent."},
    "repeat": {"type": "integer", "description": "Run this many times, then stop; 0 or less: forever."},
    "timezone": {"type": "string", "description": "The IANA zone of the schedule, e.g. Europe/Berlin; default the gateway's."}
  },
  "required": ["action"],
  "additionalProperties": false
}`

type toolArgs struct {
	Action   string  `json:"action"`
	JobID    string  `json:"job_id"`
	Name     *string `json:"name"`
	Schedule *string `json:"schedule"`
	Prompt   *string `json:"prompt"`
	Deliver  *string `json:"deliver"`
	Script   string  `json:"script"`
	NoAgent  bool    `json:"no_agent"`
	Repeat   *int    `json:"repeat"`
	Timezone *string `json:"timezone"`
}

// Tool returns the cronjob tool. A job it creates is written with the
// turn's commit (Create), remembering the conversation as its origin;
// the other actions act on the jobs of the caller's conversation only —
// another's answers "not found".
func Tool(m Manager) tools.Tool {
	return tools.Tool{
		Name:        ToolName,
		Description: "Schedule jobs that run later or repeatedly, each in a fresh session, and deliver their report to a chat. Use it when the user asks for something at a time or on a schedule (a daily summary, a reminder, a check every hour).",
		Schema:      json.RawMessage(toolSchema),
		Handler: tools.Func(func(ctx context.Context, turn *tools.Turn, a toolArgs) (tools.Result, error) {
			return m.tool(ctx, turn, a)
		}),
	}
}

func (m Manager) tool(ctx context.Context, turn *tools.Turn, a toolArgs) (tools.Result, error) {
	const op = "cronjobs.tool"
	switch a.Action {
	case "create":
		script, err := m.agentScript(a.Script)
		if err != nil {
			return tools.Result{}, err
		}
		spec := Spec{
			Name: deref(a.Name), Schedule: deref(a.Schedule), Prompt: deref(a.Prompt), Deliver: deref(a.Deliver),
			Script: script, NoAgent: a.NoAgent, Timezone: deref(a.Timezone),
			Origin:    &Origin{Conv: turn.Conv, Platform: turn.Origin.Platform, Chat: turn.Origin.Chat, Thread: turn.Origin.Thread, User: turn.User},
			CreatedBy: turn.User,
		}
		if a.Repeat != nil {
			spec.Repeat = *a.Repeat
		}
		if spec.Schedule == "" {
			return tools.Result{}, errs.E(op, errs.Invalid, "create needs a schedule")
		}
		j, err := m.New(spec)
		if err != nil {
			return tools.Result{}, err
		}
		turn.Write(Create{Job: j})
		return tools.JSON(map[string]any{"status": "created", "job": Brief(j)}), nil
	case "list":
		jobs, err := m.Store.Jobs(ctx)
		if err != nil {
			return tools.Result{}, err
		}
		out := []map[string]any{}
		for _, j := range jobs {
			if j.Origin != nil && j.Origin.Conv == turn.Conv {
				out = append(out, Brief(j))
			}
		}
		return tools.JSON(map[string]any{"jobs": out}), nil
	case "update", "pause", "resume", "remove", "run":
	default:
		return tools.Result{}, errs.E(op, errs.Invalid, "unknown action %q (create, list, update, pause, resume, remove, run)", a.Action)
	}
	if a.JobID == "" {
		return tools.Result{}, errs.E(op, errs.Invalid, "%s needs job_id (list gives the ids)", a.Action)
	}
	j, err := Find(ctx, m.Store, a.JobID)
	if err == nil && (j.Origin == nil || j.Origin.Conv != turn.Conv) {
		err = errs.E(op, errs.NotFound, "no cron job %q in this conversation", a.JobID)
	}
	if err != nil {
		return tools.Result{}, err
	}
	switch a.Action {
	case "update":
		j, err = m.Update(ctx, j.ID, Patch{Name: a.Name, Schedule: a.Schedule, Prompt: a.Prompt, Deliver: a.Deliver, Repeat: a.Repeat, Timezone: a.Timezone})
	case "pause":
		j, err = m.Pause(ctx, j.ID)
	case "resume":
		j, err = m.Resume(ctx, j.ID)
	case "remove":
		j, err = m.Remove(ctx, j.ID)
	case "run":
		j, err = m.RunNow(ctx, j.ID)
	}
	if err != nil {
		return tools.Result{}, err
	}
	return tools.JSON(map[string]any{"status": a.Action + " done", "job": Brief(j)}), nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Brief is a job as lists show it.
func Brief(j Job) map[string]any {
	b := map[string]any{
		"id": j.ID, "name": j.Name, "schedule": j.Schedule.String(), "state": j.State,
		"enabled": j.Enabled, "deliver": deliverOrDefault(j),
	}
	if !j.NextRunAt.IsZero() {
		b["next_run_at"] = j.NextRunAt.UTC().Format(time.RFC3339)
	}
	if !j.LastRunAt.IsZero() {
		b["last_run_at"] = j.LastRunAt.UTC().Format(time.RFC3339)
		b["last_status"] = j.LastStatus
	}
	if j.LastError != "" {
		b["last_error"] = j.LastError
	}
	if j.LastDeliveryError != "" {
		b["last_delivery_error"] = j.LastDeliveryError
	}
	if j.Repeat.Times > 0 {
		b["repeat"] = map[string]int{"times": j.Repeat.Times, "completed": j.Repeat.Completed}
	}
	return b
}

func deliverOrDefault(j Job) string {
	if strings.TrimSpace(j.Deliver) != "" {
		return j.Deliver
	}
	if j.Origin != nil && j.Origin.Platform != "" {
		return TargetOrigin
	}
	return TargetLocal
}

var _ sessions.Write = Create{}
