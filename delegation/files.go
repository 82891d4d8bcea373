package delegation

import (
	"context"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/tools"
)

// HandedFiles are how the files a task hands its child are checked and
// told: media's ResolveFile and Peek, handed in by the gateway (media
// imports packages that import this one).
type HandedFiles struct {
	// Resolve checks path, a relative one taken from workspace: it must
	// be a file in workspace or among those herald keeps for the
	// conversation conv. It returns the path absolute, its links
	// followed. Errors: Invalid, NotFound.
	Resolve func(path, workspace, conv string) (string, error)
	// Peek is a file's size and type, and whether it is a picture a
	// model is shown.
	Peek func(path string) (size int64, mime string, image bool, err error)
}

// resolve checks the files each task hands its child and returns the
// tasks with them absolute: relative paths are taken from workspace,
// and herald's kept files are conv's. Without a Resolve no file is
// handed on. Errors: Invalid, NotFound: nothing was started.
func (h HandedFiles) resolve(op string, tasks []taskArgs, workspace, conv string) ([]taskArgs, error) {
	out := make([]taskArgs, len(tasks))
	copy(out, tasks)
	for i, t := range out {
		if len(t.Files) == 0 {
			continue
		}
		if h.Resolve == nil {
			return nil, errs.E(op, errs.Invalid, "task %d: files cannot be handed to a sub-agent here; nothing was started", i)
		}
		files := make([]string, len(t.Files))
		for j, p := range t.Files {
			abs, err := h.Resolve(p, workspace, conv)
			if err != nil {
				return nil, errs.E(op, errs.CodeOf(err), "task %d: %s; nothing was started", i, errs.Reason(err))
			}
			files[j] = abs
		}
		out[i].Files = files
	}
	return out, nil
}

// keptConv is the conversation whose kept files a call of delegate_task
// may hand on: the turn's own, or, in a child, the conversation it works
// for; "" when none is known (only the workspace's files then).
func keptConv(ctx context.Context, turn *tools.Turn) string {
	if DepthOf(ctx) == 0 {
		return turn.Conv
	}
	for l, _ := ctx.Value(liveKey{}).(*Live); l != nil; l = l.parent {
		if l.Conv != "" {
			return l.Conv
		}
	}
	return ""
}
