package kanban_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
)

// attaching sets h's attachment limit (0: the default) and returns its
// service's board home.
func (h *harness) attaching(limit int64) string {
	h.svc.AttachmentMaxBytes = limit
	return h.svc.Root
}

func (h *harness) attach(card, name, body string) kanban.Attachment {
	h.t.Helper()
	a, err := h.svc.Attach(h.ctx, card, name, strings.NewReader(body), "ann")
	if err != nil {
		h.t.Fatalf("Attach(%s, %s): %v", card, name, err)
	}
	return a
}

// leftovers lists what is under root's attachments but the files
// attached: a refused attach leaves nothing.
func leftovers(t *testing.T, root string, attached ...string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(filepath.Join(root, "attachments"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !slices.Contains(attached, p) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func sum(s string) string {
	b := sha256.Sum256([]byte(s))
	return hex.EncodeToString(b[:])
}

// An attachment is a file under the board home, named for its card and
// itself, recorded with its size and sum and an attached event; a card
// takes one of each name.
func TestAttach(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		root := h.attaching(0)
		k := h.create(kanban.CreateSpec{Title: "read the spec"})
		other := h.create(kanban.CreateSpec{Title: "another"})
		a := h.attach(k.ID, "spec.md", "# the spec")
		want := kanban.Attachment{Card: k.ID, Name: "spec.md", Size: 10, SHA256: sum("# the spec"), CreatedAt: t0, CreatedBy: "ann",
			Path: filepath.Join(root, "attachments", k.ID, "spec.md")}
		if diff := cmp.Diff(want, a); diff != "" {
			t.Errorf("Attach (-want +got):\n%s", diff)
		}
		if !filepath.IsAbs(a.Path) {
			t.Errorf("path %s is not absolute", a.Path)
		}
		if b, err := os.ReadFile(a.Path); err != nil || string(b) != "# the spec" {
			t.Errorf("the file = %q, %v", b, err)
		}
		h.clk.Advance(1)
		b := h.attach(k.ID, "data.csv", "a,b\n1,2\n")
		if got, err := h.svc.Attachments(h.ctx, k.ID); err != nil || !cmp.Equal([]kanban.Attachment{a, b}, got) {
			t.Errorf("Attachments = %+v, %v; want the two, oldest first", got, err)
		}
		if got, err := h.svc.Attachment(h.ctx, k.ID, "data.csv"); err != nil || got != b {
			t.Errorf("Attachment(data.csv) = %+v, %v", got, err)
		}
		if _, err := h.svc.Attachment(h.ctx, k.ID, "nope.txt"); !errs.Is(err, errs.NotFound) {
			t.Errorf("Attachment(nope.txt) = %v, want NotFound", err)
		}
		if got := h.kinds(k.ID); !cmp.Equal(got, []string{kanban.EventCreated, kanban.EventAttached, kanban.EventAttached}) {
			t.Errorf("events = %v", got)
		}

		// A second spec.md is refused, saying what to do; the first is
		// left as it was. Another card has names of its own.
		_, err := h.svc.Attach(h.ctx, k.ID, "spec.md", strings.NewReader("other"), "bob")
		if !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "another name") {
			t.Errorf("a second spec.md: %v, want Conflict naming what to do", err)
		}
		if b, _ := os.ReadFile(a.Path); string(b) != "# the spec" {
			t.Errorf("the first spec.md is now %q", b)
		}
		h.attach(other.ID, "spec.md", "theirs")
		if got := leftovers(t, root, a.Path, b.Path, filepath.Join(root, "attachments", other.ID, "spec.md")); len(got) != 0 {
			t.Errorf("left over: %v", got)
		}

		// No card, an archived one: refused, nothing written.
		if _, err := h.svc.Attach(h.ctx, "t_00000000", "x.txt", strings.NewReader("x"), "ann"); !errs.Is(err, errs.NotFound) {
			t.Errorf("Attach to no card: %v, want NotFound", err)
		}
		if _, err := h.svc.Archive(h.ctx, other.ID, "ann"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Attach(h.ctx, other.ID, "late.txt", strings.NewReader("x"), "ann"); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "archived") {
			t.Errorf("Attach to an archived card: %v, want Invalid", err)
		}
		if _, err := h.svc.Attachments(h.ctx, "t_00000000"); !errs.Is(err, errs.NotFound) {
			t.Errorf("Attachments of no card: %v, want NotFound", err)
		}
		if got := leftovers(t, root, a.Path, b.Path, filepath.Join(root, "attachments", other.ID, "spec.md")); len(got) != 0 {
			t.Errorf("left over: %v", got)
		}
	})
}

// An attachment over kanban.attachment_max_bytes is refused, naming the
// limit and its key, and leaves no file, whole or partial.
func TestAttachOverTheLimit(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		root := h.attaching(8)
		k := h.create(kanban.CreateSpec{Title: "x"})
		_, err := h.svc.Attach(h.ctx, k.ID, "big.bin", strings.NewReader("123456789"), "ann")
		if !errs.Is(err, errs.TooLarge) || !strings.Contains(err.Error(), "8 bytes") || !strings.Contains(err.Error(), "kanban.attachment_max_bytes") {
			t.Errorf("9 bytes over a limit of 8: %v, want TooLarge naming the limit and its key", err)
		}
		if got := leftovers(t, root); len(got) != 0 {
			t.Errorf("a refused attachment left %v", got)
		}
		if as, _ := h.svc.Attachments(h.ctx, k.ID); len(as) != 0 {
			t.Errorf("a refused attachment was recorded: %+v", as)
		}
		// A source that fails is refused too, leaving nothing.
		_, err = h.svc.Attach(h.ctx, k.ID, "cut.bin", io.MultiReader(strings.NewReader("1234"), failingReader{}), "ann")
		if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "connection reset") {
			t.Errorf("a failing source: %v, want Invalid with its error", err)
		}
		if got := leftovers(t, root); len(got) != 0 {
			t.Errorf("a cut attachment left %v", got)
		}
		a := h.attach(k.ID, "fits.bin", "12345678")
		if a.Size != 8 {
			t.Errorf("8 bytes at a limit of 8 = %+v", a)
		}
		if got := h.kinds(k.ID); !cmp.Equal(got, []string{kanban.EventCreated, kanban.EventAttached}) {
			t.Errorf("events = %v, want one attached", got)
		}
	})
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// A name is a plain file name: anything that could reach out of the
// card's directory, or hide in it, is refused before a byte is written.
func TestAttachNames(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		root := h.attaching(0)
		k := h.create(kanban.CreateSpec{Title: "x"})
		for _, tt := range []struct{ desc, name string }{
			{"empty", ""},
			{"dot", "."},
			{"dot dot", ".."},
			{"a path up", "../../etc/passwd"},
			{"a path down", "a/b.txt"},
			{"a backslash", `a\b.txt`},
			{"an absolute path", "/tmp/x"},
			{"a leading space", " x.txt"},
			{"a trailing space", "x.txt "},
			{"a control character", "x\n.txt"},
			{"a NUL", "x\x00.txt"},
			{"not UTF-8", "x\xff.txt"},
			{"too long", strings.Repeat("x", kanban.MaxAttachmentName+1)},
		} {
			_, err := h.svc.Attach(h.ctx, k.ID, tt.name, strings.NewReader("x"), "ann")
			if !errs.Is(err, errs.Invalid) {
				t.Errorf("%s (%q): %v, want Invalid", tt.desc, tt.name, err)
			}
		}
		if got := leftovers(t, root); len(got) != 0 {
			t.Errorf("refused names left %v", got)
		}
		for _, name := range []string{".env", "résumé (final).pdf", strings.Repeat("y", kanban.MaxAttachmentName)} {
			h.attach(k.ID, name, "ok")
		}
	})
}

// A file under an attachment's name that no row records is what an
// attach cut short between its file and its row left: the same contents
// are taken as they are, others are refused and left alone.
func TestAttachOverALeftover(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		h.attaching(0)
		k := h.create(kanban.CreateSpec{Title: "x"})
		path := h.svc.AttachmentPath(k.ID, "notes.txt")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("same"), 0o644); err != nil {
			t.Fatal(err)
		}
		if a := h.attach(k.ID, "notes.txt", "same"); a.Size != 4 || a.Path != path {
			t.Errorf("attach over a leftover of the same = %+v", a)
		}
		other := h.svc.AttachmentPath(k.ID, "other.txt")
		if err := os.WriteFile(other, []byte("theirs"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Attach(h.ctx, k.ID, "other.txt", strings.NewReader("mine"), "ann"); !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), other) {
			t.Errorf("attach over another file: %v, want Conflict naming it", err)
		}
		if b, _ := os.ReadFile(other); string(b) != "theirs" {
			t.Errorf("the file there is now %q", b)
		}
		if as, _ := h.svc.Attachments(h.ctx, k.ID); len(as) != 1 {
			t.Errorf("attachments = %+v, want notes.txt alone", as)
		}
	})
}

// The dispatcher hands a card's worker the paths of its attachments: in
// its spec, and in its environment as HERALD_KANBAN_ATTACHMENTS, one a
// line.
func TestWorkerIsHandedAttachments(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		h.attaching(0)
		read := make(chan []string, 1)
		lane := kanban.FuncLane{Run: func(ctx context.Context, spec kanban.WorkerSpec) error {
			var got []string
			for _, p := range spec.Attachments {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				got = append(got, filepath.Base(p)+": "+string(b))
			}
			for _, kv := range kanban.WorkerEnv(spec) {
				if v, ok := strings.CutPrefix(kv, "HERALD_KANBAN_ATTACHMENTS="); ok {
					got = append(got, "env: "+v)
				}
			}
			read <- got
			_, err := h.svc.Complete(ctx, spec.Card.ID, spec.Token, kanban.Result{Summary: "read them"}, "worker")
			return err
		}}
		d, ended := h.dispatcher("gw-a", h.svc, map[string]kanban.LaneConfig{"herald": {Lane: lane}}, nil)
		k := h.create(kanban.CreateSpec{Title: "read the files", Assignee: "herald", Status: kanban.StatusTodo})
		spec := h.attach(k.ID, "spec.md", "# the spec")
		h.clk.Advance(1)
		data := h.attach(k.ID, "data.csv", "1,2")
		if _, err := h.svc.Promote(h.ctx, k.Board); err != nil {
			t.Fatal(err)
		}
		if rep := h.tick(d); len(rep.Claimed) != 1 {
			t.Fatalf("claimed %v", rep.Claimed)
		}
		waitEnded(t, ended, 1)
		want := []string{"spec.md: # the spec", "data.csv: 1,2", "env: " + spec.Path + "\n" + data.Path}
		if diff := cmp.Diff(want, <-read); diff != "" {
			t.Errorf("what the worker read (-want +got):\n%s", diff)
		}
		h.wantStatus(k.ID, kanban.StatusDone)
	})
}

// kanban_show lists a card's attachments with their paths, for a worker
// (its own card) as for the agent.
func TestShowToolListsAttachments(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		h.attaching(0)
		set := h.tools()
		k := h.create(kanban.CreateSpec{Title: "read the spec"})
		a := h.attach(k.ID, "spec.md", "# the spec")
		res := call(h.ctx, set, nil, "kanban_show", `{"card_id":"`+k.ID+`"}`)
		if res.IsError || !strings.Contains(res.Content, `"attachments"`) || !strings.Contains(res.Content, `"path":"`+a.Path+`"`) {
			t.Errorf("kanban_show = %+v, want the attachment with its path", res)
		}
	})
}
