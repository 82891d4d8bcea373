// Package worktree gives a piece of work (a sub-agent, a kanban card) a
// git worktree of its own, on a branch of its own, and settles it when
// the work ends: removed when nothing is in it, kept otherwise.
package worktree

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/proc"
)

const (
	// worktreesDir holds a repository's worktrees, at its top.
	worktreesDir = ".worktrees"
	// stderrTail bounds how much of git's complaint a Skipped reason keeps.
	stderrTail = 300
)

// validName is what may name a worktree directory and a branch.
var validName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// mu serialises adding and removing worktrees: git takes locks on the
// repository's refs and worktree list, and pieces of work that start or
// end together would otherwise fail on each other's.
var mu sync.Mutex

// Worktree is what a git worktree came to.
type Worktree struct {
	Path    string `json:"path,omitempty"`
	Branch  string `json:"branch,omitempty"`
	Commits int    `json:"commits,omitempty"`
	Dirty   bool   `json:"dirty,omitempty"`
	Pruned  bool   `json:"pruned,omitempty"`
	Skipped string `json:"skipped,omitempty"` // why isolation did not apply
}

// New gives the work id of kind (a "subagent", a "kanban" card) its
// own git worktree of workspace: <repo>/.worktrees/<kind>-<id> on a new
// branch herald-<kind>/<id> from HEAD. It returns the worktree, the
// directory the work is done in (the workspace's place in the worktree:
// a workspace that is a subdirectory of the repository maps to the same
// subdirectory) and base, the commit HEAD was at, for Finish.
//
// When isolation cannot apply, the Worktree has only Skipped, the reason
// (a person can act on it), dir is workspace and base is empty.
// Errors: Invalid (a kind or id that cannot name a branch), Unavailable
// (ctx ended).
func New(ctx context.Context, workspace, kind, id string) (wt *Worktree, dir, base string, err error) {
	return open(ctx, workspace, kind, id, false)
}

// Open is New for work that may have a worktree already (a card run
// again): the worktree of kind and id that is there is given again, with
// base where its branch left HEAD's history.
func Open(ctx context.Context, workspace, kind, id string) (wt *Worktree, dir, base string, err error) {
	return open(ctx, workspace, kind, id, true)
}

// Find is the directory work of kind and id does its work in, in the
// worktree Open gave it, when that worktree is there; it makes nothing.
func Find(ctx context.Context, workspace, kind, id string) (dir string, ok bool) {
	at, err := place(ctx, workspace, kind, id)
	if err != nil || !at.exists(ctx) {
		return "", false
	}
	return at.dir, true
}

// where is the worktree of kind and id for a workspace: the
// repository's top, the worktree's path and branch, and dir, the
// workspace's place in it.
type where struct {
	top, path, branch, dir string
}

// place works out where the worktree of kind and id of workspace's
// repository is, or would be. Its error is git's: workspace is not in
// a repository.
func place(ctx context.Context, workspace, kind, id string) (where, error) {
	out, err := git(ctx, workspace, "rev-parse", "--show-toplevel", "--show-prefix")
	if err != nil {
		return where{}, err
	}
	top, prefix, _ := strings.Cut(out, "\n")
	path := filepath.Join(top, worktreesDir, kind+"-"+id)
	return where{top: top, path: path, branch: "herald-" + kind + "/" + id, dir: filepath.Join(path, filepath.FromSlash(prefix))}, nil
}

// exists reports whether the worktree is there.
func (w where) exists(ctx context.Context) bool {
	got, err := git(ctx, w.path, "rev-parse", "--show-toplevel")
	return err == nil && got == w.path
}

func open(ctx context.Context, workspace, kind, id string, reuse bool) (wt *Worktree, dir, base string, err error) {
	const op = "worktree.New"
	for _, name := range []string{kind, id} {
		if !validName.MatchString(name) || strings.Contains(name, "..") || strings.HasSuffix(name, ".lock") {
			return nil, "", "", errs.E(op, errs.Invalid, "%q cannot name a branch", name)
		}
	}
	skip := func(format string, args ...any) (*Worktree, string, string, error) {
		if ctx.Err() != nil {
			return nil, "", "", errs.Wrap(op, errs.Unavailable, context.Cause(ctx))
		}
		return &Worktree{Skipped: fmt.Sprintf(format, args...)}, workspace, "", nil
	}
	if workspace == "" {
		return skip("no directory to branch from is set")
	}
	if _, err := exec.LookPath("git"); err != nil {
		return skip("git is not installed")
	}
	if fi, err := os.Stat(workspace); err != nil || !fi.IsDir() {
		return skip("%s is not a directory", workspace)
	}
	at, err := place(ctx, workspace, kind, id)
	if err != nil {
		return skip("%s is not inside a git repository", workspace)
	}
	top, path, branch := at.top, at.path, at.branch
	base, err = git(ctx, top, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		return skip("the repository has no commits yet")
	}
	wt = &Worktree{Path: path, Branch: branch}
	dir = at.dir
	fork := func() (*Worktree, string, string, error) {
		if fork, err := git(ctx, top, "merge-base", base, branch); err == nil {
			return wt, dir, fork, nil
		}
		return skip("%s is a worktree whose branch %s shares no history with HEAD", path, branch)
	}
	if reuse && at.exists(ctx) {
		return fork()
	}
	mu.Lock()
	if reuse {
		// The directory went (removed by hand) but its branch, with the
		// work on it, may be there: the worktree is made again on it.
		_, _ = git(ctx, top, "worktree", "prune")
		if _, err := git(ctx, top, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch); err == nil {
			_, err = git(ctx, top, "worktree", "add", "--quiet", path, branch)
			mu.Unlock()
			if err != nil {
				return skip("git worktree add failed: %s", stderrOf(err))
			}
			return fork()
		}
	}
	_, err = git(ctx, top, "worktree", "add", "--quiet", "-b", branch, path, base)
	mu.Unlock()
	if err != nil {
		return skip("git worktree add failed: %s", stderrOf(err))
	}
	return wt, dir, base, nil
}

// Finish settles a worktree when its work has ended: it counts the
// commits on its branch (or on the worktree's HEAD, if the work moved
// off the branch) that base lacks and checks for uncommitted changes. A
// worktree with neither is removed with its branch (Pruned); any other
// is kept, with Commits and Dirty saying what is in it. A skipped
// worktree is left as it is. Give it a ctx that outlives the work's: git
// needs to run after the work was stopped.
// Errors: Unavailable (git could not tell; the worktree is kept).
func Finish(ctx context.Context, wt *Worktree, base string) error {
	const op = "worktree.Finish"
	if wt == nil || wt.Skipped != "" || wt.Path == "" {
		return nil
	}
	if base == "" {
		return errs.E(op, errs.Invalid, "no base commit for the worktree %s; it is kept", wt.Path)
	}
	status, err := git(ctx, wt.Path, "status", "--porcelain")
	if err != nil {
		return errs.E(op, errs.Unavailable, "git status in %s: %s; the worktree is kept", wt.Path, stderrOf(err))
	}
	wt.Dirty = status != ""
	count, err := git(ctx, wt.Path, "rev-list", "--count", "HEAD", wt.Branch, "^"+base, "--")
	if err != nil {
		return errs.E(op, errs.Unavailable, "counting the commits of %s: %s; the worktree is kept", wt.Branch, stderrOf(err))
	}
	if wt.Commits, err = strconv.Atoi(count); err != nil {
		return errs.E(op, errs.Unavailable, "git rev-list --count gave %q; the worktree is kept", count)
	}
	if wt.Dirty || wt.Commits > 0 {
		return nil
	}
	// The worktree is <top>/.worktrees/<kind>-<id>, as New made it.
	top := filepath.Dir(filepath.Dir(wt.Path))
	mu.Lock()
	defer mu.Unlock()
	if _, err := git(ctx, top, "worktree", "remove", wt.Path); err != nil {
		return errs.E(op, errs.Unavailable, "git worktree remove %s: %s; the worktree is kept", wt.Path, stderrOf(err))
	}
	if _, err := git(ctx, top, "branch", "-D", wt.Branch); err != nil {
		return errs.E(op, errs.Unavailable, "the worktree was removed, its branch was not (git branch -D %s: %s)", wt.Branch, stderrOf(err))
	}
	_ = os.Remove(filepath.Join(top, worktreesDir)) // only when no other worktree is left in it
	wt.Pruned = true
	return nil
}

// gitError is a git command that failed, with the end of what it said.
type gitError struct {
	args   []string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	return "git " + strings.Join(e.args, " ") + ": " + e.err.Error() + ": " + e.stderr
}

func (e *gitError) Unwrap() error { return e.err }

// stderrOf is what a failed git command said, or its error.
func stderrOf(err error) string {
	if ge, ok := err.(*gitError); ok && ge.stderr != "" {
		return ge.stderr
	}
	return err.Error()
}

// git runs git -C dir args and returns its output without the final
// newline. It never prompts: a command that would wait for a person
// fails instead. It gets the base environment alone (proc.Env): a hook
// in the repository, which an agent may have written, sees none of
// herald's secrets.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = (*proc.Env)(nil).Build("GIT_TERMINAL_PROMPT=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.ReplaceAll(strings.TrimSpace(stderr.String()), "\n", "; ")
		if len(msg) > stderrTail {
			msg = "…" + msg[len(msg)-stderrTail:]
		}
		return "", &gitError{args: args, stderr: msg, err: err}
	}
	return strings.TrimSuffix(stdout.String(), "\n"), nil
}
