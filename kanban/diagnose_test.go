package kanban_test

import (
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/kanban"
)

// A diagnosis names, by kind, the ready card that waited past
// StrandedAfter (not the one just made ready), the blocked card, the
// running card whose claim ran out, the one whose worker's gateway on
// this host died, and the lane paused.
func TestDiagnoseNamesWhatIsStuck(t *testing.T) {
	eachStore(t, func(t *testing.T, h *harness) {
		empty, err := kanban.Diagnose(h.ctx, h.svc, kanban.DefaultBoard, "test-host")
		if err != nil {
			t.Fatal(err)
		}
		if empty.Board != kanban.DefaultBoard || len(empty.Stranded)+len(empty.Blocked)+len(empty.Expired)+len(empty.Gone)+len(empty.Paused) != 0 ||
			empty.Stranded == nil || empty.Gone == nil || empty.Paused == nil {
			t.Errorf("an empty board's diagnosis = %+v, want every list empty, none nil", empty)
		}

		stranded := h.create(kanban.CreateSpec{Title: "waits", Assignee: "coder"})
		blocked := h.create(kanban.CreateSpec{Title: "stuck"})
		r := h.claim(blocked.ID)
		if _, err := h.svc.Block(h.ctx, blocked.ID, r.Claim.Token, kanban.BlockNeedsInput, "needs a key", "worker"); err != nil {
			t.Fatal(err)
		}
		expired := h.create(kanban.CreateSpec{Title: "slow"})
		h.claim(expired.ID) // for a minute
		h.clk.Advance(kanban.StrandedAfter)
		gw := startProcess(t)
		gone := h.create(kanban.CreateSpec{Title: "orphaned"})
		h.claimAs(gone.ID, "gw-old", "test-host", gw, 0, "")
		gw.kill()
		if err := h.svc.PauseLane(h.ctx, "quota", time.Hour, "rate limited"); err != nil {
			t.Fatal(err)
		}
		h.create(kanban.CreateSpec{Title: "just made"})

		d, err := kanban.Diagnose(h.ctx, h.svc, kanban.DefaultBoard, "test-host")
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Stranded) != 1 || d.Stranded[0].ID != stranded.ID || d.Stranded[0].Assignee != "coder" || d.Stranded[0].WaitedSeconds != int(kanban.StrandedAfter.Seconds()) {
			t.Errorf("stranded = %+v, want %s alone, waiting %s", d.Stranded, stranded.ID, kanban.StrandedAfter)
		}
		if len(d.Blocked) != 1 || d.Blocked[0].ID != blocked.ID || d.Blocked[0].Reason != "needs a key" || d.Blocked[0].Kind != string(kanban.BlockNeedsInput) {
			t.Errorf("blocked = %+v, want %s and why", d.Blocked, blocked.ID)
		}
		if len(d.Expired) != 1 || d.Expired[0].ID != expired.ID || d.Expired[0].Owner != "gw-a" {
			t.Errorf("expired = %+v, want %s", d.Expired, expired.ID)
		}
		if len(d.Gone) != 1 || d.Gone[0].ID != gone.ID || !strings.Contains(d.Gone[0].Why, "its worker is gone with gw-old") {
			t.Errorf("gone = %+v, want %s, its worker gone with its gateway", d.Gone, gone.ID)
		}
		if len(d.Paused) != 1 || d.Paused[0].Lane != "quota" || !d.Paused[0].Until.Equal(t0.Add(kanban.StrandedAfter+time.Hour)) || d.Paused[0].Reason != "rate limited" {
			t.Errorf("paused = %+v, want the quota lane for an hour", d.Paused)
		}
		// Another host cannot see the gateway's processes.
		far, err := kanban.Diagnose(h.ctx, h.svc, kanban.DefaultBoard, "far-host")
		if err != nil {
			t.Fatal(err)
		}
		if len(far.Gone) != 0 {
			t.Errorf("another host's diagnosis names gone workers: %+v", far.Gone)
		}
	})
}
