package tools_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/store/sqlite"
	"github.com/heraldgw/herald/tools"
)

// TestMemoryWritesWithTheTurn holds that the memory tool writes nothing
// itself: what a turn adds and removes is in the turn's writes, seen by
// the turn's own later calls, and in the store only once the turn's
// commit went through.
func TestMemoryWritesWithTheTurn(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store, notes := db.Sessions(), db.Notes()
	const user = "telegram:42"
	old, err := notes.AddNote(ctx, user, "lives in Oslo")
	if err != nil {
		t.Fatal(err)
	}
	set := coreSet(t, tools.CoreOptions{Notes: notes})
	turn := &tools.Turn{Conv: "telegram:42", User: user}
	call := func(args string) map[string]any {
		t.Helper()
		r := set.Call(ctx, turn, chat.ToolCall{Name: "memory", Arguments: args})
		if r.IsError {
			t.Fatalf("memory %s: %s", args, r.Content)
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(r.Content), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	listed := func() []string {
		t.Helper()
		var texts []string
		for _, n := range call(`{"action":"list"}`)["notes"].([]any) {
			texts = append(texts, n.(map[string]any)["text"].(string))
		}
		return texts
	}

	added := call(`{"action":"add","text":"likes tea"}`)
	if added["status"] != "added" || added["id"] == "" {
		t.Fatalf("add = %v, want added with an id", added)
	}
	if again := call(`{"action":"add","text":"likes tea"}`); again["status"] != "exists" || again["id"] != added["id"] {
		t.Errorf("the same note again = %v, want exists with id %v", again, added["id"])
	}
	if d := cmp.Diff([]string{"lives in Oslo", "likes tea"}, listed()); d != "" {
		t.Errorf("list after the add (-want +got):\n%s", d)
	}
	call(`{"action":"remove","id":"` + old.ID + `"}`)
	if d := cmp.Diff([]string{"likes tea"}, listed()); d != "" {
		t.Errorf("list after the remove (-want +got):\n%s", d)
	}
	if r := set.Call(ctx, turn, chat.ToolCall{Name: "memory", Arguments: `{"action":"remove","id":"` + old.ID + `"}`}); !r.IsError {
		t.Errorf("removing a removed note = %s, want an error", r.Content)
	}

	if ns, _ := notes.Notes(ctx, user); len(ns) != 1 || ns[0].ID != old.ID {
		t.Errorf("stored notes before the commit = %+v, want only %q", ns, old.Text)
	}
	if _, err := store.Append(ctx, sessions.Inbound{Conv: turn.Conv, User: user, Text: "remember", MessageID: "1"}); err != nil {
		t.Fatal(err)
	}
	claimed, err := store.Claim(ctx, "w1", time.Minute)
	if err != nil || claimed == nil {
		t.Fatalf("Claim = %v, %v", claimed, err)
	}
	var writes []sessions.Write
	for _, w := range turn.Writes() {
		writes = append(writes, w)
	}
	if err := store.Finish(ctx, claimed.Lease, sessions.Finish{EntryID: claimed.Entry.ID, Writes: writes, Release: true}); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	ns, err := notes.Notes(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 1 || ns[0].ID != added["id"] || ns[0].Text != "likes tea" {
		t.Errorf("stored notes after the commit = %+v, want only %v likes tea", ns, added["id"])
	}
}
