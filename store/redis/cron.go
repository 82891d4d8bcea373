package redis

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/errs"
)

// cronStore is the DB seen as a cronjobs.Store. Its keys:
//
//	Pcron:j:<id>      hash: v the version, j the encoded job
//	Pcron:all         sorted set of every job id, all scored 0 (by id)
//	Pcron:due         sorted set of the jobs that want a fire, by due ms
//	Pcron:runs:<job>  sorted set of a job's run ids, by start ms
//	Pcron:r:<run>     hash: jb the run's job, r the encoded run
//
// Every change that touches more than one is one of the cron_*.lua
// functions, or, for a job a turn made, the commands createJobOps makes.
// A fire's start and end (cronfire.go) touch the fire's once-only keys
// (once.go) in the same function.
type cronStore struct{ db *DB }

var _ cronjobs.Store = cronStore{}

// Cron returns the store of cron jobs and their runs.
func (db *DB) Cron() cronjobs.Store { return cronStore{db: db} }

// cronKey is one of the cron keys: Pcron:<suffix>.
func (db *DB) cronKey(suffix string) string { return db.prefix + "cron:" + suffix }

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

// createJobOps are the commands a turn's commit runs to write a new job
// (cronjobs.Create): its hash at version 1 and its places in both
// indexes. The id is one the turn made (cronjobs.NewID), so nothing
// checks that it is new.
func (db *DB) createJobOps(op string, j cronjobs.Job) ([]writeOp, error) {
	body, due, err := encodeJob(op, j, 1)
	if err != nil {
		return nil, err
	}
	ops := []writeOp{
		{cmd: "HSET", args: []any{db.cronKey("j:" + j.ID), "v", 1, "j", body}},
		{cmd: "ZADD", args: []any{db.cronKey("all"), 0, j.ID}},
	}
	if due != "" {
		ops = append(ops, writeOp{cmd: "ZADD", args: []any{db.cronKey("due"), due, j.ID}})
	}
	return ops, nil
}

// put runs cron_put for j at version next, over from ("" to create).
func (s cronStore) put(ctx context.Context, op string, j cronjobs.Job, from string, next int64) error {
	db := s.db
	body, due, err := encodeJob(op, j, next)
	if err != nil {
		return err
	}
	v, err := db.run(ctx, op, scriptCronPut,
		[]string{db.cronKey("j:" + j.ID), db.cronKey("all"), db.cronKey("due")},
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
	v, err := db.run(ctx, op, scriptCronRemove,
		[]string{db.cronKey("j:" + id), db.cronKey("all"), db.cronKey("due"), db.cronKey("runs:" + id)},
		db.prefix, id)
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
	v, err := db.client.HMGet(ctx, db.cronKey("j:"+id), "v", "j").Result()
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
	return s.read(ctx, op, "all", "+inf", -1)
}

func (s cronStore) DueJobs(ctx context.Context, now time.Time, n int) ([]cronjobs.Job, error) {
	const op = "redis.cron.DueJobs"
	if n < 1 {
		n = -1
	}
	return s.read(ctx, op, "due", strconv.FormatInt(now.UnixMilli(), 10), n)
}

// read runs cron_read on the index named by suffix, up to score max,
// at most n jobs (-1: all).
func (s cronStore) read(ctx context.Context, op, index, maxScore string, n int) ([]cronjobs.Job, error) {
	db := s.db
	v, err := db.run(ctx, op, scriptCronRead, []string{db.cronKey(index)}, db.prefix, maxScore, n)
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
	zs, err := db.client.ZRangeWithScores(ctx, db.cronKey("due"), 0, 0).Result()
	if err != nil {
		return time.Time{}, false, db.fail(op, err)
	}
	if len(zs) == 0 {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(int64(zs[0].Score)).UTC(), true, nil
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
	v, err := db.run(ctx, op, scriptCronRunPut,
		[]string{db.cronKey("r:" + r.ID), db.cronKey("runs:" + r.Job)},
		db.prefix, r.ID, r.Job, r.StartedAt.UnixMilli(), body, cronjobs.KeepRuns)
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
	b, err := db.client.HGet(ctx, db.cronKey("r:"+id), "r").Bytes()
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
	v, err := db.run(ctx, op, scriptCronRuns, []string{db.cronKey("runs:" + job)}, db.prefix, max(n, 0))
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
