package kanban_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/kanban"
)

// funcLanes is one in-process lane, herald, whose workers run work.
func funcLanes(work func(ctx context.Context, spec kanban.WorkerSpec) error) map[string]kanban.LaneConfig {
	return map[string]kanban.LaneConfig{"herald": {Lane: kanban.FuncLane{Run: work}}}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantFile(t *testing.T, path, content string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != content {
		t.Errorf("%s = %q, %v; want %q", path, b, err, content)
	}
}

// A scratch card's worker works in a directory of its own; what it
// names as artifacts is promoted out of it when it completes, and the
// directory goes once the card is done.
func TestScratchWorkspacePromotesArtifacts(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		var workspace string
		d, ended := h.dispatcher("gw-a", h.svc, funcLanes(func(ctx context.Context, spec kanban.WorkerSpec) error {
			workspace = spec.Workspace
			write(t, filepath.Join(spec.Workspace, "report.md"), "the report")
			write(t, filepath.Join(spec.Workspace, "out", "data.csv"), "a,b")
			write(t, filepath.Join(spec.Workspace, "scratch.tmp"), "left behind")
			res := kanban.Result{Summary: "wrote it", Artifacts: []string{"report.md", filepath.Join(spec.Workspace, "out")}}
			_, err := h.svc.Complete(ctx, spec.Card.ID, spec.Token, res, "worker")
			return err
		}), nil)
		k := h.create(kanban.CreateSpec{Title: "write a report", Assignee: "herald"})
		h.tick(d)
		waitEnded(t, ended, 1)
		done := h.wantStatus(k.ID, kanban.StatusDone)
		run := mustRuns(t, h, k.ID)[0].ID
		dest := filepath.Join(h.svc.Root, "artifacts", k.ID, run)
		want := []string{filepath.Join(dest, "report.md"), filepath.Join(dest, "out")}
		if got := done.Result.Artifacts; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("artifacts %q, want them where they were promoted to %q", got, want)
		}
		wantFile(t, want[0], "the report")
		wantFile(t, filepath.Join(want[1], "data.csv"), "a,b")
		if workspace != filepath.Join(h.svc.Root, "work", k.ID) {
			t.Errorf("workspace %s", workspace)
		}
		if _, err := os.Stat(workspace); !os.IsNotExist(err) {
			t.Errorf("the done card's scratch workspace is still there (%v)", err)
		}
	})
}

// An artifact the worker names that is not in its workspace is refused:
// the card stays with its worker, which can say again.
func TestMissingArtifactRefused(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		k := h.claim(h.create(kanban.CreateSpec{Title: "x"}).ID)
		_, err := h.svc.Complete(h.ctx, k.ID, k.Claim.Token, kanban.Result{Summary: "done", Artifacts: []string{"nope.txt"}}, "worker")
		if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "nope.txt") {
			t.Fatalf("Complete with a missing artifact = %v, want Invalid naming it", err)
		}
		h.wantStatus(k.ID, kanban.StatusRunning)
	})
}

// A worktree card's runs work in one git worktree of its repository,
// which keeps what an earlier run left; once the card is done an empty
// worktree is removed with its branch, and one with work in it is kept
// and said so on the card.
func TestWorktreeWorkspace(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		repo := testkit.GitRepo(t)
		runs := 0
		d, ended := h.dispatcher("gw-a", h.svc, funcLanes(func(ctx context.Context, spec kanban.WorkerSpec) error {
			if spec.Card.Title == "idle" {
				_, err := h.svc.Complete(ctx, spec.Card.ID, spec.Token, kanban.Result{Summary: "nothing to do"}, "worker")
				return err
			}
			runs++
			if runs == 1 {
				write(t, filepath.Join(spec.Workspace, "half"), "half done")
				return errors.New("interrupted")
			}
			wantFile(t, filepath.Join(spec.Workspace, "half"), "half done")
			testkit.Git(t, spec.Workspace, "add", "half")
			testkit.Git(t, spec.Workspace, "commit", "-q", "-m", "half")
			_, err := h.svc.Complete(ctx, spec.Card.ID, spec.Token, kanban.Result{Summary: "committed"}, "worker")
			return err
		}), nil)
		k := h.create(kanban.CreateSpec{Title: "change the repo", Assignee: "herald", Workspace: kanban.Workspace{Kind: kanban.WorkspaceWorktree, Path: repo}})
		h.tick(d)
		waitEnded(t, ended, 1)
		h.wantStatus(k.ID, kanban.StatusReady)
		h.tick(d)
		waitEnded(t, ended, 1)
		h.wantStatus(k.ID, kanban.StatusDone)
		path := filepath.Join(repo, ".worktrees", "kanban-"+k.ID)
		if !testkit.GitBranchExists(t, repo, "herald-kanban/"+k.ID) {
			t.Errorf("the worktree's branch with a commit was removed")
		}
		cs, err := h.svc.Store.Comments(h.ctx, k.ID)
		if err != nil || len(cs) != 1 || !strings.Contains(cs[0].Text, path) || !strings.Contains(cs[0].Text, "1 commit(s)") {
			t.Errorf("comments %+v, %v; want one saying the worktree is kept with its commit", cs, err)
		}

		idle := h.create(kanban.CreateSpec{Title: "idle", Assignee: "herald", Workspace: kanban.Workspace{Kind: kanban.WorkspaceWorktree, Path: repo}})
		h.tick(d)
		waitEnded(t, ended, 1)
		h.wantStatus(idle.ID, kanban.StatusDone)
		if _, err := os.Stat(filepath.Join(repo, ".worktrees", "kanban-"+idle.ID)); !os.IsNotExist(err) {
			t.Errorf("the empty worktree is still there (%v)", err)
		}
		if testkit.GitBranchExists(t, repo, "herald-kanban/"+idle.ID) {
			t.Errorf("the empty worktree's branch is still there")
		}
	})
}

// A workspace that cannot be had is refused at create when the card
// says too little, and is a failure with the reason when it is gone by
// the time a worker would start.
func TestWorkspaceRefusals(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		for _, w := range []kanban.Workspace{{Kind: kanban.WorkspaceWorktree}, {Kind: kanban.WorkspaceDir, Path: "relative/dir"}} {
			if _, _, err := h.svc.Create(h.ctx, kanban.CreateSpec{Title: "x", Workspace: w}); !errs.Is(err, errs.Invalid) {
				t.Errorf("Create with workspace %+v = %v, want Invalid", w, err)
			}
		}
		h.svc.Repository = t.TempDir() // tools.workspace, not a repository
		testkit.HermeticGit(t, h.svc.Repository)
		notRepo := h.create(kanban.CreateSpec{Title: "x", Assignee: "herald", Workspace: kanban.Workspace{Kind: kanban.WorkspaceWorktree}})
		if notRepo.Workspace.Path != h.svc.Repository {
			t.Errorf("a worktree card with no repository has %q, want tools.workspace", notRepo.Workspace.Path)
		}
		gone := h.create(kanban.CreateSpec{Title: "x", Assignee: "herald", Workspace: kanban.Workspace{Kind: kanban.WorkspaceDir, Path: filepath.Join(t.TempDir(), "gone")}})
		d, _ := h.dispatcher("gw-a", h.svc, funcLanes(func(context.Context, kanban.WorkerSpec) error { return nil }), nil)
		if rep := h.tick(d); len(rep.Released) != 2 {
			t.Fatalf("tick = %+v, want both released", rep)
		}
		if k := h.wantStatus(notRepo.ID, kanban.StatusReady); k.Failures != 1 || !strings.Contains(k.LastError, "is not inside a git repository") {
			t.Errorf("a worktree card outside a repository = %+v", k)
		}
		if k := h.wantStatus(gone.ID, kanban.StatusReady); k.Failures != 1 || !strings.Contains(k.LastError, "is not there") {
			t.Errorf("a dir card whose directory is gone = %+v", k)
		}
	})
}

// A card done by hand keeps its scratch workspace until it is archived
// (by hand, or by herald kanban gc).
func TestArchiveRemovesTheScratchWorkspace(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		k := h.claim(h.create(kanban.CreateSpec{Title: "x"}).ID)
		dir := filepath.Join(h.svc.Root, "work", k.ID)
		write(t, filepath.Join(dir, "notes"), "x")
		if _, err := h.svc.Complete(h.ctx, k.ID, k.Claim.Token, kanban.Result{Summary: "done by hand"}, "person"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("the workspace went before the card was archived: %v", err)
		}
		if _, err := h.svc.Archive(h.ctx, k.ID, "person"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the archived card's scratch workspace is still there (%v)", err)
		}
	})
}
