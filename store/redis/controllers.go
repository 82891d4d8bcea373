package redis

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/internal/errs"
)

// controllersStore is the DB seen as a controllers.Store. Its keys:
//
//	P{<conv>}:ctl                sorted set of the conversation's states,
//	                             all scored 0 (so by kind, then id)
//	P{<conv>}:ctl:<kind>:<id>    hash: c conv, k kind, i id, d the data as
//	                             given, t due ms ('' when it does not fire
//	                             on time), v version, u updated ms
//	Pctl:due                     sorted set of the states that fire on
//	                             time, by due ms
//
// A member of either index is its state's hash without the prefix. A
// change is one ctl_put or ctl_delete call, which compares the version
// before it writes; times are kept to the millisecond. In the sharded
// layout P is the prefix of the conversation's shard, for the state, its
// conversation's index and the due index alike: each shard has a due
// index of its conversations' states, and DueControllers reads every
// shard's and merges them.
type controllersStore struct{ db *DB }

var _ controllers.Store = controllersStore{}

// Controllers returns the store of the session controllers' states.
func (db *DB) Controllers() controllers.Store { return controllersStore{db: db} }

// ctlMember is k's member in the indexes; the prefix and it are k's
// hash.
func ctlMember(k controllers.Key) string {
	return "{" + convTag(k.Conv) + "}:ctl:" + string(k.Kind) + ":" + k.ID
}

// ctlKeys are the keys of k's scripts: its hash, its conversation's
// index and its shard's due index.
func (db *DB) ctlKeys(k controllers.Key) []string {
	pfx := db.convPfx(k.Conv)
	return []string{pfx + ctlMember(k), convKeyIn(pfx, convTag(k.Conv), "ctl"), pfx + "ctl:due"}
}

func (s controllersStore) Now(ctx context.Context) (time.Time, error) {
	return s.db.now(ctx, "redis.controllers.Now")
}

func (s controllersStore) Controller(ctx context.Context, k controllers.Key) (controllers.State, error) {
	const op = "redis.controllers.Controller"
	db := s.db
	if err := db.check(op); err != nil {
		return controllers.State{}, err
	}
	v, err := db.client.HMGet(ctx, db.convPfx(k.Conv)+ctlMember(k), "c", "k", "i", "d", "t", "v", "u").Result()
	if err != nil {
		return controllers.State{}, db.fail(op, err)
	}
	if len(v) != 7 || v[5] == nil {
		return controllers.State{}, errs.E(op, errs.NotFound, "%s has no %s", k.Conv, k.Name())
	}
	return decodeController(v), nil
}

func (s controllersStore) Controllers(ctx context.Context, conv string) ([]controllers.State, error) {
	const op = "redis.controllers.Controllers"
	pfx := s.db.convPfx(conv)
	return s.read(ctx, op, pfx, convKeyIn(pfx, convTag(conv), "ctl"), "+inf", -1)
}

func (s controllersStore) DueControllers(ctx context.Context, at time.Time, n int) ([]controllers.State, error) {
	const op = "redis.controllers.DueControllers"
	if n < 1 {
		n = -1
	}
	due := strconv.FormatInt(at.UnixMilli(), 10)
	// Each shard's soonest n, all read at once, make the soonest n of
	// all, in the order of one index: by due time, then member.
	got, err := everyShard(ctx, s.db, func(ctx context.Context, i int) ([]controllers.State, error) {
		pfx := s.db.shards.pfx(i)
		return s.read(ctx, op, pfx, pfx+"ctl:due", due, n)
	})
	if err != nil {
		return nil, err
	}
	if len(got) == 1 {
		return got[0], nil
	}
	out := merged(got)
	slices.SortFunc(out, func(a, b controllers.State) int {
		if c := a.DueAt.Compare(b.DueAt); c != 0 {
			return c
		}
		return strings.Compare(ctlMember(a.Key()), ctlMember(b.Key()))
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// read runs ctl_read on index, a key of the shard of prefix pfx, up to
// score max, at most n states (-1: all).
func (s controllersStore) read(ctx context.Context, op, pfx, index, maxScore string, n int) ([]controllers.State, error) {
	db := s.db
	v, err := db.run(ctx, op, scriptCtlRead, []string{index}, pfx, maxScore, n)
	if err != nil {
		return nil, err
	}
	if len(v)%7 != 0 {
		return nil, errs.E(op, errs.Internal, "unexpected script reply of %d items", len(v))
	}
	out := make([]controllers.State, 0, len(v)/7)
	for i := 0; i < len(v); i += 7 {
		out = append(out, decodeController(v[i:i+7]))
	}
	return out, nil
}

func (s controllersStore) PutController(ctx context.Context, st controllers.State) (controllers.State, error) {
	const op = "redis.controllers.PutController"
	db := s.db
	if err := st.Check(op); err != nil {
		return st, err
	}
	k := st.Key()
	v, err := db.run(ctx, op, scriptCtlPut, db.ctlKeys(k),
		ctlMember(k), st.Version, k.Conv, string(k.Kind), k.ID, []byte(st.Data), dueArg(st.DueAt), db.nowArg())
	if err != nil {
		return st, err
	}
	switch {
	case len(v) == 2 && str(v[0]) == "OK":
		st.Version, st.UpdatedAt = st.Version+1, msTime(v[1])
		return st, nil
	case len(v) == 2 && str(v[0]) == "CONFLICT" && st.Version == 0:
		return st, errs.E(op, errs.Conflict, "%s has a %s already: read it and write over its version", k.Conv, k.Name())
	case len(v) == 2 && str(v[0]) == "CONFLICT" && str(v[1]) == "":
		return st, errs.E(op, errs.Conflict, "%s's %s was removed after version %d: read it again", k.Conv, k.Name(), st.Version)
	case len(v) == 2 && str(v[0]) == "CONFLICT":
		return st, errs.E(op, errs.Conflict, "%s's %s moved on from version %d to %s: read it again", k.Conv, k.Name(), st.Version, str(v[1]))
	}
	return st, status(op, v)
}

// dueArg is a due time as the scripts take it: ms, or ” for none.
func dueArg(at time.Time) string {
	if at.IsZero() {
		return ""
	}
	return strconv.FormatInt(at.UnixMilli(), 10)
}

// putControllerOp is the write a turn's commit runs for a
// controllers.Put: lib_controllers.lua's CTLPUT, which skips a state
// another writer changed first.
func (db *DB) putControllerOp(op string, st controllers.State) (writeOp, error) {
	if err := st.Check(op); err != nil {
		return writeOp{}, err
	}
	k := st.Key()
	keys := db.ctlKeys(k)
	return writeOp{cmd: "CTLPUT", now: 11, home: db.convPfx(k.Conv), args: []any{keys[0], keys[1], keys[2],
		ctlMember(k), strconv.FormatInt(st.Version, 10), k.Conv, string(k.Kind), k.ID, []byte(st.Data), dueArg(st.DueAt), 0}}, nil
}

func (s controllersStore) DeleteController(ctx context.Context, k controllers.Key, version int64) error {
	const op = "redis.controllers.DeleteController"
	db := s.db
	v, err := db.run(ctx, op, scriptCtlDelete, db.ctlKeys(k), ctlMember(k), version)
	if err != nil {
		return err
	}
	switch {
	case len(v) > 0 && str(v[0]) == "NOTFOUND":
		return errs.E(op, errs.NotFound, "%s has no %s", k.Conv, k.Name())
	case len(v) == 2 && str(v[0]) == "CONFLICT":
		return errs.E(op, errs.Conflict, "%s's %s moved on from version %d to %s: read it again", k.Conv, k.Name(), version, str(v[1]))
	}
	return status(op, v)
}

// decodeController reads a state from its hash's fields c, k, i, d, t,
// v and u, in that order.
func decodeController(f []any) controllers.State {
	st := controllers.State{
		Conv: str(f[0]), Kind: controllers.Kind(str(f[1])), ID: str(f[2]),
		Data: []byte(str(f[3])), Version: num(f[5]), UpdatedAt: msTime(f[6]),
	}
	if due := str(f[4]); due != "" {
		st.DueAt = msTime(due)
	}
	return st
}
