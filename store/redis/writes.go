package redis

import (
	"slices"

	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/notes"
	"github.com/heraldgw/herald/sessions"
)

// writeOp is one command that another domain's write (sessions.Write)
// becomes inside a turn's commit: q_finish runs it after the
// lease was checked and the commit can no longer be refused. cmd must be
// one of lua/lib.lua's WRITE_OPS. args start with the key. now, when not
// 0, is the 1-based index of the argument the script replaces with its
// time in ms, so that what the write indexes by time follows the store's
// clock.
type writeOp struct {
	cmd  string
	args []any
	now  int
	// home is the prefix of the shard the write's keys live in, when that
	// is not the committing conversation's (a user's notes, a file, a
	// job); "" is the conversation's own. In the one-server layout every
	// home is the one shard. A write whose home is another shard cannot
	// run in the commit's script (one slot): it is forwarded, and so must
	// be idempotent (forward.go).
	home string
}

// writeOps turns a Finish's writes into the commands q_finish
// runs. Every kind this store applies is listed here; any other is
// refused with Invalid, before anything is written.
func (db *DB) writeOps(op string, ws []sessions.Write) ([]writeOp, error) {
	if err := sessions.CheckWrites(op, ws); err != nil {
		return nil, err
	}
	var ops []writeOp
	for _, w := range ws {
		switch w := w.(type) {
		case delegation.Dispatch:
			o, err := db.dispatchOp(op, w)
			if err != nil {
				return nil, err
			}
			ops = append(ops, o)
		case cronjobs.Create:
			cops, err := db.createJobOps(op, w.Job)
			if err != nil {
				return nil, err
			}
			ops = append(ops, cops...)
		case controllers.Put:
			o, err := db.putControllerOp(op, w.State)
			if err != nil {
				return nil, err
			}
			ops = append(ops, o)
		case sessions.Usage:
			if err := w.Check(op); err != nil {
				return nil, err
			}
			// The turn's own conversation, in practice: a usage of
			// another in another shard is forwarded, and counts twice
			// should the sweep apply it again (forward.go).
			meta, home := db.convKey(convTag(w.Conv), "meta"), db.convPfx(w.Conv)
			prompt, completion := sessions.UsageKeys(w.Model)
			ops = append(ops,
				writeOp{cmd: "HINCRBY", args: []any{meta, prompt, w.Prompt}, home: home},
				writeOp{cmd: "HINCRBY", args: []any{meta, completion, w.Completion}, home: home})
		case notes.Add:
			if err := w.Check(op, db.lim.MaxEntryBytes); err != nil {
				return nil, err
			}
			ops = append(ops, writeOp{cmd: "NOTEADD", args: []any{db.notesKey(w.User), w.ID, w.Text, 0}, now: 4, home: db.pfxOf(w.User)})
		case notes.Remove:
			if err := w.Check(op); err != nil {
				return nil, err
			}
			ops = append(ops, writeOp{cmd: "NOTEDEL", args: []any{db.notesKey(w.User), w.ID}, home: db.pfxOf(w.User)})
		case media.ReleaseFiles:
			if err := w.Check(op); err != nil {
				return nil, err
			}
			ops = append(ops, db.releaseFileOps(w.IDs)...)
		default:
			return nil, sessions.UnknownWrite(op, w)
		}
	}
	return ops, nil
}

// releaseFileOps are the DELs of files' keys, one per shard the files
// live in (a DEL of keys of two slots is refused on a cluster), each
// with its shard as its home; none for no files, as DEL takes a key.
func (db *DB) releaseFileOps(ids []string) []writeOp {
	var ops []writeOp
	for _, id := range ids {
		key, home := db.fileKey(id), db.pfxOf(id)
		i := slices.IndexFunc(ops, func(o writeOp) bool { return o.home == home })
		if i < 0 {
			ops = append(ops, writeOp{cmd: "DEL", home: home})
			i = len(ops) - 1
		}
		ops[i].args = append(ops[i].args, key)
	}
	return ops
}

// appendOps adds ops to q_finish's arguments: their count, then
// per command its name, its number of arguments, the index of the one to
// replace with the time, and the arguments.
func appendOps(args []any, ops []writeOp) []any {
	args = append(args, len(ops))
	for _, o := range ops {
		args = append(args, o.cmd, len(o.args), o.now)
		args = append(args, o.args...)
	}
	return args
}
