package delegation

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/tools"
)

// idleStore is a delegation store with no running children; delegate_task
// reads nothing else of it before it writes its dispatch with the turn.
type idleStore struct{ Store }

func (idleStore) Active(context.Context, string) (int, error) { return 0, nil }

// fakeHanded checks files as media does in the gateway, by rule: a path
// is taken from the workspace, and "outside" or "gone" in it is refused;
// it records the workspace and conversation of each check.
type fakeHanded struct {
	mu    sync.Mutex
	asked []string // "workspace|conv" of each check
}

func (f *fakeHanded) files() HandedFiles {
	return HandedFiles{
		Resolve: func(path, workspace, conv string) (string, error) {
			f.mu.Lock()
			f.asked = append(f.asked, workspace+"|"+conv)
			f.mu.Unlock()
			switch {
			case strings.Contains(path, "outside"):
				return "", errs.E("test.Resolve", errs.Invalid, "%s is outside the workspace", path)
			case strings.Contains(path, "gone"):
				return "", errs.E("test.Resolve", errs.NotFound, "no file at %s", path)
			case filepath.IsAbs(path):
				return path, nil
			}
			return filepath.Join(workspace, path), nil
		},
		Peek: sniff,
	}
}

// sniff is media.Peek's answer, by the file's first bytes.
func sniff(path string) (int64, string, bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, "", false, err
	}
	t := http.DetectContentType(b)
	return int64(len(b)), t, t == "image/png" || t == "image/jpeg", nil
}

// delegate_task hands each task's files to its child as its checker
// returns them, relative paths taken from the workspace and herald's
// kept files the conversation's; a refused path refuses the whole call.
func TestToolHandsFilesToChildren(t *testing.T) {
	handed := &fakeHanded{}
	r := tools.NewRegistry()
	if err := r.Register(Toolset, Tool(ToolOptions{Store: idleStore{}, MaxChildren: 4, Workspace: "/ws", Files: handed.files()})); err != nil {
		t.Fatal(err)
	}
	set, err := r.Set([]string{Toolset})
	if err != nil {
		t.Fatal(err)
	}
	turn := &tools.Turn{Conv: "telegram:1"}
	args := `{"tasks":[{"goal":"read the chart","files":["chart.png","notes.txt"]},{"goal":"read the scan","files":["/home/files/telegram:1/9-scan.pdf"]},{"goal":"none"}]}`
	res := set.Call(context.Background(), turn, chat.ToolCall{ID: "1", Name: ToolName, Arguments: args})
	if res.IsError {
		t.Fatalf("dispatch failed: %s", res.Content)
	}
	w := turn.Writes()
	if len(w) != 1 {
		t.Fatalf("writes = %v, want the dispatch", w)
	}
	var got [][]string
	for _, c := range w[0].(Dispatch).Delegation.Children {
		got = append(got, c.Files)
	}
	want := [][]string{{"/ws/chart.png", "/ws/notes.txt"}, {"/home/files/telegram:1/9-scan.pdf"}, nil}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("children's files = %q, want %q", got, want)
	}
	if !slices.Equal(handed.asked, []string{"/ws|telegram:1", "/ws|telegram:1", "/ws|telegram:1"}) {
		t.Errorf("checks in %q, want each in the workspace for the conversation", handed.asked)
	}

	tests := []struct{ desc, args, says string }{
		{"outside", `{"goal":"a","files":["/outside/x"]}`, "task 0: /outside/x is outside the workspace; nothing was started"},
		{"not there", `{"tasks":[{"goal":"a"},{"goal":"b","files":["gone.txt"]}]}`, "task 1: no file at gone.txt; nothing was started"},
		{"files beside tasks", `{"files":["notes.txt"],"tasks":[{"goal":"a"}]}`, "context, output_schema, files and toolsets go with goal"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			turn := &tools.Turn{Conv: "telegram:1"}
			res := set.Call(context.Background(), turn, chat.ToolCall{ID: "1", Name: ToolName, Arguments: tc.args})
			if !res.IsError || !strings.Contains(res.Content, tc.says) {
				t.Errorf("result %s, want an error saying %q", res.Content, tc.says)
			}
			if len(turn.Writes()) != 0 {
				t.Errorf("a refused call dispatched %v", turn.Writes())
			}
		})
	}

	// Without a checker, no file is handed on.
	_, err = HandedFiles{}.resolve("x", []taskArgs{{Goal: "a", Files: []string{"notes.txt"}}}, "/ws", "c")
	if !errs.Is(err, errs.Invalid) {
		t.Errorf("files with no checker: %v, want Invalid", err)
	}
}

// A child's first message names its files; the pictures among them it
// is shown, and only with that message.
func TestChildIsShownItsPictures(t *testing.T) {
	ws := t.TempDir()
	picture, notes := filepath.Join(ws, "chart.png"), filepath.Join(ws, "notes.txt")
	if err := os.WriteFile(picture, []byte("\x89PNG\r\n\x1a\n a picture"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notes, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewSpawner(SpawnerOptions{Tools: echoTools(t, nil), Files: HandedFiles{Peek: sniff}})
	in := s.turnInput(Child{ID: "sub_1", Task: Task{Goal: "read the chart", Files: []string{picture, notes, filepath.Join(ws, "gone.md")}}}, ws)
	if len(in.Images) != 1 || in.Images[0].Name != "chart.png" || in.Images[0].MIME != "image/png" || in.Images[0].Path != picture || in.Images[0].Data != nil {
		t.Errorf("Images = %+v, want the chart alone, by its path", in.Images)
	}
	for _, want := range []string{
		"Files handed to you:",
		"- " + picture + " (image/png, 18 bytes), shown to you",
		"- " + notes + " (text/plain; charset=utf-8, 5 bytes)",
		"gone.md (it cannot be read now",
	} {
		if !strings.Contains(in.Entry.Text, want) {
			t.Errorf("the task's message lacks %q:\n%s", want, in.Entry.Text)
		}
	}

	// Run: the child's first request shows the picture, loaded by the
	// spawner's loader; the correction round after it does not again.
	m := &fakeModel{replies: []func(context.Context, llm.Request) (*llm.Response, error){reply("not json"), reply(`{"ok":true}`)}}
	var loads int
	s = NewSpawner(SpawnerOptions{Client: m, Model: "m", Tools: echoTools(t, nil), Files: HandedFiles{Peek: sniff},
		Images: func(_ context.Context, img chat.Image) (chat.Image, error) {
			loads++
			img.Data = []byte("loaded")
			return img, nil
		}})
	res := s.Run(context.Background(), Child{ID: "sub_2", Task: Task{Goal: "read", Files: []string{picture}, OutputSchema: []byte(`{"type":"object"}`)}}, 1, nil)
	if res.Status != StatusCompleted {
		t.Fatalf("the child ended %s: %s", res.Status, res.Error)
	}
	reqs := m.requests()
	if len(reqs) != 2 {
		t.Fatalf("the child made %d requests, want its run and the correction", len(reqs))
	}
	first := reqs[0].Messages[len(reqs[0].Messages)-1]
	if len(first.Images) != 1 || string(first.Images[0].Data) != "loaded" || !strings.Contains(first.Content, picture) {
		t.Errorf("the first request's message = %q with images %+v, want the file named and the picture loaded", first.Content, first.Images)
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if len(last.Images) != 0 {
		t.Errorf("the correction's message shows %d pictures again", len(last.Images))
	}
}
