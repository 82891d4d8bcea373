package cronjobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// KindReport is the outbox kind of a job's report or notice.
const KindReport = "cron"

// firePrefix opens the identity of every cron fire (lease.OnceStore).
const firePrefix = "cron:"

// fire is one fire's identity: the job and the time it was due, and
// whether it was asked for with "run now" rather than scheduled. Made by
// newFire, which names it once: the name is looked up and written
// several times a fire.
type fire struct {
	job    string
	at     time.Time
	manual bool
	name   string
}

// newFire is the fire of job at at, named.
func newFire(job string, at time.Time, manual bool) fire {
	name := firePrefix + job + ":" + strconv.FormatInt(at.Unix(), 10)
	if manual {
		name = firePrefix + job + ":run:" + strconv.FormatInt(at.UnixMilli(), 10)
	}
	return fire{job: job, at: at, manual: manual, name: name}
}

// id is the fire's identity in the once-only claims:
// cron:<job>:<unix s> for a scheduled fire, cron:<job>:run:<unix ms>
// for a requested one.
func (f fire) id() string { return f.name }

// runID is the id of the fire's run record: the same for every attempt
// at the fire, so one that is run again after a crash updates its record
// rather than adding a second.
func (f fire) runID() string {
	sum := sha256.Sum256([]byte(f.id()))
	return "run_" + hex.EncodeToString(sum[:8])
}

// parseFire reads a fire's identity back.
func parseFire(id string) (fire, error) {
	rest, ok := strings.CutPrefix(id, firePrefix)
	job, when, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || job == "" {
		return fire{}, errs.E("cronjobs.parseFire", errs.Invalid, "%q is not a cron fire", id)
	}
	if ms, ok := strings.CutPrefix(when, "run:"); ok {
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			return fire{}, errs.E("cronjobs.parseFire", errs.Invalid, "%q is not a cron fire", id)
		}
		return newFire(job, time.UnixMilli(n).UTC(), true), nil
	}
	n, err := strconv.ParseInt(when, 10, 64)
	if err != nil {
		return fire{}, errs.E("cronjobs.parseFire", errs.Invalid, "%q is not a cron fire", id)
	}
	return newFire(job, time.Unix(n, 0).UTC(), false), nil
}

// fireOf is the fire a due job asks for: a requested run goes first.
func fireOf(j Job) fire {
	if !j.RunRequestedAt.IsZero() && (!j.Enabled || j.NextRunAt.IsZero() || !j.NextRunAt.Before(j.RunRequestedAt)) {
		return newFire(j.ID, j.RunRequestedAt, true)
	}
	return newFire(j.ID, j.NextRunAt, false)
}

// step is what advancing a job past a fire decided.
type step struct {
	job    Job
	run    bool   // the fire runs
	missed bool   // a one-shot past its grace: it is not run, a notice says so
	last   bool   // the job's last run: it is removed once recorded
	broken string // the job cannot be scheduled: why (recorded on it, not run)
}

// advance moves j past f, as the truth in the store: its next run, its
// repeat count, a requested run cleared. It writes only when j still
// waits for f, so whichever attempt at f comes first advances it once.
// A j that moved on already (another instance advanced it, or this fire
// is run again after a crash) is returned as it stands, with run true:
// the claim on f, not the job, decides that it runs.
func (s *Scheduler) advance(ctx context.Context, j Job, f fire) (step, error) {
	var st step
	saved, err := s.modify(ctx, j, func(j *Job) bool {
		var changed bool
		st, changed = s.decide(*j, f, s.clock.Now())
		*j = st.job
		return changed
	})
	st.job = saved
	return st, err
}

// decide is advance's pure part: what j becomes past f at now, and
// whether that is a change to write.
func (s *Scheduler) decide(j Job, f fire, now time.Time) (step, bool) {
	st := step{job: j, run: true}
	if f.manual {
		if !j.RunRequestedAt.Equal(f.at) {
			return st, false
		}
		st.job.RunRequestedAt = time.Time{}
		return st, true
	}
	if !j.NextRunAt.Equal(f.at) {
		st.last = j.State == StateCompleted && j.NextRunAt.IsZero()
		st.missed = j.State == StateMissed
		st.run = !st.missed
		return st, false
	}
	if err := j.Schedule.Validate(); err != nil {
		st.run, st.broken = false, err.Error()
		st.job.State, st.job.LastStatus, st.job.LastError = StateError, StatusError, "cannot be scheduled: "+err.Error()
		st.job.NextRunAt = time.Time{}
		return st, true
	}
	if j.Schedule.Kind == KindOnce {
		st.job.NextRunAt = time.Time{}
		if now.Sub(f.at) > Grace(f.at.Sub(j.CreatedAt)) {
			st.run, st.missed = false, true
			st.job.State, st.job.Enabled = StateMissed, false
			return st, true
		}
		st.last = true
		st.job.State = StateCompleted
		st.job.Repeat.Completed++
		return st, true
	}
	if j.Repeat.Last() {
		st.last = true
		st.job.State, st.job.NextRunAt = StateCompleted, time.Time{}
	} else if next, ok := j.Schedule.Next(f.at, now); ok {
		st.job.NextRunAt = next
	} else {
		st.job.State, st.job.NextRunAt = StateCompleted, time.Time{}
		st.last = true
	}
	st.job.Repeat.Completed++
	return st, true
}

// header opens every report: the job's name.
func header(j Job) string { return "**" + j.Name + "**\n\n" }

// reports are the outbox messages of one fire, one per target, each
// keyed by the fire and the target so that a fire run again after a
// crash does not send what was sent.
func reports(j Job, r Run, targets []outbox.Target, text string) []outbox.Message {
	msgs := make([]outbox.Message, 0, len(targets))
	for _, t := range targets {
		msgs = append(msgs, outbox.Message{
			Target:         t,
			Text:           text,
			Kind:           KindReport,
			Ref:            r.ID,
			IdempotencyKey: r.Fire + "|" + t.String(),
		})
	}
	return msgs
}

// failureNotice is the one line a failed run delivers.
func failureNotice(j Job, reason string) string {
	return fmt.Sprintf("⚠️ Cron job %q (%s) failed: %s", j.Name, j.ID, oneLine(reason, 600))
}

// missedNotice is what a one-shot that was not run in time delivers.
func missedNotice(j Job, at time.Time) string {
	return fmt.Sprintf("⚠️ Cron job %q (%s) was missed: it was due at %s, when herald was not running, and is past its grace. It did not run; add it again to run it.",
		j.Name, j.ID, at.UTC().Format("2006-01-02 15:04 MST"))
}

// oneLine is s on one line, at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}

// silent reports whether a reply asks for nothing to be sent.
func silent(reply string) bool {
	switch strings.ToUpper(strings.TrimSpace(reply)) {
	case "[SILENT]", "SILENT", "NO_REPLY", "NO REPLY":
		return true
	}
	return false
}
