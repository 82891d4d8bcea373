package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/heraldgw/herald/internal/errs"
)

// Forwarded writes. A turn's commit (q_finish) runs in its
// conversation's shard, and a script touches one slot: the writes of a
// commit whose home is another shard (writeOp.home: a user's notes,
// files, cron jobs) cannot run in it. In the sharded layout the commit
// records them instead, in its own shard, in the same step:
//
//	P{label}:fwd    zset    one member per home shard and commit, scored
//	                        by the commit's time (ms): a random id, the
//	                        home's prefix and the write commands, encoded
//	                        (encodeForward)
//
// Right after the commit's reply, Finish runs each member's commands in
// its home shard (fwd_apply, one call per home, with the same WRITE_OPS
// a commit runs) and then deletes the member (ZREM). A process that
// stopped between the two leaves the member behind: the sweep
// (fwdsweep.go) applies every member older than forwardAge again, at the
// commit's time, and deletes it. So a forwarded write may run twice, and
// every write that may be forwarded is idempotent: NOTEADD adds a note
// only when none of its id is there, NOTEDEL deletes the note of its id
// if there is one, DEL deletes what is there, CTLPUT writes only over the
// version its writer read, and a cron job's HSET and ZADDs write the same
// values again. What is not promised is the order against a later write
// of another commit to the same key after such a stop: a note deleted by
// a later turn in the seconds before the sweep comes back. In the
// one-server layout every home is the one shard and nothing is
// forwarded.

// forwardAge is how old a forwarded write must be before the sweep
// applies it: the Finish that recorded it has long applied it, or
// stopped.
const forwardAge = 5000 // ms

// forwarded is the writes of one commit whose home is one other shard.
type forwarded struct {
	home   string    // the home shard's prefix
	ops    []writeOp // the writes, as they run there
	member string    // the record in the committing shard's P{label}:fwd
}

// splitForwarded parts a commit's writes into those that run in the
// commit (home "" or pfx, the conversation's shard) and those forwarded,
// one record per home, in the order the homes first come.
func splitForwarded(pfx string, ops []writeOp) ([]writeOp, []forwarded) {
	var local []writeOp
	var fwd []forwarded
	for _, o := range ops {
		if o.home == "" || o.home == pfx {
			local = append(local, o)
			continue
		}
		i := 0
		for i < len(fwd) && fwd[i].home != o.home {
			i++
		}
		if i == len(fwd) {
			fwd = append(fwd, forwarded{home: o.home})
		}
		fwd[i].ops = append(fwd[i].ops, o)
	}
	for i := range fwd {
		fwd[i].member = encodeForward(fwd[i].home, fwd[i].ops)
	}
	return local, fwd
}

// encodeForward encodes a home's writes as a record: a random id (so
// that two commits' records of the same writes stay two), the home,
// the count of writes, then per write its command, the index of its
// time argument, its count of arguments and the arguments, each field
// written "<length>:<bytes>".
func encodeForward(home string, ops []writeOp) string {
	var id [8]byte
	_, _ = rand.Read(id[:])
	var b []byte
	field := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	field(hex.EncodeToString(id[:]))
	field(home)
	field(strconv.Itoa(len(ops)))
	for _, o := range ops {
		field(o.cmd)
		field(strconv.Itoa(o.now))
		field(strconv.Itoa(len(o.args)))
		for _, a := range o.args {
			field(opArg(a))
		}
	}
	return string(b)
}

// decodeForward reads a record encodeForward made.
func decodeForward(op, member string) (forwarded, error) {
	bad := errs.E(op, errs.Internal, "an unreadable forwarded write %.60q", member)
	var fields []string
	for rest := member; rest != ""; {
		n, tail, ok := strings.Cut(rest, ":")
		size, err := strconv.Atoi(n)
		if !ok || err != nil || size < 0 || size > len(tail) {
			return forwarded{}, bad
		}
		fields, rest = append(fields, tail[:size]), tail[size:]
	}
	// at reads field k as a count, or -1.
	at := func(k int) int {
		if k >= len(fields) {
			return -1
		}
		n, err := strconv.Atoi(fields[k])
		if err != nil || n < 0 {
			return -1
		}
		return n
	}
	if len(fields) < 3 || at(2) < 0 {
		return forwarded{}, bad
	}
	f := forwarded{home: fields[1], member: member}
	k := 3
	for range at(2) {
		now, nargs := at(k+1), at(k+2)
		if now < 0 || nargs < 0 || k+3+nargs > len(fields) {
			return forwarded{}, bad
		}
		o := writeOp{cmd: fields[k], now: now, home: f.home}
		for _, a := range fields[k+3 : k+3+nargs] {
			o.args = append(o.args, a)
		}
		f.ops = append(f.ops, o)
		k += 3 + nargs
	}
	if k != len(fields) {
		return forwarded{}, bad
	}
	return f, nil
}

// opArg is a write's argument as the server receives it.
func opArg(a any) string {
	switch x := a.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return flag(x)
	}
	return fmt.Sprint(a)
}

// fwdKey is the forwarded writes recorded in the shard of prefix pfx.
func fwdKey(pfx string) string { return pfx + "fwd" }

// applyForwarded runs the forwarded writes of a commit recorded in the
// shard of prefix from at their homes, each then deleted from the
// record. now is the time (ms) the writes take, "" for the store's
// clock. It returns the first failure; a write that failed stays
// recorded for the sweep.
func (db *DB) applyForwarded(ctx context.Context, op, from string, fwd []forwarded, now string) error {
	var first error
	for _, f := range fwd {
		err := db.applyAt(ctx, op, f, now)
		if err == nil {
			err = db.fail(op, db.client.ZRem(ctx, fwdKey(from), f.member).Err())
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// applyAt runs a home's writes there (fwd_apply).
func (db *DB) applyAt(ctx context.Context, op string, f forwarded, now string) error {
	if db.applyHook != nil {
		if err := db.applyHook(f.home); err != nil {
			return err
		}
	}
	v, err := db.run(ctx, op, scriptFwdApply, []string{f.home}, appendOps([]any{now}, f.ops)...)
	if err != nil {
		return err
	}
	return status(op, v)
}

// sweepForwarded applies again, at their homes, the forwarded writes
// every shard recorded more than forwardAge ago, at most max of each
// shard, and returns how many it applied and the first failure.
func (db *DB) sweepForwarded(ctx context.Context, max int) (int, error) {
	const op = "redis.sweepForwarded"
	applied := 0
	var first error
	failed := func(err error) {
		if first == nil {
			first = err
		}
	}
	for _, i := range db.shards.round() {
		pfx := db.shards.pfx(i)
		v, err := db.run(ctx, op, scriptFwdDue, []string{fwdKey(pfx)}, db.nowArg(), forwardAge, max)
		if err == nil && len(v)%2 != 0 {
			err = errs.E(op, errs.Internal, "unexpected script reply of %d items", len(v))
		}
		if err != nil {
			failed(err)
			continue
		}
		for j := 0; j < len(v); j += 2 {
			f, err := decodeForward(op, str(v[j]))
			if err == nil {
				err = db.applyForwarded(ctx, op, pfx, []forwarded{f}, str(v[j+1]))
			}
			if err != nil {
				failed(err)
				continue
			}
			applied++
		}
	}
	return applied, first
}
