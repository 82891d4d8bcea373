package tools

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/proc"
)

// Workspace is the toolset of the tools that work in a directory:
// read_file, write_file, list_files, terminal and process_output.
const Workspace = "workspace"

// Defaults of WorkspaceOptions (tools.terminal_timeout,
// tools.output_max_chars).
const (
	DefaultTerminalTimeout = 120 * time.Second
	DefaultOutputMaxChars  = 50_000
)

// defaultDangerous are the patterns of tools.dangerous_commands when the
// config gives none: commands that destroy a machine or its data, or run
// what they download, and that no task should run unseen.
var defaultDangerous = []string{
	`\brm\s+(-[a-zA-Z]*\s+)*(-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)\s+(-\S+\s+)*("?(/|/\*|~|~/|~/\*|\$HOME|\$\{HOME\})"?)(\s|;|&|\||$)`,
	`\brm\b.*--no-preserve-root`,
	`\bmkfs(\.\w+)?\b`,
	`(^|[;&|(]\s*|\bsudo\s+)(shutdown|reboot|poweroff|halt)\b`,
	`:\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:`, // the fork bomb :(){ :|:& };:
	`\bdd\b.*\bof=/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|rdisk)`,
	`>\s*/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|rdisk)`,
	`\b(curl|wget)\b[^|]*\|\s*(sudo\s+)?(ba|da|z|k)?sh\b`,
	`\bchmod\s+(-[a-zA-Z]*\s+)*(-[a-zA-Z]*R[a-zA-Z]*|--recursive)\s+(-\S+\s+)*0?777\s+/(\s|;|&|\||$)`,
}

// DefaultDangerousCommands returns the default tools.dangerous_commands,
// a copy the caller may change.
func DefaultDangerousCommands() []string { return slices.Clone(defaultDangerous) }

// maxListEntries bounds one list_files answer.
const maxListEntries = 500

// WorkspaceOptions are what the workspace tools need from the gateway
// (config: tools.* and delegation.subagent_auto_approve).
type WorkspaceOptions struct {
	// Root is tools.workspace: where the tools work when a turn has no
	// Workspace of its own. Empty turns the toolset off.
	Root string
	// TerminalTimeout bounds one foreground command unless the call
	// gives its own; 0 means DefaultTerminalTimeout.
	TerminalTimeout time.Duration
	// OutputMaxChars bounds what of a file or of a command's output the
	// model is given; 0 means DefaultOutputMaxChars.
	OutputMaxChars int
	// Dangerous are RE2 patterns (tools.dangerous_commands); a command
	// one matches anywhere is refused. nil means
	// DefaultDangerousCommands(); an empty list refuses nothing.
	Dangerous []string
	// AutoApprove lets a sub-agent run a dangerous command
	// (delegation.subagent_auto_approve): it has no user to ask. With a
	// gate (SetGate) the gate decides instead.
	AutoApprove bool
	// Child reports whether ctx is a child agent's run (the gateway
	// gives delegation.DepthOf(ctx) > 0; tools cannot import delegation).
	// nil means no run is, so AutoApprove has no effect.
	Child func(ctx context.Context) bool
	// Clock times the terminal's timeouts; nil means the real clock.
	Clock clock.Clock
	// Env builds a terminal command's environment (the base set and
	// tools.env_passthrough, never herald's secrets); nil gives the base
	// set alone.
	Env *proc.Env
}

// WorkspaceTools are the workspace tools of one gateway, and the
// background processes their terminal started.
type WorkspaceTools struct {
	opts      WorkspaceOptions
	dangerous []*regexp.Regexp
	procs     *processes
	gate      atomic.Pointer[Gate] // SetGate's; nil refuses dangerous commands
}

// NewWorkspaceTools checks opts and returns the tools.
// Errors: Invalid, naming tools.workspace when Root is not a directory
// and tools.dangerous_commands with the pattern that does not compile.
func NewWorkspaceTools(opts WorkspaceOptions) (*WorkspaceTools, error) {
	const op = "tools.NewWorkspaceTools"
	if fi, err := os.Stat(opts.Root); err != nil || !fi.IsDir() {
		why := "it is not a directory"
		if err != nil {
			why = err.Error()
		}
		return nil, errs.E(op, errs.Invalid, "tools.workspace: %q cannot be the workspace: %s", opts.Root, why)
	}
	if opts.TerminalTimeout <= 0 {
		opts.TerminalTimeout = DefaultTerminalTimeout
	}
	if opts.OutputMaxChars <= 0 {
		opts.OutputMaxChars = DefaultOutputMaxChars
	}
	if opts.Dangerous == nil {
		opts.Dangerous = DefaultDangerousCommands()
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	w := &WorkspaceTools{opts: opts, procs: newProcesses()}
	for _, p := range opts.Dangerous {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, errs.E(op, errs.Invalid, "tools.dangerous_commands: %q is not an RE2 regular expression: %v", p, err)
		}
		w.dangerous = append(w.dangerous, re)
	}
	return w, nil
}

// RegisterWorkspace registers the Workspace toolset in r when opts.Root
// is set, and returns its tools, whose EndProcesses the sub-agent runner
// calls. With Root empty nothing is registered and the tools are nil
// (their EndProcesses does nothing): leave Workspace out of the agent's
// toolsets then.
// Errors: NewWorkspaceTools's, and Register's.
func RegisterWorkspace(r *Registry, opts WorkspaceOptions) (*WorkspaceTools, error) {
	if opts.Root == "" {
		return nil, nil
	}
	w, err := NewWorkspaceTools(opts)
	if err != nil {
		return nil, err
	}
	if err := r.Register(Workspace, w.Tools()...); err != nil {
		return nil, err
	}
	return w, nil
}

// Tools returns the workspace tools.
func (w *WorkspaceTools) Tools() []Tool {
	return []Tool{w.readFile(), w.writeFile(), w.listFiles(), w.terminal(), w.processOutput()}
}

// dir is where a turn's tools work: its own workspace (a sub-agent's
// worktree), else the configured one.
func (w *WorkspaceTools) dir(turn *Turn) string {
	if turn != nil && turn.Workspace != "" {
		return turn.Workspace
	}
	return w.opts.Root
}

// openRoot opens the turn's workspace as an os.Root: every file tool goes
// through it, so the standard library holds paths inside it.
func (w *WorkspaceTools) openRoot(op string, turn *Turn) (*os.Root, string, error) {
	dir := w.dir(turn)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, "", errs.E(op, errs.Unavailable, "the workspace %s cannot be opened (%v); this is the gateway's setup, not your path", dir, err)
	}
	return root, dir, nil
}

// relative is name as a path relative to the workspace root, or why it
// cannot be one. "" is the root itself.
func relative(op, dir, name string) (string, error) {
	if name == "" {
		return ".", nil
	}
	if filepath.IsAbs(name) {
		if rel, err := filepath.Rel(dir, name); err == nil && filepath.IsLocal(rel) {
			return "", errs.E(op, errs.Invalid, "path %q is absolute: give it relative to the workspace root, as %q", name, rel)
		}
		return "", errs.E(op, errs.Invalid, "path %q is absolute and outside the workspace: give a path relative to the workspace root", name)
	}
	clean := filepath.Clean(name)
	if clean != "." && !filepath.IsLocal(clean) {
		return "", errs.E(op, errs.Invalid, "path %q leads out of the workspace: give a path inside it, relative to its root", name)
	}
	return clean, nil
}

// inRoot runs f on name, a path relative to root. os.Root refuses a
// path through an absolute symlink even when it points inside the root;
// then the link is resolved and f runs again on where it leads, still
// through root, so nothing outside is ever reached.
func inRoot(op string, dir, name string, f func(name string) error) error {
	err := f(name)
	if !escapes(err) {
		return err
	}
	if real, ok := resolveInside(dir, name); ok {
		if err = f(real); !escapes(err) {
			return err
		}
	}
	return errs.E(op, errs.Invalid, "path %q leads out of the workspace through a symbolic link: only paths inside the workspace can be used", name)
}

// escapes reports whether err is os.Root's refusal of a path that leads
// outside it. The standard library does not export that error, so its
// text is what identifies it, somewhere down err's chain (MkdirAll wraps
// one PathError in another).
func escapes(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// resolveInside resolves the symlinks on the existing part of name and
// returns where it leads relative to dir, when that is inside dir.
func resolveInside(dir, name string) (string, bool) {
	base, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", false
	}
	real, err := evalExisting(filepath.Join(base, name))
	if err != nil {
		return "", false
	}
	rel, err := filepath.Rel(base, real)
	if err != nil || (rel != "." && !filepath.IsLocal(rel)) {
		return "", false
	}
	return rel, true
}

// evalExisting is filepath.EvalSymlinks of the longest existing prefix
// of p, with the rest joined on: a file about to be written does not
// exist yet, its directory may be a link.
func evalExisting(p string) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if !errors.Is(err, fs.ErrNotExist) {
		return real, err
	}
	parent := filepath.Dir(p)
	if parent == p {
		return p, nil
	}
	head, err := evalExisting(parent)
	if err != nil {
		return "", err
	}
	return filepath.Join(head, filepath.Base(p)), nil
}

// fileError words an error of the file system for the model.
func fileError(op, name string, err error) error {
	var he *errs.Error
	switch {
	case errors.As(err, &he):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return errs.E(op, errs.NotFound, "%q does not exist in the workspace; list_files shows what is there", name)
	case errors.Is(err, fs.ErrPermission):
		return errs.E(op, errs.Invalid, "%q cannot be accessed: permission denied", name)
	}
	return errs.E(op, errs.Unavailable, "%q: %v", name, err)
}

const readFileSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "The file, relative to the workspace root."},
    "offset": {"type": "integer", "minimum": 1, "description": "The first line to read, from 1. Default 1."},
    "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read at most. Default: as many as fit."}
  },
  "required": ["path"],
  "additionalProperties": false
}`

type readArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

// binarySniff is how much of a file is looked at for a NUL byte.
const binarySniff = 8000

func (w *WorkspaceTools) readFile() Tool {
	return Tool{
		Name: "read_file",
		Description: fmt.Sprintf("Read a text file of the workspace, by lines. Paths are relative to the workspace root. "+
			"At most %d characters come back at once; when the file goes on, next_offset says where to read on.", w.opts.OutputMaxChars),
		Schema: []byte(readFileSchema),
		Handler: Func(func(_ context.Context, turn *Turn, a readArgs) (Result, error) {
			const op = "tools.read_file"
			root, dir, err := w.openRoot(op, turn)
			if err != nil {
				return Result{}, err
			}
			defer root.Close()
			name, err := relative(op, dir, a.Path)
			if err != nil {
				return Result{}, err
			}
			var f *os.File
			err = inRoot(op, dir, name, func(n string) error {
				// Looked at before it is opened: opening a named pipe
				// would wait for a writer.
				fi, err := root.Stat(n)
				switch {
				case err != nil:
					return err
				case fi.IsDir():
					return errs.E(op, errs.Invalid, "%q is a directory: use list_files for it", a.Path)
				case !fi.Mode().IsRegular():
					return errs.E(op, errs.Invalid, "%q is not a regular file (%v): read_file reads text files", a.Path, fi.Mode().Type())
				}
				f, err = root.Open(n)
				return err
			})
			if err != nil {
				return Result{}, fileError(op, a.Path, err)
			}
			defer f.Close()
			return w.readLines(op, a, f)
		}),
	}
}

// readLines reads a.Limit lines of f from a.Offset, within the cap.
func (w *WorkspaceTools) readLines(op string, a readArgs, f io.Reader) (Result, error) {
	start := max(a.Offset, 1)
	br := bufio.NewReader(f)
	if head, _ := br.Peek(binarySniff); slices.Contains(head, 0) {
		return Result{}, errs.E(op, errs.Invalid, "%q is a binary file: read_file reads text; inspect it with terminal (e.g. file, xxd | head)", a.Path)
	}
	var (
		b              strings.Builder
		line, lines, n int
		more, longLine bool
	)
	for {
		s, err := br.ReadString('\n')
		if s != "" {
			line++
			if line >= start {
				if a.Limit > 0 && lines == a.Limit {
					more = true
					break
				}
				s = strings.ToValidUTF8(s, "\uFFFD")
				c := utf8.RuneCountInString(s)
				if n+c > w.opts.OutputMaxChars {
					more = true
					if lines == 0 {
						// A line longer than the cap would never be read
						// whole: give its start and go on after it.
						b.WriteString(firstRunes(s, w.opts.OutputMaxChars))
						lines, longLine = 1, true
					}
					break
				}
				b.WriteString(s)
				n += c
				lines++
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return Result{}, fileError(op, a.Path, err)
		}
	}
	out := map[string]any{"path": a.Path, "content": b.String()}
	switch {
	case lines == 0 && line == 0:
		out["note"] = "the file is empty"
	case lines == 0:
		out["note"] = fmt.Sprintf("the file has %d lines; offset %d is past its end", line, start)
	default:
		out["start_line"], out["end_line"] = start, start+lines-1
	}
	if more {
		next := start + lines
		out["truncated"], out["next_offset"] = true, next
		out["note"] = fmt.Sprintf("the file goes on: read on with offset %d", next)
		if longLine {
			out["note"] = fmt.Sprintf("line %d is longer than %d characters and was cut; read it in parts with terminal (e.g. cut -c or head -c), or read on with offset %d", start, w.opts.OutputMaxChars, next)
		}
	}
	return JSON(out), nil
}

// firstRunes is the first n runes of s.
func firstRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

const writeFileSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "description": "The file, relative to the workspace root. Missing directories are created."},
    "content": {"type": "string", "description": "The whole new content of the file."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func (w *WorkspaceTools) writeFile() Tool {
	return Tool{
		Name:        "write_file",
		Description: "Write a file of the workspace, replacing what it held; missing directories are created. Paths are relative to the workspace root.",
		Schema:      []byte(writeFileSchema),
		Handler: Func(func(_ context.Context, turn *Turn, a writeArgs) (Result, error) {
			const op = "tools.write_file"
			root, dir, err := w.openRoot(op, turn)
			if err != nil {
				return Result{}, err
			}
			defer root.Close()
			name, err := relative(op, dir, a.Path)
			if err != nil {
				return Result{}, err
			}
			if name == "." {
				return Result{}, errs.E(op, errs.Invalid, "path %q is the workspace root itself: give a file's path", a.Path)
			}
			if parent := filepath.Dir(name); parent != "." {
				if err := inRoot(op, dir, parent, func(n string) error { return root.MkdirAll(n, 0o755) }); err != nil {
					return Result{}, fileError(op, parent, err)
				}
			}
			status := "created"
			err = inRoot(op, dir, name, func(n string) error {
				if fi, err := root.Stat(n); err == nil {
					if fi.IsDir() {
						return errs.E(op, errs.Invalid, "%q is a directory: give a file's path", a.Path)
					}
					if !fi.Mode().IsRegular() {
						return errs.E(op, errs.Invalid, "%q is not a regular file (%v): write_file writes files", a.Path, fi.Mode().Type())
					}
					status = "overwritten"
				}
				return root.WriteFile(n, []byte(a.Content), 0o644)
			})
			if err != nil {
				return Result{}, fileError(op, a.Path, err)
			}
			return JSON(map[string]any{"status": status, "path": a.Path, "bytes": len(a.Content)}), nil
		}),
	}
}

const listFilesSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "The directory, relative to the workspace root. Default: the root."}
  },
  "additionalProperties": false
}`

type listArgs struct {
	Path string `json:"path"`
}

// entry is one list_files row.
type entry struct {
	Name string `json:"name"`
	Type string `json:"type"` // file, dir, symlink or other
	Size *int64 `json:"size,omitempty"`
}

func (w *WorkspaceTools) listFiles() Tool {
	return Tool{
		Name:        "list_files",
		Description: fmt.Sprintf("List a directory of the workspace: each entry's name, type (file, dir, symlink, other) and a file's size in bytes, sorted by name; at most %d entries.", maxListEntries),
		Schema:      []byte(listFilesSchema),
		Handler: Func(func(_ context.Context, turn *Turn, a listArgs) (Result, error) {
			const op = "tools.list_files"
			root, dir, err := w.openRoot(op, turn)
			if err != nil {
				return Result{}, err
			}
			defer root.Close()
			name, err := relative(op, dir, a.Path)
			if err != nil {
				return Result{}, err
			}
			var des []fs.DirEntry
			err = inRoot(op, dir, name, func(n string) error {
				f, err := root.Open(n)
				if err != nil {
					return err
				}
				defer f.Close()
				if fi, err := f.Stat(); err == nil && !fi.IsDir() {
					return errs.E(op, errs.Invalid, "%q is a file: use read_file for it", a.Path)
				}
				des, err = f.ReadDir(-1)
				return err
			})
			if err != nil {
				return Result{}, fileError(op, a.Path, err)
			}
			slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
			out := map[string]any{"path": name, "total": len(des)}
			if len(des) > maxListEntries {
				out["note"] = fmt.Sprintf("only the first %d of %d entries are listed; use terminal (e.g. find, ls | grep) to look further", maxListEntries, len(des))
				des = des[:maxListEntries]
			}
			entries := make([]entry, 0, len(des))
			for _, de := range des {
				e := entry{Name: de.Name(), Type: "other"}
				switch t := de.Type(); {
				case t.IsDir():
					e.Type = "dir"
				case t&fs.ModeSymlink != 0:
					e.Type = "symlink"
				case t.IsRegular():
					e.Type = "file"
					if fi, err := de.Info(); err == nil {
						size := fi.Size()
						e.Size = &size
					}
				}
				entries = append(entries, e)
			}
			out["entries"] = entries
			return JSON(out), nil
		}),
	}
}
