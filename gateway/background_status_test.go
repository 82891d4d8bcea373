package gateway

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/store/sqlite"
)

func TestBackgroundStatusLine(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "h.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pa := &presenceAdapter{fakeAdapter: fakeAdapter{platform: "slack"}}
	b := newBackgroundStatus([]adapters.Adapter{pa}, db.Sessions(), slog.Default())
	origin := outbox.Target{Platform: "slack", Chat: "C1"}
	d := delegation.Delegation{ID: "deleg_1", Conv: "slack:C1", Origin: origin}
	for i := range 3 {
		d.Children = append(d.Children, delegation.Child{ID: "sub_" + string(rune('a'+i)), Status: delegation.StatusRunning})
	}
	// Two instances end children in turn: the line is one, edited.
	for i := range 3 {
		d.Children[i].Status = delegation.StatusCompleted
		b.show(ctx, d)
	}
	var got []presenceCall
	for _, c := range pa.got() {
		got = append(got, presenceCall{kind: c.kind, id: c.id, text: c.text})
	}
	want := []presenceCall{
		{kind: "post", text: "Background: 1 of 3 sub-agents done"},
		{kind: "edit", id: "s1", text: "Background: 2 of 3 sub-agents done"},
		{kind: "clear", id: "s1"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(presenceCall{})); diff != "" {
		t.Errorf("presence calls (-want +got):\n%s", diff)
	}
	meta, err := db.Sessions().Meta(ctx, "slack:C1")
	if err != nil || meta[statusKey("deleg_1")] != "" {
		t.Errorf("metadata %v (%v): want the line's id gone once it was removed", meta, err)
	}
}
