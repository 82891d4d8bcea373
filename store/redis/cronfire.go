package redis

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/lease"
)

// jobArgs are a fire script's arguments for the job it may write: the
// version read (empty to leave it), the next version, the encoding and the
// due time in ms.
func jobArgs(op string, j *cronjobs.Job) ([]any, error) {
	if j == nil {
		return []any{"", "", "", ""}, nil
	}
	next := j.Version + 1
	body, due, err := encodeJob(op, *j, next)
	if err != nil {
		return nil, err
	}
	return []any{strconv.FormatInt(j.Version, 10), next, body, due}, nil
}

// firePfx is the prefix of the shard a fire of job lives in, with the
// job: a fire's claim is in its subject's shard (onceShard), and the
// fires of a job are named cron:<job>:…, so a fire of another name, whose
// claim would be in another shard, is refused (Invalid) in the sharded
// layout.
func (db *DB) firePfx(op, fire, job string) (string, error) {
	i := db.shards.of(job)
	if db.onceShard(fire) != i {
		return "", errs.E(op, errs.Invalid, "fire %q is not named after job %q (cron:<job>:<when>)", fire, job)
	}
	return db.shards.pfx(i), nil
}

func (s cronStore) StartFire(ctx context.Context, in cronjobs.FireStart) (cronjobs.FireStarted, error) {
	const op = "redis.cron.StartFire"
	db := s.db
	var out cronjobs.FireStarted
	if err := lease.CheckClaimOnce(op, in.Fire, in.Owner, in.TTL); err != nil {
		return out, err
	}
	ja, err := jobArgs(op, in.Job)
	if err != nil {
		return out, err
	}
	if err := cronjobs.CheckFireRun(op, in.Run, in.Job); err != nil {
		return out, err
	}
	run := []byte{}
	if in.Start {
		if run, err = json.Marshal(in.Run); err != nil {
			return out, errs.Wrap(op, errs.Invalid, err)
		}
	}
	job := in.Run.Job
	pfx, err := db.firePfx(op, in.Fire, job)
	if err != nil {
		return out, err
	}
	args := []any{pfx, in.Fire, in.Owner, durMS(in.TTL), db.nowArg(), job}
	args = append(args, ja...)
	args = append(args, in.Run.ID, in.Run.StartedAt.UnixMilli(), run, cronjobs.KeepRuns)
	v, err := db.run(ctx, op, scriptCronFireStart,
		[]string{
			onceKey(pfx, "f:"+in.Fire), onceKey(pfx, "live"), onceKey(pfx, "token"),
			cronKey(pfx, "j:"+job), cronKey(pfx, "due"),
			cronKey(pfx, "r:"+in.Run.ID), cronKey(pfx, "runs:"+job),
		},
		args...)
	if err != nil {
		return out, err
	}
	if len(v) != 7 {
		return out, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	switch str(v[0]) {
	case "CLAIMED":
		out.State = lease.OnceClaimed
		out.Claim = lease.Claim{Name: in.Fire, Owner: str(v[1]), Token: num(v[2]), Expires: msTime(v[3])}
	case "HELD":
		out.State = lease.OnceHeld
		out.Claim = lease.Claim{Name: in.Fire, Owner: str(v[1]), Token: num(v[2]), Expires: msTime(v[3])}
		return out, nil
	case "DONE":
		out.State = lease.OnceDone
	default:
		return out, errs.E(op, errs.Internal, "unexpected script reply %v", v)
	}
	if num(v[4]) == 1 {
		out.Moved = true
		out.Job = *in.Job
		out.Job.Version++
	}
	if prior := str(v[5]); prior != "" {
		if out.Prior, err = decodeRun(op, []byte(prior)); err != nil {
			return out, err
		}
		out.HasPrior = true
	}
	out.Started = num(v[6]) == 1
	return out, nil
}

func (s cronStore) EndFire(ctx context.Context, in cronjobs.FireEnd) (cronjobs.Job, error) {
	const op = "redis.cron.EndFire"
	db := s.db
	if err := cronjobs.CheckFireRun(op, in.Run, in.Job); err != nil {
		return cronjobs.Job{}, err
	}
	body, err := json.Marshal(in.Run)
	if err != nil {
		return cronjobs.Job{}, errs.Wrap(op, errs.Invalid, err)
	}
	ja, err := jobArgs(op, in.Job)
	if err != nil {
		return cronjobs.Job{}, err
	}
	job := in.Run.Job
	c := in.Claim
	pfx, err := db.firePfx(op, c.Name, job)
	if err != nil {
		return cronjobs.Job{}, err
	}
	args := []any{pfx, c.Name, c.Token, db.windowArg(), db.nowArg(), job}
	args = append(args, ja...)
	args = append(args, in.Run.ID, in.Run.StartedAt.UnixMilli(), body, cronjobs.KeepRuns)
	v, err := db.run(ctx, op, scriptCronFireEnd,
		[]string{
			onceKey(pfx, "f:"+c.Name), onceKey(pfx, "live"),
			cronKey(pfx, "j:"+job), cronKey(pfx, "due"),
			cronKey(pfx, "r:"+in.Run.ID), cronKey(pfx, "runs:"+job),
		},
		args...)
	if err != nil {
		return cronjobs.Job{}, err
	}
	switch {
	case len(v) > 0 && str(v[0]) == "LOST":
		return cronjobs.Job{}, errs.E(op, errs.LeaseLost, "fire %q is not held by claim %d any more", c.Name, c.Token)
	case len(v) > 0 && str(v[0]) == "NOTFOUND":
		return cronjobs.Job{}, errs.E(op, errs.NotFound, "no fire %q", c.Name)
	case len(v) > 0 && str(v[0]) == "NOJOB":
		return cronjobs.Job{}, errs.E(op, errs.NotFound, "no job %q", job)
	case len(v) > 0 && str(v[0]) == "CONFLICT":
		return cronjobs.Job{}, errs.E(op, errs.Conflict, "job %q moved on from version %d: read it again", job, in.Job.Version)
	}
	if err := status(op, v); err != nil {
		return cronjobs.Job{}, err
	}
	if in.Job == nil {
		return cronjobs.Job{}, nil
	}
	j := *in.Job
	j.Version++
	return j, nil
}
