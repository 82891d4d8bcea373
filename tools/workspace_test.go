package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/tools"
)

// workspaceSet registers the workspace tools over opts (Root defaulting
// to a new temporary directory) and returns their set and the root.
func workspaceSet(t *testing.T, opts tools.WorkspaceOptions) (*tools.Set, *tools.WorkspaceTools, string) {
	t.Helper()
	if opts.Root == "" {
		opts.Root = t.TempDir()
	}
	r := tools.NewRegistry()
	w, err := tools.RegisterWorkspace(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.EndAllProcesses)
	set, err := r.Set([]string{tools.Workspace})
	if err != nil {
		t.Fatal(err)
	}
	return set, w, opts.Root
}

// callTool calls name with args (a JSON object) and decodes its result.
func callTool(t *testing.T, set *tools.Set, turn *tools.Turn, name, args string) (map[string]any, tools.Result) {
	t.Helper()
	return callToolCtx(t, context.Background(), set, turn, name, args)
}

func callToolCtx(t *testing.T, ctx context.Context, set *tools.Set, turn *tools.Turn, name, args string) (map[string]any, tools.Result) {
	t.Helper()
	if turn == nil {
		turn = &tools.Turn{Conv: "c1"}
	}
	res := set.Call(ctx, turn, chat.ToolCall{ID: "call_1", Name: name, Arguments: args})
	var out map[string]any
	if err := json.Unmarshal([]byte(res.Content), &out); err != nil {
		t.Fatalf("%s: result is not a JSON object: %q", name, res.Content)
	}
	return out, res
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWorkspaceRegister(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeTestFile(t, file, "x")
	tests := []struct {
		desc string
		opts tools.WorkspaceOptions
		code errs.Code
		msg  string
	}{
		{desc: "missing directory", opts: tools.WorkspaceOptions{Root: filepath.Join(dir, "nope")}, code: errs.Invalid, msg: "tools.workspace"},
		{desc: "a file, not a directory", opts: tools.WorkspaceOptions{Root: file}, code: errs.Invalid, msg: "tools.workspace"},
		{desc: "a pattern that does not compile", opts: tools.WorkspaceOptions{Root: dir, Dangerous: []string{`ok`, `rm (-rf`}}, code: errs.Invalid, msg: "tools.dangerous_commands: \"rm (-rf\""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := tools.RegisterWorkspace(tools.NewRegistry(), tc.opts)
			if !errs.Is(err, tc.code) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %v, want %s naming %q", err, tc.code, tc.msg)
			}
		})
	}

	t.Run("no root is off", func(t *testing.T) {
		r := tools.NewRegistry()
		w, err := tools.RegisterWorkspace(r, tools.WorkspaceOptions{})
		if err != nil || w != nil {
			t.Fatalf("got %v, %v; want nothing registered and no error", w, err)
		}
		if got := r.Toolsets(); len(got) != 0 {
			t.Errorf("toolsets %v, want none", got)
		}
		w.EndProcesses("c1") // a nil WorkspaceTools has none to end
	})

	t.Run("the tools", func(t *testing.T) {
		set, _, _ := workspaceSet(t, tools.WorkspaceOptions{Root: dir})
		want := []string{"read_file", "write_file", "list_files", "terminal", "process_output"}
		if diff := cmp.Diff(want, set.Names()); diff != "" {
			t.Errorf("tools (-want +got):\n%s", diff)
		}
	})
}

func TestReadFile(t *testing.T) {
	set, _, root := workspaceSet(t, tools.WorkspaceOptions{OutputMaxChars: 20})
	writeTestFile(t, filepath.Join(root, "lines.txt"), "one\ntwo\nthree\nfour\n")
	writeTestFile(t, filepath.Join(root, "long.txt"), "aaaaaaaaaa\nbbbbbbbbbb\ncccccccccc\n")
	writeTestFile(t, filepath.Join(root, "wide.txt"), strings.Repeat("x", 50)+"\nend\n")
	writeTestFile(t, filepath.Join(root, "empty.txt"), "")
	writeTestFile(t, filepath.Join(root, "bin"), "ab\x00cd")
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc    string
		args    string
		want    map[string]any // the fields of the result checked
		wantErr string
	}{
		{desc: "whole file", args: `{"path":"lines.txt"}`,
			want: map[string]any{"content": "one\ntwo\nthree\nfour\n", "start_line": 1.0, "end_line": 4.0}},
		{desc: "offset and limit", args: `{"path":"lines.txt","offset":2,"limit":2}`,
			want: map[string]any{"content": "two\nthree\n", "start_line": 2.0, "end_line": 3.0, "truncated": true, "next_offset": 4.0}},
		{desc: "cut at the cap, says where to go on", args: `{"path":"long.txt"}`,
			want: map[string]any{"content": "aaaaaaaaaa\n", "truncated": true, "next_offset": 2.0, "note": "the file goes on: read on with offset 2"}},
		{desc: "a line longer than the cap", args: `{"path":"wide.txt"}`,
			want: map[string]any{"content": strings.Repeat("x", 20), "truncated": true, "next_offset": 2.0}},
		{desc: "past the end", args: `{"path":"lines.txt","offset":9}`,
			want: map[string]any{"content": "", "note": "the file has 4 lines; offset 9 is past its end"}},
		{desc: "empty file", args: `{"path":"empty.txt"}`, want: map[string]any{"content": "", "note": "the file is empty"}},
		{desc: "missing file", args: `{"path":"nope.txt"}`, wantErr: `"nope.txt" does not exist in the workspace`},
		{desc: "a directory", args: `{"path":"."}`, wantErr: "is a directory: use list_files"},
		{desc: "binary", args: `{"path":"bin"}`, wantErr: "is a binary file"},
		{desc: "a named pipe", args: `{"path":"fifo"}`, wantErr: "is not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			out, res := callTool(t, set, nil, "read_file", tc.args)
			checkResult(t, out, res, tc.want, tc.wantErr)
		})
	}
}

// checkResult checks the fields of want in out, or that the result is
// an error containing wantErr.
func checkResult(t *testing.T, out map[string]any, res tools.Result, want map[string]any, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if msg, _ := out["error"].(string); !res.IsError || !strings.Contains(msg, wantErr) {
			t.Fatalf("got %s, want an error containing %q", res.Content, wantErr)
		}
		return
	}
	if res.IsError {
		t.Fatalf("got error %s", res.Content)
	}
	got := map[string]any{}
	for k := range want {
		got[k] = out[k]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result (-want +got):\n%s\nwhole: %s", diff, res.Content)
	}
}

func TestWriteFile(t *testing.T) {
	set, _, root := workspaceSet(t, tools.WorkspaceOptions{})
	writeTestFile(t, filepath.Join(root, "old.txt"), "old content that is longer")
	tests := []struct {
		desc    string
		args    string
		file    string // relative to root
		want    map[string]any
		content string
		wantErr string
	}{
		{desc: "new file", args: `{"path":"new.txt","content":"hello\n"}`, file: "new.txt",
			want: map[string]any{"status": "created", "bytes": 6.0}, content: "hello\n"},
		{desc: "parent directories created", args: `{"path":"a/b/c.txt","content":"deep"}`, file: "a/b/c.txt",
			want: map[string]any{"status": "created"}, content: "deep"},
		{desc: "overwritten whole", args: `{"path":"old.txt","content":"new"}`, file: "old.txt",
			want: map[string]any{"status": "overwritten"}, content: "new"},
		{desc: "empty content", args: `{"path":"blank","content":""}`, file: "blank",
			want: map[string]any{"status": "created", "bytes": 0.0}, content: ""},
		{desc: "the root itself", args: `{"path":".","content":"x"}`, wantErr: "workspace root itself"},
		{desc: "a directory", args: `{"path":"a","content":"x"}`, wantErr: `"a" is a directory`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			out, res := callTool(t, set, nil, "write_file", tc.args)
			checkResult(t, out, res, tc.want, tc.wantErr)
			if tc.wantErr != "" {
				return
			}
			path := filepath.Join(root, tc.file)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.content {
				t.Errorf("file holds %q, want %q", b, tc.content)
			}
			if fi, _ := os.Stat(path); tc.want["status"] == "created" && fi.Mode().Perm() != 0o644&^umask() {
				t.Errorf("mode %v, want 0644 less the umask", fi.Mode().Perm())
			}
		})
	}
}

// umask is the process's umask, which new files' modes pass through.
func umask() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}

func TestListFiles(t *testing.T) {
	set, _, root := workspaceSet(t, tools.WorkspaceOptions{})
	writeTestFile(t, filepath.Join(root, "b.txt"), "12345")
	writeTestFile(t, filepath.Join(root, "a", "inner.txt"), "x")
	if err := os.Symlink("b.txt", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	for i := range 501 {
		writeTestFile(t, filepath.Join(root, "many", fmt.Sprintf("f%03d", i)), "")
	}
	tests := []struct {
		desc    string
		args    string
		want    map[string]any
		wantErr string
	}{
		{desc: "the root, sorted, with types and sizes", args: `{}`, want: map[string]any{"path": ".", "total": 4.0, "entries": []any{
			map[string]any{"name": "a", "type": "dir"},
			map[string]any{"name": "b.txt", "type": "file", "size": 5.0},
			map[string]any{"name": "link", "type": "symlink"},
			map[string]any{"name": "many", "type": "dir"},
		}}},
		{desc: "a subdirectory", args: `{"path":"a"}`, want: map[string]any{"path": "a", "entries": []any{
			map[string]any{"name": "inner.txt", "type": "file", "size": 1.0},
		}}},
		{desc: "capped", args: `{"path":"many"}`, want: map[string]any{"total": 501.0, "note": "only the first 500 of 501 entries are listed; use terminal (e.g. find, ls | grep) to look further"}},
		{desc: "a file", args: `{"path":"b.txt"}`, wantErr: "is a file: use read_file"},
		{desc: "missing", args: `{"path":"nope"}`, wantErr: "does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			out, res := callTool(t, set, nil, "list_files", tc.args)
			checkResult(t, out, res, tc.want, tc.wantErr)
		})
	}
}

func TestWorkspaceEscapes(t *testing.T) {
	outside := t.TempDir()
	writeTestFile(t, filepath.Join(outside, "secret"), "secret")
	set, _, root := workspaceSet(t, tools.WorkspaceOptions{})
	writeTestFile(t, filepath.Join(root, "in", "ok.txt"), "inside")
	for _, l := range []struct{ target, name string }{
		{outside, "abs-out"},                          // an absolute link outside
		{"../" + filepath.Base(outside), "rel-out"},   // a relative one
		{filepath.Join(root, "in"), "abs-in"},         // an absolute link that stays inside
		{filepath.Join(outside, "secret"), "to-file"}, // a link to a file outside
	} {
		if err := os.Symlink(l.target, filepath.Join(root, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	// rel-out only leads outside when both temp dirs share a parent.
	if filepath.Dir(outside) != filepath.Dir(root) {
		t.Fatalf("temp dirs %s and %s do not share a parent", outside, root)
	}
	tests := []struct {
		desc    string
		tool    string
		args    string
		wantErr string // "" means allowed
	}{
		{desc: "read ../x", tool: "read_file", args: `{"path":"../x"}`, wantErr: "leads out of the workspace"},
		{desc: "read in/../../x", tool: "read_file", args: `{"path":"in/../../x"}`, wantErr: "leads out of the workspace"},
		{desc: "read /etc/passwd", tool: "read_file", args: `{"path":"/etc/passwd"}`, wantErr: "is absolute and outside the workspace"},
		{desc: "read an absolute path inside", tool: "read_file", args: `{"path":"` + filepath.Join(root, "in", "ok.txt") + `"}`, wantErr: `give it relative to the workspace root, as "in/ok.txt"`},
		{desc: "read through an absolute link outside", tool: "read_file", args: `{"path":"abs-out/secret"}`, wantErr: "through a symbolic link"},
		{desc: "read through a relative link outside", tool: "read_file", args: `{"path":"rel-out/secret"}`, wantErr: "through a symbolic link"},
		{desc: "read a link to a file outside", tool: "read_file", args: `{"path":"to-file"}`, wantErr: "through a symbolic link"},
		{desc: "read through an absolute link inside", tool: "read_file", args: `{"path":"abs-in/ok.txt"}`},
		{desc: "write ../x", tool: "write_file", args: `{"path":"../x","content":"x"}`, wantErr: "leads out of the workspace"},
		{desc: "write /tmp/x", tool: "write_file", args: `{"path":"/tmp/herald-escape","content":"x"}`, wantErr: "absolute"},
		{desc: "write through a link outside", tool: "write_file", args: `{"path":"abs-out/new","content":"x"}`, wantErr: "through a symbolic link"},
		{desc: "write into a new dir through a link outside", tool: "write_file", args: `{"path":"rel-out/d/new","content":"x"}`, wantErr: "through a symbolic link"},
		{desc: "overwrite a link to a file outside", tool: "write_file", args: `{"path":"to-file","content":"x"}`, wantErr: "through a symbolic link"},
		{desc: "write through an absolute link inside", tool: "write_file", args: `{"path":"abs-in/new.txt","content":"x"}`},
		{desc: "list ..", tool: "list_files", args: `{"path":".."}`, wantErr: "leads out of the workspace"},
		{desc: "list /", tool: "list_files", args: `{"path":"/"}`, wantErr: "absolute"},
		{desc: "list a link outside", tool: "list_files", args: `{"path":"abs-out"}`, wantErr: "through a symbolic link"},
		{desc: "list an absolute link inside", tool: "list_files", args: `{"path":"abs-in"}`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			out, res := callTool(t, set, nil, tc.tool, tc.args)
			checkResult(t, out, res, map[string]any{}, tc.wantErr)
		})
	}
	// Nothing outside was read into a result or changed.
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "secret" {
		t.Errorf("the file outside holds %q", b)
	}
	for _, p := range []string{filepath.Join(outside, "new"), filepath.Join(outside, "d"), "/tmp/herald-escape", filepath.Join(filepath.Dir(root), "x")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written outside the workspace", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "in", "new.txt")); err != nil || string(b) != "x" {
		t.Errorf("write through the inside link: %q, %v", b, err)
	}
}

func TestWorkspaceTurnOverride(t *testing.T) {
	set, _, root := workspaceSet(t, tools.WorkspaceOptions{})
	own := t.TempDir()
	writeTestFile(t, filepath.Join(root, "where"), "configured")
	writeTestFile(t, filepath.Join(own, "where"), "own")
	turn := &tools.Turn{Conv: "subagent:sub_1", Workspace: own}

	out, res := callTool(t, set, turn, "read_file", `{"path":"where"}`)
	checkResult(t, out, res, map[string]any{"content": "own"}, "")
	out, res = callTool(t, set, turn, "write_file", `{"path":"made","content":"x"}`)
	checkResult(t, out, res, map[string]any{"status": "created"}, "")
	if _, err := os.Stat(filepath.Join(own, "made")); err != nil {
		t.Errorf("write_file did not write in the turn's workspace: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "made")); err == nil {
		t.Error("write_file wrote in the configured workspace")
	}
	out, res = callTool(t, set, turn, "list_files", `{}`)
	checkResult(t, out, res, map[string]any{"total": 2.0}, "")
	out, res = callTool(t, set, turn, "terminal", `{"command":"cat where; pwd"}`)
	checkResult(t, out, res, map[string]any{"output": "own" + own + "\n"}, "")
	// Without a workspace of its own the turn works in the configured one.
	out, res = callTool(t, set, nil, "read_file", `{"path":"where"}`)
	checkResult(t, out, res, map[string]any{"content": "configured"}, "")
}
