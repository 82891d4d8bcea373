package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// HermeticGit keeps the user's and the system's git config out of the
// test, and git from looking for a repository above dir.
func HermeticGit(t testing.TB, dir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed: the worktree tests need it")
	}
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
}

// Git runs git -C dir args as a fixed author and returns its output.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	all := append([]string{"-C", dir, "-c", "user.name=Herald Test", "-c", "user.email=test@herald.invalid", "-c", "commit.gpgsign=false"}, args...)
	out, err := exec.Command("git", all...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// GitRepo is a git repository with one commit of README, sub/file and a
// .gitignore of build/, with git kept hermetic (HermeticGit).
func GitRepo(t testing.TB) string {
	t.Helper()
	repo := t.TempDir()
	HermeticGit(t, repo)
	Git(t, repo, "init", "-q", "-b", "main")
	for name, content := range map[string]string{"README": "hello\n", "sub/file": "inner\n", ".gitignore": "build/\n"} {
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, repo, "add", ".")
	Git(t, repo, "commit", "-q", "-m", "first")
	return repo
}

// GitBranchExists reports whether repo has branch.
func GitBranchExists(t testing.TB, repo, branch string) bool {
	t.Helper()
	return Git(t, repo, "branch", "--list", branch) != ""
}
