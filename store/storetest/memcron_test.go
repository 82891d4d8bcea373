package storetest

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/lease"
)

// memCronData is what a place keeps of cron jobs, their runs and the
// once-only claims on fires.
type memCronData struct {
	jobs      map[string]cronjobs.Job // by id, at their stored Version
	runs      map[string]cronjobs.Run // by id
	fires     map[string]memFire      // by fire id
	fireToken int64                   // the claim token counter
}

// memFire is a fire's claim and, once done, when.
type memFire struct {
	claim  lease.Claim
	done   bool
	doneAt time.Time
}

func newMemCronData() *memCronData {
	return &memCronData{jobs: map[string]cronjobs.Job{}, runs: map[string]cronjobs.Run{}, fires: map[string]memFire{}}
}

type memCron struct{ s *memStore }
type memOnce struct{ s *memStore }

func (m memCron) d() *memCronData { return m.s.data.cron }
func (m memOnce) d() *memCronData { return m.s.data.cron }

func (m memCron) CreateJob(ctx context.Context, j cronjobs.Job) (cronjobs.Job, error) {
	const op = "mem.CreateJob"
	if err := cronjobs.CheckJob(op, j); err != nil {
		return cronjobs.Job{}, err
	}
	if err := m.s.lock(op); err != nil {
		return cronjobs.Job{}, err
	}
	defer m.s.data.mu.Unlock()
	return m.create(op, j)
}

// create writes a new job j at version 1.
func (m memCron) create(op string, j cronjobs.Job) (cronjobs.Job, error) {
	if _, ok := m.d().jobs[j.ID]; ok {
		return cronjobs.Job{}, errs.E(op, errs.Conflict, "job %q exists", j.ID)
	}
	j.Version = 1
	m.d().jobs[j.ID] = j
	return j, nil
}

func (m memCron) Job(ctx context.Context, id string) (cronjobs.Job, error) {
	const op = "mem.Job"
	if err := m.s.lock(op); err != nil {
		return cronjobs.Job{}, err
	}
	defer m.s.data.mu.Unlock()
	j, ok := m.d().jobs[id]
	if !ok {
		return cronjobs.Job{}, errs.E(op, errs.NotFound, "no job %q", id)
	}
	return j, nil
}

func (m memCron) Jobs(ctx context.Context) ([]cronjobs.Job, error) {
	const op = "mem.Jobs"
	if err := m.s.lock(op); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	out := make([]cronjobs.Job, 0, len(m.d().jobs))
	for _, j := range m.d().jobs {
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b cronjobs.Job) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func (m memCron) UpdateJob(ctx context.Context, j cronjobs.Job) (cronjobs.Job, error) {
	const op = "mem.UpdateJob"
	if err := cronjobs.CheckJob(op, j); err != nil {
		return cronjobs.Job{}, err
	}
	if err := m.s.lock(op); err != nil {
		return cronjobs.Job{}, err
	}
	defer m.s.data.mu.Unlock()
	return m.update(op, j)
}

// update writes j over the stored job while its version is j.Version.
func (m memCron) update(op string, j cronjobs.Job) (cronjobs.Job, error) {
	cur, ok := m.d().jobs[j.ID]
	switch {
	case !ok:
		return cronjobs.Job{}, errs.E(op, errs.NotFound, "no job %q", j.ID)
	case cur.Version != j.Version:
		return cronjobs.Job{}, errs.E(op, errs.Conflict, "job %q moved on from version %d", j.ID, j.Version)
	}
	j.Version++
	m.d().jobs[j.ID] = j
	return j, nil
}

func (m memCron) RemoveJob(ctx context.Context, id string) error {
	const op = "mem.RemoveJob"
	if err := m.s.lock(op); err != nil {
		return err
	}
	defer m.s.data.mu.Unlock()
	if _, ok := m.d().jobs[id]; !ok {
		return errs.E(op, errs.NotFound, "no job %q", id)
	}
	delete(m.d().jobs, id)
	for rid, r := range m.d().runs {
		if r.Job == id {
			delete(m.d().runs, rid)
		}
	}
	return nil
}

func (m memCron) DueJobs(ctx context.Context, now time.Time, limit int) ([]cronjobs.Job, error) {
	const op = "mem.DueJobs"
	if err := m.s.lock(op); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	var out []cronjobs.Job
	for _, j := range m.d().jobs {
		if at := j.DueAt(); !at.IsZero() && !at.After(now) {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b cronjobs.Job) int {
		return cmp.Or(a.DueAt().Compare(b.DueAt()), cmp.Compare(a.ID, b.ID))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (m memCron) NextDue(ctx context.Context) (time.Time, bool, error) {
	const op = "mem.NextDue"
	if err := m.s.lock(op); err != nil {
		return time.Time{}, false, err
	}
	defer m.s.data.mu.Unlock()
	var next time.Time
	for _, j := range m.d().jobs {
		if at := j.DueAt(); !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next, !next.IsZero(), nil
}

func (m memCron) PutRun(ctx context.Context, r cronjobs.Run) error {
	const op = "mem.PutRun"
	if err := cronjobs.CheckRun(op, r); err != nil {
		return err
	}
	if err := m.s.lock(op); err != nil {
		return err
	}
	defer m.s.data.mu.Unlock()
	m.putRun(r)
	return nil
}

// putRun writes r and keeps its job's KeepRuns newest runs.
func (m memCron) putRun(r cronjobs.Run) {
	m.d().runs[r.ID] = r
	runs := m.runsOf(r.Job)
	for _, old := range runs[min(len(runs), cronjobs.KeepRuns):] {
		delete(m.d().runs, old.ID)
	}
}

// runsOf is job's runs, newest first: by start, then id, descending.
func (m memCron) runsOf(job string) []cronjobs.Run {
	var out []cronjobs.Run
	for _, r := range m.d().runs {
		if r.Job == job {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b cronjobs.Run) int {
		return cmp.Or(b.StartedAt.Compare(a.StartedAt), cmp.Compare(b.ID, a.ID))
	})
	return out
}

func (m memCron) Run(ctx context.Context, id string) (cronjobs.Run, error) {
	const op = "mem.Run"
	if err := m.s.lock(op); err != nil {
		return cronjobs.Run{}, err
	}
	defer m.s.data.mu.Unlock()
	r, ok := m.d().runs[id]
	if !ok {
		return cronjobs.Run{}, errs.E(op, errs.NotFound, "no run %q", id)
	}
	return r, nil
}

func (m memCron) Runs(ctx context.Context, job string, limit int) ([]cronjobs.Run, error) {
	const op = "mem.Runs"
	if err := m.s.lock(op); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	out := m.runsOf(job)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (m memCron) StartFire(ctx context.Context, in cronjobs.FireStart) (cronjobs.FireStarted, error) {
	const op = "mem.StartFire"
	var out cronjobs.FireStarted
	if err := lease.CheckClaimOnce(op, in.Fire, in.Owner, in.TTL); err != nil {
		return out, err
	}
	if err := cronjobs.CheckFireRun(op, in.Run, in.Job); err != nil {
		return out, err
	}
	if in.Job != nil {
		if err := cronjobs.CheckJob(op, *in.Job); err != nil {
			return out, err
		}
	}
	if err := m.s.lock(op); err != nil {
		return out, err
	}
	defer m.s.data.mu.Unlock()
	out.Claim, out.State = memOnce(m).claim(in.Fire, in.Owner, in.TTL)
	if out.State == lease.OnceHeld {
		return out, nil
	}
	if in.Job != nil {
		j, err := m.update(op, *in.Job)
		if err != nil {
			// The claim stands; nothing else is written.
			return out, nil
		}
		out.Job, out.Moved = j, true
	}
	if out.State == lease.OnceDone {
		return out, nil
	}
	if prior, ok := m.d().runs[in.Run.ID]; ok {
		out.Prior, out.HasPrior = prior, true
		return out, nil
	}
	if in.Start {
		m.putRun(in.Run)
		out.Started = true
	}
	return out, nil
}

func (m memCron) EndFire(ctx context.Context, in cronjobs.FireEnd) (cronjobs.Job, error) {
	const op = "mem.EndFire"
	if err := cronjobs.CheckFireRun(op, in.Run, in.Job); err != nil {
		return cronjobs.Job{}, err
	}
	if in.Job != nil {
		if err := cronjobs.CheckJob(op, *in.Job); err != nil {
			return cronjobs.Job{}, err
		}
	}
	if err := m.s.lock(op); err != nil {
		return cronjobs.Job{}, err
	}
	defer m.s.data.mu.Unlock()
	// Every check before any write: all or nothing.
	if err := memOnce(m).checkDone(op, in.Claim); err != nil {
		return cronjobs.Job{}, err
	}
	var j cronjobs.Job
	if in.Job != nil {
		var err error
		if j, err = m.update(op, *in.Job); err != nil {
			return cronjobs.Job{}, err
		}
	}
	m.putRun(in.Run)
	memOnce(m).markDone(in.Claim)
	return j, nil
}

// claim claims fire id for owner for ttl when nobody holds it: it is
// new, its claim ran out and it is not done, or it was done longer ago
// than the dedupe window.
func (m memOnce) claim(id, owner string, ttl time.Duration) (lease.Claim, lease.OnceState) {
	now := m.s.clk.Now()
	f, ok := m.d().fires[id]
	switch {
	case ok && f.done && now.Before(f.doneAt.Add(m.s.lim.DedupeWindow)):
		return lease.Claim{}, lease.OnceDone
	case ok && !f.done && now.Before(f.claim.Expires):
		return f.claim, lease.OnceHeld
	}
	m.d().fireToken++
	c := lease.Claim{Name: id, Owner: owner, Token: m.d().fireToken, Expires: now.Add(ttl)}
	m.d().fires[id] = memFire{claim: c}
	return c, lease.OnceClaimed
}

// checkDone says whether c may mark its fire done: it is the fire's
// current claim (done under it already counts, as a retried call).
func (m memOnce) checkDone(op string, c lease.Claim) error {
	f, ok := m.d().fires[c.Name]
	switch {
	case !ok:
		return errs.E(op, errs.NotFound, "no fire %q", c.Name)
	case f.claim.Token != c.Token:
		return errs.E(op, errs.LeaseLost, "fire %q is not held by claim %d any more", c.Name, c.Token)
	}
	return nil
}

// markDone marks c's fire done now, unless it is already.
func (m memOnce) markDone(c lease.Claim) {
	f := m.d().fires[c.Name]
	if !f.done {
		f.done, f.doneAt = true, m.s.clk.Now()
		m.d().fires[c.Name] = f
	}
}

func (m memOnce) ClaimOnce(ctx context.Context, id, owner string, ttl time.Duration) (lease.Claim, lease.OnceState, error) {
	const op = "mem.ClaimOnce"
	if err := lease.CheckClaimOnce(op, id, owner, ttl); err != nil {
		return lease.Claim{}, "", err
	}
	if err := m.s.lock(op); err != nil {
		return lease.Claim{}, "", err
	}
	defer m.s.data.mu.Unlock()
	c, st := m.claim(id, owner, ttl)
	return c, st, nil
}

func (m memOnce) RenewOnce(ctx context.Context, claims []lease.Claim, ttl time.Duration) ([]lease.Claim, error) {
	const op = "mem.RenewOnce"
	if ttl <= 0 {
		return nil, errs.E(op, errs.Invalid, "renewal ttl %v, want more than 0", ttl)
	}
	if err := m.s.lock(op); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	exp := m.s.clk.Now().Add(ttl)
	var held []lease.Claim
	for _, c := range claims {
		f, ok := m.d().fires[c.Name]
		if !ok || f.done || f.claim.Token != c.Token {
			continue
		}
		f.claim.Expires = exp
		m.d().fires[c.Name] = f
		c.Expires = exp
		held = append(held, c)
	}
	return held, nil
}

func (m memOnce) DoneOnce(ctx context.Context, c lease.Claim) error {
	const op = "mem.DoneOnce"
	if err := m.s.lock(op); err != nil {
		return err
	}
	defer m.s.data.mu.Unlock()
	if err := m.checkDone(op, c); err != nil {
		return err
	}
	m.markDone(c)
	return nil
}

func (m memOnce) StaleOnce(ctx context.Context, prefix string, limit int) ([]string, error) {
	const op = "mem.StaleOnce"
	if limit < 1 {
		return nil, errs.E(op, errs.Invalid, "stale fires limit %d, want at least 1", limit)
	}
	if err := m.s.lock(op); err != nil {
		return nil, err
	}
	defer m.s.data.mu.Unlock()
	now := m.s.clk.Now()
	var stale []memFire
	for id, f := range m.d().fires {
		if !f.done && !now.Before(f.claim.Expires) && len(id) >= len(prefix) && id[:len(prefix)] == prefix {
			stale = append(stale, f)
		}
	}
	slices.SortFunc(stale, func(a, b memFire) int {
		return cmp.Or(a.claim.Expires.Compare(b.claim.Expires), cmp.Compare(a.claim.Name, b.claim.Name))
	})
	ids := make([]string, 0, min(len(stale), limit))
	for _, f := range stale[:min(len(stale), limit)] {
		ids = append(ids, f.claim.Name)
	}
	return ids, nil
}
