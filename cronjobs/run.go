package cronjobs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// outcome is what one run of a job did.
type outcome struct {
	status string // StatusOK, StatusSilent, StatusSkipped or StatusError
	err    string // StatusError: why, in a line
	text   string // what is delivered (under the job's name); empty sends nothing
	body   string // what is saved
}

// execute runs j once: its script, its agent, or the script then the
// agent with the script's output as context.
func (s *Scheduler) execute(ctx context.Context, j Job, r Run) outcome {
	prompt := j.Prompt
	if j.Script != "" {
		vars := []string{
			"HERALD_CRON_JOB=" + j.ID,
			"HERALD_CRON_RUN=" + r.ID,
			"HERALD_CRON_SCHEDULED_AT=" + r.ScheduledAt.UTC().Format(time.RFC3339),
		}
		path, err := s.scriptPath(j)
		if err != nil {
			return outcome{status: StatusError, err: err.Error(), body: err.Error()}
		}
		res := runScript(ctx, s.clock, path, shellScript(j.Script), s.workdir(j), s.opts.Env, vars, s.opts.ScriptTimeout)
		if res.Err != nil {
			return outcome{status: StatusError, err: res.Err.Error(), body: res.Stdout + "\n\n" + res.Err.Error()}
		}
		if j.NoAgent {
			// The script's output is the report, verbatim; none sends
			// nothing.
			if strings.TrimSpace(res.Stdout) == "" {
				return outcome{status: StatusOK, body: "(the script printed nothing)"}
			}
			return outcome{status: StatusOK, text: res.Stdout, body: res.Stdout}
		}
		if !wakeAgent(res.Stdout) {
			return outcome{status: StatusSkipped, body: res.Stdout + "\n\n(the script said not to wake the agent)"}
		}
		prompt += "\n\nThe output of this job's script, run just now:\n\n```\n" + strings.TrimRight(s.redact(res.Stdout), "\n") + "\n```"
	}
	if s.opts.Agent == nil {
		const why = "no model is configured for this gateway (set model.name and model.base_url)"
		return outcome{status: StatusError, err: why, body: why}
	}
	reply, err := s.opts.Agent(ctx, j, r, firePrompt(j)+prompt)
	if err != nil {
		return outcome{status: StatusError, err: err.Error(), body: err.Error()}
	}
	if silent(reply) {
		return outcome{status: StatusSilent, body: reply}
	}
	return outcome{status: StatusOK, text: reply, body: reply}
}

// scriptPath is the file a fire of j runs. A job made in a conversation
// (the cronjob tool) had its script checked to lie in cron.scripts_dir
// when it was made; it is checked again now, its symlinks followed, and
// the file it resolves to is what runs, so that a symlink put in its
// place later, pointing out of the directory, runs nothing. A job made
// by the CLI or the API runs its script where it is.
func (s *Scheduler) scriptPath(j Job) (string, error) {
	if j.Origin == nil {
		return j.Script, nil
	}
	dir := filepath.Clean(s.opts.ScriptsDir)
	if s.opts.ScriptsDir == "" {
		return "", fmt.Errorf("the script %s was not run: cron.scripts_dir is not set, and a job made in a chat runs scripts from there alone", j.Script)
	}
	real, err := resolveIn(dir, filepath.Clean(j.Script))
	switch {
	case errors.Is(err, errOutside):
		return "", fmt.Errorf("the script %s was not run: it now lies outside %s (cron.scripts_dir), its symlinks followed, and a job made in a chat runs scripts from there alone", j.Script, dir)
	case err != nil:
		return "", fmt.Errorf("the script %s cannot be read: %v", j.Script, err)
	}
	return real, nil
}

// redact masks herald's secrets in text (SchedulerOptions.Redact).
func (s *Scheduler) redact(text string) string {
	if s.opts.Redact == nil {
		return text
	}
	return s.opts.Redact(text)
}

// workdir is where j's script runs: its workdir, else the script's own
// directory.
func (s *Scheduler) workdir(j Job) string {
	if j.Workdir != "" {
		return j.Workdir
	}
	return filepath.Dir(j.Script)
}

// firePrompt opens a fire's prompt: the agent runs alone, and its reply
// is the report.
func firePrompt(j Job) string {
	return "This is a run of the scheduled job \"" + j.Name + "\". Nobody is in this conversation to answer questions: do the task with your tools, then reply with the report itself, which is delivered as it is. If there is nothing worth reporting this time, reply exactly [SILENT].\n\n"
}
