package delegation

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/errs"
)

// hermeticGit keeps the user's and the system's git config out of the
// test, and git from looking for a repository above dir.
func hermeticGit(t *testing.T, dir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed: the worktree tests need it")
	}
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
}

// runGit runs git -C dir args as a fixed author and returns its output.
func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	all := append([]string{"-C", dir, "-c", "user.name=Herald Test", "-c", "user.email=test@herald.invalid", "-c", "commit.gpgsign=false"}, args...)
	out, err := exec.Command("git", all...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo is a git repository with one commit of README, sub/file and a
// .gitignore of build/.
func newRepo(t *testing.T) string {
	t.Helper()
	repo := t.TempDir()
	hermeticGit(t, repo)
	runGit(t, repo, "init", "-q", "-b", "main")
	for name, content := range map[string]string{"README": "hello\n", "sub/file": "inner\n", ".gitignore": "build/\n"} {
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runGit(t, repo, "add", ".")
	runGit(t, repo, "commit", "-q", "-m", "first")
	return repo
}

func branchExists(t *testing.T, repo, branch string) bool {
	t.Helper()
	return runGit(t, repo, "branch", "--list", branch) != ""
}

func TestNewWorktree(t *testing.T) {
	repo := newRepo(t)
	head := runGit(t, repo, "rev-parse", "HEAD")
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
			wt, dir, base, err := NewWorktree(context.Background(), tc.workspace, tc.childID)
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
			if got := runGit(t, wt.Path, "rev-parse", "--abbrev-ref", "HEAD"); got != wt.Branch {
				t.Errorf("the worktree is on %s, want %s", got, wt.Branch)
			}
			if b, err := os.ReadFile(filepath.Join(wt.Path, "sub", "file")); err != nil || string(b) != "inner\n" {
				t.Errorf("the worktree does not hold the repository's files: %q, %v", b, err)
			}
		})
	}
}

func TestFinishWorktree(t *testing.T) {
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
			runGit(t, dir, "add", "new")
			runGit(t, dir, "commit", "-q", "-m", "new")
		}, want: Worktree{Commits: 1}},
		{desc: "an uncommitted file: kept dirty", work: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "draft"), "x")
		}, want: Worktree{Dirty: true}},
		{desc: "a changed file: kept dirty", work: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "README"), "changed\n")
		}, want: Worktree{Dirty: true}},
		{desc: "a commit off the branch: kept", work: func(t *testing.T, dir string) {
			runGit(t, dir, "checkout", "-q", "--detach")
			write(t, filepath.Join(dir, "new"), "x")
			runGit(t, dir, "add", "new")
			runGit(t, dir, "commit", "-q", "-m", "detached")
		}, want: Worktree{Commits: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			repo := newRepo(t)
			wt, dir, base, err := NewWorktree(context.Background(), repo, "sub_1")
			if err != nil || wt.Skipped != "" {
				t.Fatalf("got %+v, %v", wt, err)
			}
			tc.work(t, dir)
			if err := FinishWorktree(context.Background(), wt, base); err != nil {
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
			if exists := branchExists(t, repo, wt.Branch); exists == tc.want.Pruned {
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

func TestNewWorktreeSkipped(t *testing.T) {
	tests := []struct {
		desc      string
		workspace func(t *testing.T) string
		want      string // the reason, with <dir> for the workspace
	}{
		{desc: "no workspace", workspace: func(*testing.T) string { return "" }, want: "tools.workspace is not set"},
		{desc: "not a git repository", workspace: func(t *testing.T) string {
			dir := t.TempDir()
			hermeticGit(t, dir)
			return dir
		}, want: "<dir> is not inside a git repository"},
		{desc: "a repository without commits", workspace: func(t *testing.T) string {
			dir := t.TempDir()
			hermeticGit(t, dir)
			runGit(t, dir, "init", "-q")
			return dir
		}, want: "the repository has no commits yet"},
		{desc: "a missing directory", workspace: func(t *testing.T) string {
			return filepath.Join(t.TempDir(), "nope")
		}, want: "<dir> is not a directory"},
		{desc: "git not installed", workspace: func(t *testing.T) string {
			repo := newRepo(t)
			t.Setenv("PATH", t.TempDir())
			return repo
		}, want: "git is not installed"},
		{desc: "git worktree add fails", workspace: func(t *testing.T) string {
			repo := newRepo(t)
			runGit(t, repo, "branch", "herald-subagent/sub_1")
			return repo
		}, want: "git worktree add failed: fatal: a branch named 'herald-subagent/sub_1' already exists"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			ws := tc.workspace(t)
			wt, dir, base, err := NewWorktree(context.Background(), ws, "sub_1")
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
			if err := FinishWorktree(context.Background(), wt, base); err != nil || !cmp.Equal(want, wt) {
				t.Errorf("finishing a skipped worktree: %+v, %v", wt, err)
			}
		})
	}
}

func TestNewWorktreeRefusesBadChildID(t *testing.T) {
	for _, id := range []string{"", "../x", "a b", "-x", "x.lock", "a..b"} {
		if _, _, _, err := NewWorktree(context.Background(), t.TempDir(), id); !errs.Is(err, errs.Invalid) {
			t.Errorf("child id %q: got %v, want Invalid", id, err)
		}
	}
}
