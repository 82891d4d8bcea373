package delegation_test

import (
	"context"
	"strings"
	"testing"

	"github.com/heraldgw/herald/delegation"
)

// TestCancelElsewhereIsSaidAsSuch cancels, from an edge with no runner
// (the CLI), a child that runs on an instance and one that no instance
// has started: the running one gets the cancel through the store's
// signals and ends cancelled by the operator, not "stopped by its parent
// agent"; the pending one ends so in the store; the delegation says
// cancelled, not failed.
func TestCancelElsewhereIsSaidAsSuch(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores) {
		ctx := context.Background()
		model := blockingModel{started: make(chan struct{}, 1)}
		runner, ended := startRunner(t, st.dlg, model)
		here := &delegation.Service{Store: st.dlg, Signals: st.signals, Runner: runner}
		running, err := here.Start(ctx, delegation.Request{Conv: "api:cancel", Goal: "wait"})
		if err != nil {
			t.Fatal(err)
		}
		<-model.started
		// The loop's pass at its start and the one Start woke it for are
		// both over: none runs after the pending delegation is made, which
		// must stay pending.
		waitPasses(t, runner, 2)
		_, from, err := st.signals.SignalsAfter(ctx, "", 1)
		if err != nil {
			t.Fatal(err)
		}
		cli := &delegation.Service{Store: st.dlg, Signals: st.signals, Cancelled: "cancelled by the operator"}
		pending, err := cli.Start(ctx, delegation.Request{Conv: "api:cancel", Goal: "later"}) // wakes no runner
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{running.ID, pending.ID} {
			if _, stopped, err := cli.Cancel(ctx, id); err != nil || len(stopped) != 1 {
				t.Fatalf("Cancel(%s) = %v, %v; want its child stopped", id, stopped, err)
			}
		}
		// The signals tailer of the instance running the child.
		sigs, _, err := st.signals.SignalsAfter(ctx, from, 10)
		if err != nil || len(sigs) != 1 || sigs[0].Kind != delegation.SignalCancel {
			t.Fatalf("signals %+v (%v): want one delegation.cancel", sigs, err)
		}
		runner.HandleSignal(sigs[0])
		<-ended
		for _, tc := range []struct {
			id, why string
		}{
			{running.ID, "cancelled by the operator"},
			{pending.ID, "cancelled by the operator before it started"},
		} {
			d, err := st.dlg.Delegation(ctx, tc.id)
			if err != nil {
				t.Fatal(err)
			}
			c := d.Children[0]
			if c.Status != delegation.StatusCancelled || c.Result == nil || c.Result.Error != tc.why || c.Result.ExitReason != "cancelled" {
				t.Errorf("child %s ended %s (%+v), want cancelled: %q", c.ID, c.Status, c.Result, tc.why)
			}
			if d.Status() != delegation.StatusCancelled {
				t.Errorf("delegation %s says %s, want cancelled", d.ID, d.Status())
			}
			cs, err := st.dlg.Completions(ctx, d.ID)
			if err != nil || len(cs) != 1 || !strings.Contains(delegation.CompletionText(cs[0]), "status: cancelled, exit: cancelled\nerror: "+tc.why) {
				t.Errorf("completions %+v (%v): want one saying the cancel", cs, err)
			}
		}
	})
}

func TestDelegationStatusSaysHowItEnded(t *testing.T) {
	tests := []struct {
		desc     string
		children []delegation.Status
		want     delegation.Status
	}{
		{"one running keeps it running", []delegation.Status{delegation.StatusCompleted, delegation.StatusRunning}, delegation.StatusRunning},
		{"all interrupted", []delegation.Status{delegation.StatusInterrupted, delegation.StatusInterrupted}, delegation.StatusInterrupted},
		{"all cancelled", []delegation.Status{delegation.StatusCancelled}, delegation.StatusCancelled},
		{"all unknown", []delegation.Status{delegation.StatusUnknown, delegation.StatusUnknown}, delegation.StatusUnknown},
		{"all timed out", []delegation.Status{delegation.StatusTimedOut}, delegation.StatusTimedOut},
		{"one completed among others", []delegation.Status{delegation.StatusInterrupted, delegation.StatusCompleted}, delegation.StatusCompleted},
		{"a failure among stops", []delegation.Status{delegation.StatusInterrupted, delegation.StatusStalled}, delegation.StatusFailed},
		{"cancelled and interrupted", []delegation.Status{delegation.StatusInterrupted, delegation.StatusCancelled}, delegation.StatusCancelled},
		{"interrupted and unknown", []delegation.Status{delegation.StatusUnknown, delegation.StatusInterrupted}, delegation.StatusInterrupted},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var d delegation.Delegation
			for _, s := range tc.children {
				d.Children = append(d.Children, delegation.Child{Status: s})
			}
			if got := d.Status(); got != tc.want {
				t.Errorf("Status() = %s, want %s", got, tc.want)
			}
		})
	}
}
