package worktree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
)

func TestNew(t *testing.T) {
	repo := testkit.GitRepo(t)
	head := testkit.Git(t, repo, "rev-parse", "HEAD")
	tests := []struct {
		desc      string
		workspace string
		childID   string
		wantDir   string // relative to the worktree
	}{
		{desc: "the repository's top", workspace: repo, childID: "sub_top", wantDir: "."},
		{desc: "a subdirectory maps to the same one", workspace: filepath.Join(repo, "sub"), childID: "sub_inner", wantDir: "sub"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			wt, dir, base, err := New(context.Background(), tc.workspace, "subagent", tc.childID)
			if err != nil {
				t.Fatal(err)
			}
			want := &Worktree{
				Path:   filepath.Join(repo, ".worktrees", "subagent-"+tc.childID),
				Branch: "herald-subagent/" + tc.childID,
			}
			if diff := cmp.Diff(want, wt); diff != "" {
				t.Errorf("worktree (-want +got):\n%s", diff)
			}
			if want := filepath.Join(want.Path, tc.wantDir); dir != want {
				t.Errorf("dir %s, want %s", dir, want)
			}
			if base != head {
				t.Errorf("base %s, want HEAD %s", base, head)
			}
			if got := testkit.Git(t, wt.Path, "rev-parse", "--abbrev-ref", "HEAD"); got != wt.Branch {
				t.Errorf("the worktree is on %s, want %s", got, wt.Branch)
			}
			if b, err := os.ReadFile(filepath.Join(wt.Path, "sub", "file")); err != nil || string(b) != "inner\n" {
				t.Errorf("the worktree does not hold the repository's files: %q, %v", b, err)
			}
		})
	}
}

func TestFinish(t *testing.T) {
	tests := []struct {
		desc string
		work func(t *testing.T, dir string) // what the child did in its worktree
		want Worktree                       // besides Path and Branch
	}{
		{desc: "nothing: pruned", work: func(*testing.T, string) {}, want: Worktree{Pruned: true}},
		{desc: "only an ignored file: pruned", work: func(t *testing.T, dir string) {
			// What .gitignore leaves out (a build's output) is nothing of
			// the child's work.
			if err := os.Mkdir(filepath.Join(dir, "build"), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, "build", "out"), "x")
		}, want: Worktree{Pruned: true}},
		{desc: "a commit: kept", work: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "new"), "x")
			testkit.Git(t, dir, "add", "new")
			testkit.Git(t, dir, "commit", "-q", "-m", "new")
		}, want: Worktree{Commits: 1}},
		{desc: "an uncommitted file: kept dirty", work: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "draft"), "x")
		}, want: Worktree{Dirty: true}},
		{desc: "a changed file: kept dirty", work: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "README"), "changed\n")
		}, want: Worktree{Dirty: true}},
		{desc: "a commit off the branch: kept", work: func(t *testing.T, dir string) {
			testkit.Git(t, dir, "checkout", "-q", "--detach")
			write(t, filepath.Join(dir, "new"), "x")
			testkit.Git(t, dir, "add", "new")
			testkit.Git(t, dir, "commit", "-q", "-m", "detached")
		}, want: Worktree{Commits: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			repo := testkit.GitRepo(t)
			wt, dir, base, err := New(context.Background(), repo, "subagent", "sub_1")
			if err != nil || wt.Skipped != "" {
				t.Fatalf("got %+v, %v", wt, err)
			}
			tc.work(t, dir)
			if err := Finish(context.Background(), wt, base); err != nil {
				t.Fatal(err)
			}
			tc.want.Path, tc.want.Branch = wt.Path, "herald-subagent/sub_1"
			if diff := cmp.Diff(tc.want, *wt); diff != "" {
				t.Errorf("worktree (-want +got):\n%s", diff)
			}
			_, statErr := os.Stat(wt.Path)
			if gone := os.IsNotExist(statErr); gone != tc.want.Pruned {
				t.Errorf("worktree path gone: %v, want %v", gone, tc.want.Pruned)
			}
			if exists := testkit.GitBranchExists(t, repo, wt.Branch); exists == tc.want.Pruned {
				t.Errorf("branch exists: %v, want %v", exists, !tc.want.Pruned)
			}
			if tc.want.Pruned {
				if _, err := os.Stat(filepath.Join(repo, ".worktrees")); !os.IsNotExist(err) {
					t.Errorf("the empty .worktrees is left behind (%v)", err)
				}
			}
		})
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestNewSkipped(t *testing.T) {
	tests := []struct {
		desc      string
		workspace func(t *testing.T) string
		want      string // the reason, with <dir> for the workspace
	}{
		{desc: "no workspace", workspace: func(*testing.T) string { return "" }, want: "no directory to branch from is set"},
		{desc: "not a git repository", workspace: func(t *testing.T) string {
			dir := t.TempDir()
			testkit.HermeticGit(t, dir)
			return dir
		}, want: "<dir> is not inside a git repository"},
		{desc: "a repository without commits", workspace: func(t *testing.T) string {
			dir := t.TempDir()
			testkit.HermeticGit(t, dir)
			testkit.Git(t, dir, "init", "-q")
			return dir
		}, want: "the repository has no commits yet"},
		{desc: "a missing directory", workspace: func(t *testing.T) string {
			return filepath.Join(t.TempDir(), "nope")
		}, want: "<dir> is not a directory"},
		{desc: "git not installed", workspace: func(t *testing.T) string {
			repo := testkit.GitRepo(t)
			t.Setenv("PATH", t.TempDir())
			return repo
		}, want: "git is not installed"},
		{desc: "git worktree add fails", workspace: func(t *testing.T) string {
			repo := testkit.GitRepo(t)
			testkit.Git(t, repo, "branch", "herald-subagent/sub_1")
			return repo
		}, want: "git worktree add failed: fatal: a branch named 'herald-subagent/sub_1' already exists"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ws := tc.workspace(t)
			wt, dir, base, err := New(context.Background(), ws, "subagent", "sub_1")
			if err != nil {
				t.Fatal(err)
			}
			want := &Worktree{Skipped: strings.ReplaceAll(tc.want, "<dir>", ws)}
			if diff := cmp.Diff(want, wt); diff != "" {
				t.Errorf("worktree (-want +got):\n%s", diff)
			}
			if dir != ws || base != "" {
				t.Errorf("dir %q, base %q; want the shared workspace %q and no base", dir, base, ws)
			}
			// Finishing a skipped worktree leaves everything as it was.
			if err := Finish(context.Background(), wt, base); err != nil || !cmp.Equal(want, wt) {
				t.Errorf("finishing a skipped worktree: %+v, %v", wt, err)
			}
		})
	}
}

func TestNewRefusesBadNames(t *testing.T) {
	for _, id := range []string{"", "../x", "a b", "-x", "x.lock", "a..b"} {
		if _, _, _, err := New(context.Background(), t.TempDir(), "subagent", id); !errs.Is(err, errs.Invalid) {
			t.Errorf("id %q: got %v, want Invalid", id, err)
		}
		if _, _, _, err := New(context.Background(), t.TempDir(), id, "sub_1"); !errs.Is(err, errs.Invalid) {
			t.Errorf("kind %q: got %v, want Invalid", id, err)
		}
	}
}

// Open gives a card's worktree again on its next run, with what the
// earlier run left in it, and the base its branch forked from.
func TestOpenReusesTheWorktree(t *testing.T) {
	repo := testkit.GitRepo(t)
	head := testkit.Git(t, repo, "rev-parse", "HEAD")
	wt, dir, base, err := Open(context.Background(), repo, "kanban", "t_1")
	if err != nil || wt.Skipped != "" || base != head {
		t.Fatalf("first Open: %+v, base %s, %v", wt, base, err)
	}
	if got, ok := Find(context.Background(), repo, "kanban", "t_1"); !ok || got != dir {
		t.Errorf("Find = %s, %v; want %s", got, ok, dir)
	}
	if got, ok := Find(context.Background(), repo, "kanban", "t_2"); ok {
		t.Errorf("Find of work with no worktree = %s, want none", got)
	}
	write(t, filepath.Join(dir, "draft"), "x")
	testkit.Git(t, dir, "add", "draft")
	testkit.Git(t, dir, "commit", "-q", "-m", "draft")
	// HEAD of the repository moves on meanwhile.
	write(t, filepath.Join(repo, "later"), "y")
	testkit.Git(t, repo, "add", "later")
	testkit.Git(t, repo, "commit", "-q", "-m", "later")
	again, dir2, base2, err := Open(context.Background(), repo, "kanban", "t_1")
	if err != nil || !cmp.Equal(wt, again) || dir2 != dir || base2 != head {
		t.Fatalf("second Open: %+v in %s, base %s (want %s), %v", again, dir2, base2, head, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir2, "draft")); err != nil || string(b) != "x" {
		t.Errorf("the earlier run's work is not there: %q, %v", b, err)
	}
	// Its directory removed by hand, the worktree is made again on its
	// branch, with the commit on it.
	if err := os.RemoveAll(again.Path); err != nil {
		t.Fatal(err)
	}
	third, dir3, base3, err := Open(context.Background(), repo, "kanban", "t_1")
	if err != nil || third.Skipped != "" || dir3 != dir || base3 != head {
		t.Fatalf("Open after the directory went: %+v in %s, base %s, %v", third, dir3, base3, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir3, "draft")); err != nil || string(b) != "x" {
		t.Errorf("the branch's work is not in the worktree made again: %q, %v", b, err)
	}
	if err := Finish(context.Background(), third, base3); err != nil || third.Commits != 1 || third.Pruned {
		t.Errorf("Finish: %+v, %v; want it kept with 1 commit", third, err)
	}
}
