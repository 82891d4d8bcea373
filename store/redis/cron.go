package redis

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/errs"
)

// cronStore is the DB seen as a cronjobs.Store. Its keys, after the
// prefix S of the shard the job lives in (pfxOf(job id); P itself in the
// one-server layout):
//
//	Scron:j:<id>      hash: v the version, j the encoded job
//	Scron:all         sorted set of the shard's job ids, all scored 0 (by id)
//	Scron:due         sorted set of the shard's jobs that want a fire, by due ms
//	Scron:runs:<job>  sorted set of a job's run ids, by start ms
//	Scron:r:<run>     hash: jb the run's job, r the encoded run
//
// Every change that touches more than one is one of the cron_*.lua
// functions, or, for a job a turn made, the write createJobOps makes.
// A fire's start and end (cronfire.go) touch the fire's once-only keys
// (once.go) in the same function: a cron fire's claim lives in its job's
// shard (onceShard). Jobs, DueJobs and NextDue read every shard's index
// and merge; Run, given only a run's id, finds its shard by asking
// (locate).
type cronStore struct{ db *DB }

var _ cronjobs.Store = cronStore{}

// Cron returns the store of cron jobs and their runs.
func (db *DB) Cron() cronjobs.Store { return cronStore{db: db} }

// cronKey is one of the cron keys of the shard whose prefix is pfx:
// <pfx>cron:<suffix>.
func cronKey(pfx, suffix string) string { return pfx + "cron:" + suffix }

// encodeJob checks j and encodes it as stored at version, with its due
// time in ms, or "" when it wants no fire.
func encodeJob(op string, j cronjobs.Job, version int64) ([]byte, string, error) {
	if err := cronjobs.CheckJob(op, j); err != nil {
		return nil, "", err
	}
	j.Version = version
	b, err := json.Marshal(j)
	if err != nil {
		return nil, "", errs.Wrap(op, errs.Invalid, err)
	}
	due := ""
	if at := j.DueAt(); !at.IsZero() {
		due = strconv.FormatInt(at.UnixMilli(), 10)
	}
	return b, due, nil
}

// createJobOps is the write a turn's commit makes of a new job
// (cronjobs.Create): lib_cron.lua's CRONNEW, its hash at version 1 and
// its places in both indexes, in the job's shard (its home, which the
// commit forwards it to when that is not the conversation's). The id is
// one the turn made (cronjobs.NewID); CRONNEW writes nothing when the
// job's hash exists, so the write applied twice (a forwarded write
// applied again after a crash) leaves the job as the first made it, or
// as later updates left it.
func (db *DB) createJobOps(op string, j cronjobs.Job) ([]writeOp, error) {
	body, due, err := encodeJob(op, j, 1)
	if err != nil {
		return nil, err
	}
	pfx := db.pfxOf(j.ID)
	return []writeOp{{cmd: "CRONNEW", home: pfx,
		args: []any{cronKey(pfx, "j:"+j.ID), cronKey(pfx, "all"), cronKey(pfx, "due"), j.ID, body, due}}}, nil
}

// put runs cron_put for j at version next, over from ("" to create).
func (s cronStore) put(ctx context.Context, op string, j cronjobs.Job, from string, next int64) error {
	db := s.db
	body, due, err := encodeJob(op, j, next)
	if err != nil {
		return err
	}
	pfx := db.pfxOf(j.ID)
	v, err := db.run(ctx, op, scriptCronPut,
		[]string{cronKey(pfx, "j:"+j.ID), cronKey(pfx, "all"), cronKey(pfx, "due")},
		j.ID, from, next, body, due)
	if err != nil {
		return err
	}
	switch {
	case len(v) > 0 && str(v[0]) == "CONFLICT" && from == "":
		return errs.E(op, errs.Conflict, "job %q exists", j.ID)
	case len(v) > 0 && str(v[0]) == "CONFLICT":
		return errs.E(op, errs.Conflict, "job %q moved on from version %d: read it again", j.ID, j.Version)
	case len(v) > 0 && str(v[0]) == "NOTFOUND":
		return errs.E(op, errs.NotFound, "no job %q", j.ID)
	}
	return status(op, v)
}

func (s cronStore) CreateJob(ctx context.Context, j cronjobs.Job) (cronjobs.Job, error) {
	const op = "redis.cron.CreateJob"
	if err := s.put(ctx, op, j, "", 1); err != nil {
		return cronjobs.Job{}, err
	}
	j.Version = 1
	return j, nil
}

func (s cronStore) UpdateJob(ctx context.Context, j cronjobs.Job) (cronjobs.Job, error) {
	const op = "redis.cron.UpdateJob"
	next := j.Version + 1
	if err := s.put(ctx, op, j, strconv.FormatInt(j.Version, 10), next); err != nil {
		return cronjobs.Job{}, err
	}
	j.Version = next
	return j, nil
}

func (s cronStore) RemoveJob(ctx context.Context, id string) error {
	const op = "redis.cron.RemoveJob"
	db := s.db
	pfx := db.pfxOf(id)
	v, err := db.run(ctx, op, scriptCronRemove,
		[]string{cronKey(pfx, "j:"+id), cronKey(pfx, "all"), cronKey(pfx, "due"), cronKey(pfx, "runs:"+id)},
		pfx, id)
	if err != nil {
		return err
	}
	if len(v) > 0 && str(v[0]) == "NOTFOUND" {
		return errs.E(op, errs.NotFound, "no job %q", id)
	}
	return status(op, v)
}

func (s cronStore) Job(ctx context.Context, id string) (cronjobs.Job, error) {
	const op = "redis.cron.Job"
	db := s.db
	if err := db.check(op); err != nil {
		return cronjobs.Job{}, err
	}
	v, err := db.client.HMGet(ctx, cronKey(db.pfxOf(id), "j:"+id), "v", "j").Result()
	if err != nil {
		return cronjobs.Job{}, db.fail(op, err)
	}
	if len(v) != 2 || v[0] == nil {
		return cronjobs.Job{}, errs.E(op, errs.NotFound, "no job %q", id)
	}
	return decodeJob(op, v[0], v[1])
}

func (s cronStore) Jobs(ctx context.Context) ([]cronjobs.Job, error) {
	const op = "redis.cron.Jobs"
	return s.read(ctx, op, everyShard, "all", "+inf", -1, func(a, b cronjobs.Job) int { return strings.Compare(a.ID, b.ID) })
}

func (s cronStore) DueJobs(ctx context.Context, now time.Time, n int) ([]cronjobs.Job, error) {
	const op = "redis.cron.DueJobs"
	if n < 1 {
		n = -1
	}
	// Equal due times order by id, as they do in one shard's index. A
	// shard whose primary is being replaced is read at the next tick.
	return s.read(ctx, op, answeringShards, "due", strconv.FormatInt(now.UnixMilli(), 10), n, func(a, b cronjobs.Job) int {
		if c := cmp.Compare(a.DueAt().UnixMilli(), b.DueAt().UnixMilli()); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// read runs cron_read on every shard's index named by suffix (those
// shards gather reads), up to score max, at most n jobs (-1: all), and
// merges the shards' jobs in the index's order (by).
func (s cronStore) read(ctx context.Context, op string, gather shardReads[[]cronjobs.Job], index, maxScore string, n int, by func(a, b cronjobs.Job) int) ([]cronjobs.Job, error) {
	parts, err := gather(ctx, s.db, func(ctx context.Context, i int) ([]cronjobs.Job, error) {
		return s.readShard(ctx, op, i, index, maxScore, n)
	})
	if err != nil {
		return nil, err
	}
	out := merged(parts)
	if len(parts) == 1 {
		return out, nil
	}
	slices.SortFunc(out, by)
	if n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// readShard is read of shard i.
func (s cronStore) readShard(ctx context.Context, op string, i int, index, maxScore string, n int) ([]cronjobs.Job, error) {
	db := s.db
	pfx := db.shards.pfx(i)
	v, err := db.run(ctx, op, scriptCronRead, []string{cronKey(pfx, index)}, pfx, maxScore, n)
	if err != nil {
		return nil, err
	}
	if len(v)%2 != 0 {
		return nil, errs.E(op, errs.Internal, "unexpected script reply of %d items", len(v))
	}
	out := make([]cronjobs.Job, 0, len(v)/2)
	for i := 0; i < len(v); i += 2 {
		j, err := decodeJob(op, v[i], v[i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

func (s cronStore) NextDue(ctx context.Context) (time.Time, bool, error) {
	const op = "redis.cron.NextDue"
	db := s.db
	if err := db.check(op); err != nil {
		return time.Time{}, false, err
	}
	firsts, err := answeringShards(ctx, db, func(ctx context.Context, i int) ([]goredis.Z, error) {
		zs, err := db.client.ZRangeWithScores(ctx, cronKey(db.shards.pfx(i), "due"), 0, 0).Result()
		return zs, db.fail(op, err)
	})
	if err != nil {
		return time.Time{}, false, err
	}
	first, ok := 0.0, false
	for _, zs := range firsts {
		if len(zs) > 0 && (!ok || zs[0].Score < first) {
			first, ok = zs[0].Score, true
		}
	}
	if !ok {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(int64(first)).UTC(), true, nil
}

func (s cronStore) PutRun(ctx context.Context, r cronjobs.Run) error {
	const op = "redis.cron.PutRun"
	db := s.db
	if err := cronjobs.CheckRun(op, r); err != nil {
		return err
	}
	body, err := json.Marshal(r)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	pfx := db.pfxOf(r.Job)
	v, err := db.run(ctx, op, scriptCronRunPut,
		[]string{cronKey(pfx, "r:"+r.ID), cronKey(pfx, "runs:"+r.Job)},
		pfx, r.ID, r.Job, r.StartedAt.UnixMilli(), body, cronjobs.KeepRuns)
	if err != nil {
		return err
	}
	return status(op, v)
}

func (s cronStore) Run(ctx context.Context, id string) (cronjobs.Run, error) {
	const op = "redis.cron.Run"
	db := s.db
	if err := db.check(op); err != nil {
		return cronjobs.Run{}, err
	}
	// A run is in its job's shard, and its id does not name the job.
	at, err := db.locate(ctx, op, "cron:r:", []string{id}, func(pfx, id string) string { return cronKey(pfx, "r:"+id) })
	if err != nil {
		return cronjobs.Run{}, err
	}
	i, ok := at[id]
	if !ok {
		return cronjobs.Run{}, errs.E(op, errs.NotFound, "no run %q", id)
	}
	b, err := db.client.HGet(ctx, cronKey(db.shards.pfx(i), "r:"+id), "r").Bytes()
	if err == goredis.Nil {
		return cronjobs.Run{}, errs.E(op, errs.NotFound, "no run %q", id)
	}
	if err != nil {
		return cronjobs.Run{}, db.fail(op, err)
	}
	return decodeRun(op, b)
}

func (s cronStore) Runs(ctx context.Context, job string, n int) ([]cronjobs.Run, error) {
	const op = "redis.cron.Runs"
	db := s.db
	pfx := db.pfxOf(job)
	v, err := db.run(ctx, op, scriptCronRuns, []string{cronKey(pfx, "runs:"+job)}, pfx, max(n, 0))
	if err != nil {
		return nil, err
	}
	out := make([]cronjobs.Run, 0, len(v))
	for _, x := range v {
		r, err := decodeRun(op, []byte(str(x)))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// decodeJob reads a job from its version and encoding.
func decodeJob(op string, version, body any) (cronjobs.Job, error) {
	var j cronjobs.Job
	if err := json.Unmarshal([]byte(str(body)), &j); err != nil {
		return j, errs.Wrap(op, errs.Internal, err)
	}
	j.Version = num(version)
	return j, nil
}

func decodeRun(op string, b []byte) (cronjobs.Run, error) {
	var r cronjobs.Run
	if err := json.Unmarshal(b, &r); err != nil {
		return r, errs.Wrap(op, errs.Internal, err)
	}
	return r, nil
}
