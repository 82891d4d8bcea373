package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/kanban"
)

// herald kanban attach keeps a file for a card's workers and show lists
// it with its path; create --attach makes a card with its files, which
// no worker takes before they are there, and says no "unblocked" of it.
func TestKanbanAttachCommand(t *testing.T) {
	env := kanbanEnv(t, "sqlite")
	home := env["HERALD_HOME"]
	if err := os.WriteFile(filepath.Join(home, "herald.yaml"), []byte("kanban:\n  attachment_max_bytes: 16\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	spec, big := file("spec.md", "# the spec"), file("big.bin", strings.Repeat("x", 17))

	k := kbJSON[kanban.Card](t, env, "create", "read the spec")
	out := kb(t, env, "attach", k.ID, spec)
	path := filepath.Join(home, "kanban", "attachments", k.ID, "spec.md")
	if !strings.Contains(out, "attached spec.md to "+k.ID) || !strings.Contains(out, path) {
		t.Errorf("attach said %q, want the attachment and its path %s", out, path)
	}
	a := kbJSON[kanban.Attachment](t, env, "attach", k.ID, spec, "--name", "copy.md")
	if a.Name != "copy.md" || a.Size != 10 || a.CreatedBy != "cli" {
		t.Errorf("attach --name --json = %+v", a)
	}
	for _, tt := range []struct {
		desc string
		args []string
		code int
		want string
	}{
		{"the same name again", []string{"attach", k.ID, spec}, exitFailure, "--name"},
		{"over the limit", []string{"attach", k.ID, big}, exitFailure, "kanban.attachment_max_bytes"},
		{"a path for a name", []string{"attach", k.ID, spec, "--name", "../x"}, exitFailure, "no slash"},
		{"no such file", []string{"attach", k.ID, filepath.Join(dir, "nope")}, exitFailure, "no such file"},
		{"a directory", []string{"attach", k.ID, dir}, exitFailure, "is a directory"},
		{"no card", []string{"attach", "t_00000000", spec}, exitFailure, "no card t_00000000"},
		{"no file", []string{"attach", k.ID}, exitUsage, "a card's id and a file"},
	} {
		kbFails(t, env, tt.code, tt.want, tt.args...)
	}
	if _, err := os.Stat(filepath.Join(home, "kanban", "attachments", k.ID, "big.bin")); !os.IsNotExist(err) {
		t.Errorf("a refused attachment is there: %v", err)
	}

	type shown struct {
		ID          string              `json:"id"`
		Attachments []kanban.Attachment `json:"attachments"`
		Events      []kanban.Event      `json:"events"`
	}
	v := kbJSON[shown](t, env, "show", k.ID)
	var names []string
	for _, a := range v.Attachments {
		names = append(names, a.Name+" "+a.Path)
	}
	if diff := cmp.Diff([]string{"spec.md " + path, "copy.md " + filepath.Join(filepath.Dir(path), "copy.md")}, names); diff != "" {
		t.Errorf("show --json attachments (-want +got):\n%s", diff)
	}
	if out := kb(t, env, "show", k.ID); !strings.Contains(out, "attachments:\n  spec.md  10 bytes  by cli  "+path) {
		t.Errorf("show printed %q, want its attachments", out)
	}

	made := kbJSON[kanban.Card](t, env, "create", "with files", "--attach", spec, "--attach", file("data.csv", "1,2"))
	if made.Status != kanban.StatusReady {
		t.Errorf("create --attach made %+v, want it ready", made)
	}
	v = kbJSON[shown](t, env, "show", made.ID)
	var kinds []string
	for _, e := range v.Events {
		kinds = append(kinds, e.Kind)
	}
	if len(v.Attachments) != 2 || !cmp.Equal(kinds, []string{kanban.EventCreated, kanban.EventAttached, kanban.EventAttached, kanban.EventPromoted}) {
		t.Errorf("create --attach: attachments %+v, events %v; want both there before it was ready", v.Attachments, kinds)
	}
	kbFails(t, env, exitFailure, "attaching "+big+" failed", "create", "too big", "--attach", big)
}
