package cronjobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

const cronUsage = "Usage: /cron list · /cron add <schedule> <prompt> · /cron pause|resume|remove|run <id>. A schedule is 30m, 2h or 1d (once, from now), every 30m, a quoted cron expression like \"0 9 * * 1-5\", @daily, or an ISO time like 2026-12-03T09:00."

// RegisterCommands registers /cron in cmds. It acts on the jobs of the
// conversation it is sent in.
func RegisterCommands(cmds *sessions.Commands, m Manager) error {
	return cmds.Register(sessions.Command{
		Name: "cron", Args: "list|add SCHEDULE PROMPT|pause|resume|remove|run ID",
		Summary: "schedule prompts whose reports come back here", OutOfBand: true,
		Handle: func(ctx context.Context, call *sessions.CommandCall) error { return m.command(ctx, call) },
	})
}

func (m Manager) command(ctx context.Context, call *sessions.CommandCall) error {
	verb, rest, _ := strings.Cut(strings.TrimSpace(call.Args), " ")
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(verb) {
	case "", "list":
		return call.Reply(ctx, m.listText(ctx, call.In.Conv))
	case "add":
		return m.add(ctx, call, rest)
	case "pause", "resume", "remove", "run":
	default:
		return call.Reply(ctx, cronUsage)
	}
	if rest == "" {
		return call.Reply(ctx, fmt.Sprintf("Usage: /cron %s <id> (/cron list shows the ids).", verb))
	}
	j, err := Find(ctx, m.Store, rest)
	if err == nil && (j.Origin == nil || j.Origin.Conv != call.In.Conv) {
		err = errs.E("cronjobs.command", errs.NotFound, "no cron job %q in this conversation", rest)
	}
	if err == nil {
		switch strings.ToLower(verb) {
		case "pause":
			j, err = m.Pause(ctx, j.ID)
		case "resume":
			j, err = m.Resume(ctx, j.ID)
		case "remove":
			j, err = m.Remove(ctx, j.ID)
		case "run":
			j, err = m.RunNow(ctx, j.ID)
		}
	}
	if err != nil {
		return call.Reply(ctx, sessions.CommandError(err))
	}
	switch strings.ToLower(verb) {
	case "pause":
		return call.Reply(ctx, fmt.Sprintf("Paused %s (%s). /cron resume %s starts it again.", j.ID, j.Name, j.ID))
	case "resume":
		return call.Reply(ctx, fmt.Sprintf("Resumed %s (%s); next run %s.", j.ID, j.Name, when(j.NextRunAt)))
	case "remove":
		return call.Reply(ctx, fmt.Sprintf("Removed %s (%s).", j.ID, j.Name))
	}
	return call.Reply(ctx, fmt.Sprintf("Running %s (%s) now; its report comes to its targets (%s).", j.ID, j.Name, deliverOrDefault(j)))
}

// add answers /cron add <schedule> <prompt>. The job's id comes from the
// message, so a platform's redelivery of it makes no second job.
func (m Manager) add(ctx context.Context, call *sessions.CommandCall, rest string) error {
	expr, prompt := splitSchedule(rest)
	if expr == "" || prompt == "" {
		return call.Reply(ctx, cronUsage)
	}
	target := call.Target
	j, err := m.New(Spec{
		Schedule:  expr,
		Prompt:    prompt,
		Origin:    &Origin{Conv: call.In.Conv, Platform: target.Platform, Chat: target.Chat, Thread: target.Thread, User: call.In.UserKey(target.Platform)},
		CreatedBy: call.In.UserKey(target.Platform),
	})
	if err != nil {
		return call.Reply(ctx, sessions.CommandError(err))
	}
	if call.In.MessageID != "" {
		sum := sha256.Sum256([]byte(call.In.Conv + "\x00" + call.In.MessageID))
		j.ID = "job_" + hex.EncodeToString(sum[:6])
	}
	j, err = m.Store.CreateJob(ctx, j)
	if errs.Is(err, errs.Conflict) {
		return nil // a redelivery: answered the first time
	}
	if err != nil {
		return call.Reply(ctx, "I could not save the job just now; try again in a moment.")
	}
	m.Made(j)
	return call.Reply(ctx, fmt.Sprintf("Scheduled %s (%s): %s; next run %s. Reports come here.", j.ID, j.Name, j.Schedule.String(), when(j.NextRunAt)))
}

// splitSchedule cuts /cron add's arguments into the schedule and the
// prompt: a quoted schedule, "every <d>", five cron fields, or one word.
func splitSchedule(s string) (expr, prompt string) {
	s = strings.TrimSpace(s)
	if q := s[:min(len(s), 1)]; q == `"` || q == "'" {
		if end := strings.Index(s[1:], q); end >= 0 {
			return s[1 : end+1], strings.TrimSpace(s[end+2:])
		}
	}
	fields := strings.Fields(s)
	n := 1
	switch {
	case len(fields) > 2 && strings.EqualFold(fields[0], "every"):
		n = 2
	case len(fields) > 5 && looksCron(fields[:5]):
		n = 5
	}
	if len(fields) <= n {
		return "", ""
	}
	return strings.Join(fields[:n], " "), strings.Join(fields[n:], " ")
}

// looksCron reports whether fields read as a cron expression's five.
func looksCron(fields []string) bool {
	for _, f := range fields {
		if strings.Trim(f, "0123456789*/,-") != "" && !isName(f) {
			return false
		}
	}
	return true
}

// isName reports whether f is a month or weekday name field (JAN, MON-FRI).
func isName(f string) bool {
	return strings.Trim(strings.ToUpper(f), "ABCDEFGHIJKLMNOPQRSTUVWXYZ,-") == "" && len(f) >= 3
}

// listText is /cron list's answer for conv.
func (m Manager) listText(ctx context.Context, conv string) string {
	jobs, err := m.Store.Jobs(ctx)
	if err != nil {
		return "I could not read the jobs just now; try again in a moment."
	}
	var b strings.Builder
	for _, j := range jobs {
		if j.Origin == nil || j.Origin.Conv != conv {
			continue
		}
		fmt.Fprintf(&b, "• %s — %s — %s, %s", j.ID, j.Name, j.Schedule.String(), j.State)
		if !j.NextRunAt.IsZero() && j.Enabled {
			fmt.Fprintf(&b, ", next %s", when(j.NextRunAt))
		}
		if j.LastStatus != "" {
			fmt.Fprintf(&b, ", last %s", j.LastStatus)
		}
		if j.LastError != "" {
			fmt.Fprintf(&b, " (%s)", oneLine(j.LastError, 120))
		}
		if j.LastDeliveryError != "" {
			fmt.Fprintf(&b, " — delivery failed: %s", oneLine(j.LastDeliveryError, 120))
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return "No cron jobs in this conversation. " + cronUsage
	}
	return "Cron jobs here:\n" + b.String()
}

// when is a time as a chat shows it.
func when(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}
