package agent_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/notes"
	"github.com/heraldgw/herald/sessions"
)

func TestMemory(t *testing.T) {
	note := func(id, text string) notes.Note { return notes.Note{ID: id, Text: text, At: t0} }
	two := []notes.Note{note("n1", "prefers metric units"), note("n2", "works on herald")}
	tests := []struct {
		desc   string
		before []notes.Note // the user's notes before the turn, numbered n1, n2, …
		in     func(in *sessions.TurnInput)
		args   string
		result string // what the model reads; <new> stands for a new note's id
		// writes are what the turn commits (the tool writes nothing
		// itself); a NoteAdd's ID <new> is the new note's.
		writes []sessions.Write
	}{
		{desc: "add", args: `{"action":"add","text":" prefers metric units "}`,
			result: `{"id":"<new>","status":"added"}`, writes: []sessions.Write{notes.Add{User: userKey, ID: "<new>", Text: "prefers metric units"}}},
		{desc: "add what is already there", before: two, args: `{"action":"add","text":"works on herald"}`,
			result: `{"id":"n2","status":"exists"}`},
		{desc: "list", before: two, args: `{"action":"list"}`,
			result: `{"count":2,"limit":3,"notes":[{"id":"n1","text":"prefers metric units","at":"2026-03-01T12:00:00Z"},{"id":"n2","text":"works on herald","at":"2026-03-01T12:00:00Z"}]}`},
		{desc: "list nothing", args: `{"action":"list"}`, result: `{"count":0,"limit":3,"notes":[]}`},
		{desc: "remove", before: two, args: `{"action":"remove","id":"n1"}`,
			result: `{"id":"n1","status":"removed"}`, writes: []sessions.Write{notes.Remove{User: userKey, ID: "n1"}}},
		{desc: "remove an unknown id", before: two, args: `{"action":"remove","id":"n9"}`,
			result: `{"error":"there is no note with id \"n9\"; list the notes to see their ids"}`},
		{desc: "remove without an id", before: two, args: `{"action":"remove"}`,
			result: `{"error":"id is required to remove a note; list the notes to see their ids"}`},
		{desc: "add without text", args: `{"action":"add"}`, result: `{"error":"text is required to add a note"}`},
		{desc: "a note over the size limit", args: `{"action":"add","text":"` + strings.Repeat("ü", 41) + `"}`,
			result: `{"error":"the note is 41 characters, over the limit of 40: keep it to one short fact"}`},
		{desc: "memory full", before: append(two, note("n3", "lives in Lyon")), args: `{"action":"add","text":"likes tea"}`,
			result: `{"error":"memory is full (3 notes, the limit): remove a note that no longer matters (action remove with its id), then add this one"}`},
		{desc: "unknown action", args: `{"action":"forget"}`,
			result: `{"error":"invalid arguments for memory: action: value must be one of 'add', 'list', 'remove'"}`},
		{desc: "a turn without a user", in: func(in *sessions.TurnInput) { in.Entry.Sender = "" }, args: `{"action":"list"}`,
			result: `{"error":"memory is not available here: this turn has no user to keep notes for"}`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t)
			for _, n := range tc.before {
				if _, err := f.notes.AddNote(context.Background(), userKey, n.Text); err != nil {
					t.Fatal(err)
				}
			}
			f.ms.Script(testkit.CallTools(testkit.ToolCall("memory", tc.args)), testkit.Reply("noted"))
			in := input("remember this")
			if tc.in != nil {
				tc.in(&in)
			}
			out, err := f.agent.Run(context.Background(), &in)
			if err != nil {
				t.Fatal(err)
			}
			newID := "<new>"
			for _, w := range out.Writes {
				if a, ok := w.(notes.Add); ok {
					newID = a.ID
				}
			}
			want := strings.ReplaceAll(tc.result, "<new>", newID)
			if diff := cmp.Diff(result("call_1_0", "memory", want), out.History[2]); diff != "" {
				t.Errorf("tool result (-want +got):\n%s", diff)
			}
			wantWrites := slices.Clone(tc.writes)
			for i, w := range wantWrites {
				if a, ok := w.(notes.Add); ok && a.ID == "<new>" {
					a.ID = newID
					wantWrites[i] = a
				}
			}
			if diff := cmp.Diff(wantWrites, out.Writes); diff != "" {
				t.Errorf("the turn's writes (-want +got):\n%s", diff)
			}
			got, _ := f.notes.Notes(context.Background(), userKey)
			if diff := cmp.Diff(tc.before, got); diff != "" {
				t.Errorf("notes after the turn, before its commit (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNotesInThePrompt(t *testing.T) {
	f := newFixture(t)
	f.agent.Notes = f.notes
	for _, text := range []string{"prefers metric units", "works on herald"} {
		if _, err := f.notes.AddNote(context.Background(), userKey, text); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.notes.AddNote(context.Background(), "slack:42", "someone else"); err != nil {
		t.Fatal(err)
	}
	f.ms.Script(testkit.Reply("ok"), testkit.Reply("ok"), testkit.Reply("ok"))

	run := func(in func(*sessions.TurnInput)) []testkit.ModelMessage {
		t.Helper()
		i := input("hi")
		if in != nil {
			in(&i)
		}
		if _, err := f.agent.Run(context.Background(), &i); err != nil {
			t.Fatal(err)
		}
		reqs := f.ms.Requests()
		return reqs[len(reqs)-1].Messages
	}

	want := []testkit.ModelMessage{
		{Role: "system", Content: system},
		{Role: "system", Content: "Notes you keep about this user (memory tool):\n- [n1] prefers metric units\n- [n2] works on herald"},
		{Role: "user", Content: "hi"},
	}
	if diff := cmp.Diff(want, run(nil)); diff != "" {
		t.Errorf("messages with notes (-want +got):\n%s", diff)
	}

	// An explicit user overrides the sender.
	want = []testkit.ModelMessage{
		{Role: "system", Content: system},
		{Role: "system", Content: "Notes you keep about this user (memory tool):\n- [n3] someone else"},
		{Role: "user", Content: "hi"},
	}
	if diff := cmp.Diff(want, run(func(in *sessions.TurnInput) { in.User = "slack:42" })); diff != "" {
		t.Errorf("messages for an explicit user (-want +got):\n%s", diff)
	}

	// Notes that cannot be read do not stop the turn.
	f.notes.err = errs.Wrap("store.Notes", errs.Unavailable, errors.New("connection refused"))
	want = []testkit.ModelMessage{{Role: "system", Content: system}, {Role: "user", Content: "hi"}}
	if diff := cmp.Diff(want, run(nil)); diff != "" {
		t.Errorf("messages when notes fail (-want +got):\n%s", diff)
	}
}
