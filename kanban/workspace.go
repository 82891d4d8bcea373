package kanban

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/worktree"
)

// A board home (Service.Root, $HERALD_HOME/kanban) holds:
//
//	work/<card>/              a scratch card's workspace, removed once the card is done
//	artifacts/<card>/<run>/   what a run's complete promoted out of it
//	logs/<card>/<run>.log     each run's output
//
// A worktree card's workspace is a git worktree of its repository,
// <repo>/.worktrees/kanban-<card> on branch herald-kanban/<card>: every
// run of the card works in it, and once the card is done it is removed
// if nothing is in it, else kept with its branch and said so.
const worktreeKind = "kanban"

// settleTimeout bounds what settling a done card's workspace may take.
const settleTimeout = time.Minute

// LogPath is where the output of a card's run is kept.
func (s *Service) LogPath(card, run string) string {
	return filepath.Join(s.Root, "logs", card, run+".log")
}

func (s *Service) scratchDir(card string) string { return filepath.Join(s.Root, "work", card) }

// workspaceRun is a card's workspace while a worker runs in it.
type workspaceRun struct {
	dir  string
	tree *worktree.Worktree // a worktree card's
	base string             // where its branch left HEAD's history
}

// openWorkspace makes (or opens again, for a card run before) the
// directory a card's worker works in. A workspace that cannot be made is
// an error a person can act on: the worker does not start.
func (s *Service) openWorkspace(ctx context.Context, k Card) (workspaceRun, error) {
	switch k.Workspace.Kind {
	case WorkspaceDir:
		if fi, err := os.Stat(k.Workspace.Path); err != nil || !fi.IsDir() {
			return workspaceRun{}, fmt.Errorf("the card's directory %s is not there", k.Workspace.Path)
		}
		return workspaceRun{dir: k.Workspace.Path}, nil
	case WorkspaceWorktree:
		wt, dir, base, err := worktree.Open(ctx, k.Workspace.Path, worktreeKind, k.ID)
		if err != nil {
			return workspaceRun{}, err
		}
		if wt.Skipped != "" {
			return workspaceRun{}, fmt.Errorf("the card's git worktree cannot be made: %s", wt.Skipped)
		}
		return workspaceRun{dir: dir, tree: wt, base: base}, nil
	default:
		if s.Root == "" {
			return workspaceRun{}, fmt.Errorf("this process has no board home for a scratch workspace")
		}
		dir := s.scratchDir(k.ID)
		return workspaceRun{dir: dir}, os.MkdirAll(dir, 0o755)
	}
}

// workspaceDir is the directory a card's worker works in, for what runs
// on its behalf (a completion check), when it is there: "" when not.
// It makes nothing: the process that completes a card need not be the
// one its worker ran on.
func (s *Service) workspaceDir(ctx context.Context, k Card) string {
	switch k.Workspace.Kind {
	case WorkspaceDir:
		return k.Workspace.Path
	case WorkspaceWorktree:
		if dir, ok := worktree.Find(ctx, k.Workspace.Path, worktreeKind, k.ID); ok {
			return dir
		}
		return ""
	}
	if s.Root == "" {
		return ""
	}
	if fi, err := os.Stat(s.scratchDir(k.ID)); err != nil || !fi.IsDir() {
		return ""
	}
	return s.scratchDir(k.ID)
}

// settleWorkspace, once k (as its worker's end left it) is done,
// removes its scratch workspace (its artifacts were promoted when it
// completed) and settles its worktree: removed with its branch when
// nothing is in it, else kept, and a comment on the card says where and
// what is in it.
func (s *Service) settleWorkspace(ctx context.Context, k Card, ws workspaceRun) error {
	if k.Status != StatusDone {
		return nil
	}
	card := k.ID
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	switch k.Workspace.Kind {
	case WorkspaceScratch:
		return os.RemoveAll(ws.dir)
	case WorkspaceWorktree:
		if ws.tree == nil {
			return nil
		}
		if err := worktree.Finish(ctx, ws.tree, ws.base); err != nil {
			return err
		}
		if ws.tree.Pruned {
			return nil
		}
		var what []string
		if ws.tree.Commits > 0 {
			what = append(what, fmt.Sprintf("%d commit(s) beyond %s", ws.tree.Commits, shortCommit(ws.base)))
		}
		if ws.tree.Dirty {
			what = append(what, "uncommitted changes")
		}
		_, err := s.Comment(ctx, card, "herald", fmt.Sprintf("Its worktree %s is kept on branch %s: %s.", ws.tree.Path, ws.tree.Branch, strings.Join(what, ", ")))
		return err
	}
	return nil
}

func shortCommit(c string) string { return c[:min(len(c), 12)] }

// promoteArtifacts copies the artifacts of a scratch card's run out of
// its workspace, which goes once the card is done, to
// artifacts/<card>/<run>/, and returns res naming them where they are
// now. A relative path is the workspace's; one inside it that is not
// there is refused. A path outside the workspace is kept as given.
// Errors: Invalid (an artifact that is not there, or cannot be copied).
func (s *Service) promoteArtifacts(op string, k Card, res Result) (Result, error) {
	if k.Workspace.Kind != WorkspaceScratch || s.Root == "" || len(res.Artifacts) == 0 {
		return res, nil
	}
	run := "done"
	if k.Claim != nil {
		run = k.Claim.Run
	}
	work, dest := s.scratchDir(k.ID), filepath.Join(s.Root, "artifacts", k.ID, run)
	out := make([]string, 0, len(res.Artifacts))
	for _, a := range res.Artifacts {
		p := a
		if !filepath.IsAbs(p) {
			p = filepath.Join(work, p)
		}
		rel, err := filepath.Rel(work, filepath.Clean(p))
		if rel == "." {
			return res, errs.E(op, errs.Invalid, "artifact %s is the whole workspace: name the files or directories in it to keep", a)
		}
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			out = append(out, filepath.Clean(p)) // not the workspace's: it stays where it is
			continue
		}
		to := filepath.Join(dest, rel)
		if err := copyArtifact(p, to); err != nil {
			return res, errs.E(op, errs.Invalid, "artifact %s: %v", a, err)
		}
		out = append(out, to)
	}
	res.Artifacts = out
	return res, nil
}

// copyArtifact copies the file or directory tree from to to, replacing
// what an earlier try left there.
func copyArtifact(from, to string) error {
	fi, err := os.Lstat(from)
	if os.IsNotExist(err) {
		return fmt.Errorf("it is not in the card's workspace")
	}
	if err != nil {
		return err
	}
	if err := os.RemoveAll(to); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		return os.CopyFS(to, os.DirFS(from))
	case !fi.Mode().IsRegular():
		return fmt.Errorf("only files and directories are promoted, not %s", fi.Mode().Type())
	}
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
