package delegation

import (
	"context"
	"time"

	"github.com/heraldgw/herald/internal/worktree"
)

// worktreeFinish bounds what ending a child's worktree may take.
const worktreeFinish = time.Minute

// worktreeRun is a child's worktree while it runs: where it works, and
// what to do with the worktree when it ends.
type worktreeRun struct {
	dir    string
	finish func() *Worktree
}

// worktree gives the child its own worktree of the workspace, or the
// shared workspace with the reason isolation did not apply, which its
// result then carries: never silently.
func (s *Spawner) worktree(ctx context.Context, childID string) *worktreeRun {
	if s.opts.Workspace == "" {
		return &worktreeRun{finish: func() *Worktree { return &Worktree{Skipped: "tools.workspace is not set"} }}
	}
	wt, dir, base, err := worktree.New(ctx, s.opts.Workspace, "subagent", childID)
	if err != nil {
		reason := err.Error()
		return &worktreeRun{dir: s.opts.Workspace, finish: func() *Worktree { return &Worktree{Skipped: reason} }}
	}
	if wt.Skipped != "" {
		return &worktreeRun{dir: s.opts.Workspace, finish: func() *Worktree { return wt }}
	}
	return &worktreeRun{dir: dir, finish: func() *Worktree {
		// The child's own context may have ended (a stop, a timeout):
		// its worktree is settled all the same.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), worktreeFinish)
		defer cancel()
		if err := worktree.Finish(ctx, wt, base); err != nil {
			s.log.Warn("settling a sub-agent's worktree failed; it is kept", "subagent", childID, "path", wt.Path, "err", err)
		}
		return wt
	}}
}
