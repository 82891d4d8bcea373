package redis

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/instances"
	"github.com/heraldgw/herald/internal/errs"
)

// instanceStore is the DB seen as an instances.Store. The roll is one
// hash,
//
//	Pinstances   a field an instance id holding
//	             "<expires ms>|<last seen ms>|<the encoded instance>",
//	             both times by the store's clock
//
// written by inst_beat, which also drops the fields that ran out, and
// read by inst_list, which only reads; Leave is one HDEL.
type instanceStore struct{ db *DB }

var _ instances.Store = instanceStore{}

// Instances returns the roll of gateway processes.
func (db *DB) Instances() instances.Store { return instanceStore{db: db} }

func (db *DB) instancesKey() string { return db.prefix + "instances" }

func (s instanceStore) Beat(ctx context.Context, in instances.Instance, ttl time.Duration) error {
	const op = "redis.instances.Beat"
	db := s.db
	if err := db.check(op); err != nil {
		return err
	}
	if err := instances.CheckBeat(op, in, ttl); err != nil {
		return err
	}
	in.LastSeen = time.Time{}
	body, err := json.Marshal(in)
	if err != nil {
		return errs.Wrap(op, errs.Invalid, err)
	}
	_, err = db.run(ctx, op, scriptInstBeat, []string{db.instancesKey()}, in.ID, body, durMS(ttl), db.nowArg())
	return err
}

func (s instanceStore) Leave(ctx context.Context, id string) error {
	const op = "redis.instances.Leave"
	db := s.db
	if err := db.check(op); err != nil {
		return err
	}
	if err := instances.CheckID(op, id); err != nil {
		return err
	}
	return db.fail(op, db.client.HDel(ctx, db.instancesKey(), id).Err())
}

func (s instanceStore) Instances(ctx context.Context) ([]instances.Instance, error) {
	const op = "redis.instances.Instances"
	db := s.db
	if err := db.check(op); err != nil {
		return nil, err
	}
	rows, err := db.run(ctx, op, scriptInstList, []string{db.instancesKey()}, db.nowArg())
	if err != nil {
		return nil, err
	}
	out := make([]instances.Instance, 0, len(rows))
	for _, v := range rows {
		row := str(v)
		seen, body, ok := strings.Cut(row, "|")
		ms, err := strconv.ParseInt(seen, 10, 64)
		var in instances.Instance
		if !ok || err != nil || json.Unmarshal([]byte(body), &in) != nil {
			return nil, errs.E(op, errs.Internal, "an unreadable instance record %q", row)
		}
		in.LastSeen = time.UnixMilli(ms).UTC()
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b instances.Instance) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
