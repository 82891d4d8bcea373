package main

import (
	"testing"

	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/kanban"
)

// herald kanban stop, while a daemon runs the card's worker, has that
// dispatcher end the worker's process and block the card with the
// reason; a claim taken by hand, with no worker started, is blocked at
// once; a card that is not running is refused.
func TestKanbanStop(t *testing.T) {
	env := kanbanEnv(t, "sqlite")
	lanesConfig(t, env)
	k := kbJSON[kanban.Card](t, env, "create", "Slow one", "--assignee", "slow")
	_, card, stop := daemon(t, env)
	var running kanban.Card
	testkit.Eventually(t, "the daemon to start the card's worker", func() bool {
		var err error
		running, err = card(k.ID)
		return err == nil && running.Claim != nil && running.Claim.PID > 0
	})
	pid, start := running.Claim.PID, running.Claim.ProcStart
	if !proc.Alive(pid, start) {
		t.Fatalf("the worker (pid %d) is not running", pid)
	}

	got := kbJSON[kanban.Card](t, env, "stop", k.ID, "--reason", "wrong approach")
	if got.ID != k.ID || got.Status != kanban.StatusBlocked || got.BlockReason != "wrong approach" || got.Claim != nil {
		t.Errorf("stop --json printed %+v, want the card blocked with the reason", got)
	}
	if proc.Alive(pid, start) {
		t.Errorf("the worker (pid %d) still runs after the stop", pid)
	}
	v := kbJSON[cardView](t, env, "show", k.ID)
	if v.Failures != 0 || len(v.Runs) != 1 || v.Runs[0].Outcome != kanban.OutcomeBlocked || v.Runs[0].Owner == "cli" {
		t.Errorf("after the stop: %d failures, runs %+v; want one run, ended blocked by its dispatcher", v.Failures, v.Runs)
	}
	kbFails(t, env, exitFailure, k.ID+" is blocked, not running: it has no worker to stop", "stop", k.ID)
	kbFails(t, env, exitFailure, "no card t_00000000", "stop", "t_00000000")
	kbFails(t, env, exitUsage, "one card's id", "stop")

	stop()

	// With no dispatcher about, a claim taken by hand, which started no
	// worker, is blocked at once.
	byHand := kbJSON[kanban.Card](t, env, "create", "By hand")
	kb(t, env, "claim", byHand.ID)
	if out := kb(t, env, "stop", byHand.ID); out != "stopped "+byHand.ID+": its worker ended; blocked: stopped by hand\n" {
		t.Errorf("stop of a claim taken by hand printed %q", out)
	}
}

// herald kanban edit changes a card's title, body and priority; it needs
// one of them, and refuses bad input with the reason, on each backend.
func TestKanbanEdit(t *testing.T) {
	for _, backend := range []string{"sqlite", "redis"} {
		t.Run(backend, func(t *testing.T) {
			env := kanbanEnv(t, backend)
			k := kbJSON[kanban.Card](t, env, "create", "Draft", "--body", "old", "--priority", "1")
			got := kbJSON[kanban.Card](t, env, "edit", k.ID, "--title", "Final", "--body", "", "--priority", "7")
			if got.ID != k.ID || got.Title != "Final" || got.Body != "" || got.Priority != 7 || got.Status != kanban.StatusReady {
				t.Errorf("edit --json printed %+v", got)
			}
			if out := kb(t, env, "edit", k.ID, "--priority", "2"); out != "edited "+k.ID+": \"Final\", priority 2\n" {
				t.Errorf("edit printed %q", out)
			}
			kbFails(t, env, exitUsage, "give --title, --body or --priority", "edit", k.ID)
			kbFails(t, env, exitFailure, "a card needs a title", "edit", k.ID, "--title", " ")
			kbFails(t, env, exitFailure, "no card t_00000000", "edit", "t_00000000", "--body", "x")
			v := kbJSON[cardView](t, env, "show", k.ID)
			if v.Title != "Final" || v.Body != "" || v.Priority != 2 {
				t.Errorf("show after the edits: %+v", v.Card)
			}
		})
	}
}
