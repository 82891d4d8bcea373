package controllers_test

import (
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/internal/errs"
)

func TestParseLoop(t *testing.T) {
	for _, tc := range []struct {
		desc, args string
		want       controllers.Loop
		err        string
	}{
		{desc: "a fixed interval", args: "10m check the deploy",
			want: controllers.Loop{Prompt: "check the deploy", Interval: 10 * time.Minute, Status: controllers.LoopActive}},
		{desc: "self-paced, with a count and a condition", args: "auto watch the queue --times 5 --until it is empty",
			want: controllers.Loop{Prompt: "watch the queue", Interval: time.Minute, Auto: true, Times: 5, Until: "it is empty", Status: controllers.LoopActive}},
		{desc: "below the least interval", args: "10s poll", err: "below the least, 30s"},
		{desc: "not an interval", args: "often poll", err: `interval "often"`},
		{desc: "no prompt", args: "10m", err: "needs an interval"},
		{desc: "a bad count", args: "10m poll --times 0", err: `--times "0"`},
		{desc: "an unknown option", args: "10m poll --every 3", err: "unknown option --every"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := controllers.ParseLoop(tc.args, controllers.DefaultLoopMinInterval)
			if tc.err != "" {
				if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want Invalid with %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseLoop = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestLoopTicked(t *testing.T) {
	t.Run("self-paced: doubles while the reply is the same, up to 15 minutes, back to a minute on a change", func(t *testing.T) {
		l, err := controllers.ParseLoop("auto watch", controllers.DefaultLoopMinInterval)
		if err != nil {
			t.Fatal(err)
		}
		var paces []time.Duration
		for _, reply := range []string{"same", "same", "same", "same", "same", "same", "changed"} {
			l = l.Ticked(reply, 0)
			paces = append(paces, l.Interval)
		}
		want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 15 * time.Minute, 15 * time.Minute, time.Minute}
		for i := range want {
			if paces[i] != want[i] {
				t.Fatalf("paces %v, want %v", paces, want)
			}
		}
	})
	t.Run("a fixed interval stays", func(t *testing.T) {
		l := controllers.Loop{Interval: time.Hour, Status: controllers.LoopActive}
		if l = l.Ticked("x", 0).Ticked("x", 0); l.Interval != time.Hour || l.Ticks != 2 || l.Status != controllers.LoopActive {
			t.Errorf("loop %+v", l)
		}
	})
	t.Run("LOOP_COMPLETE on a line of its own ends it", func(t *testing.T) {
		l := controllers.Loop{Interval: time.Hour, Status: controllers.LoopActive}
		if got := l.Ticked("all green\nLOOP_COMPLETE\n", 0); got.Status != controllers.LoopDone {
			t.Errorf("loop %+v, want done", got)
		}
		if got := l.Ticked("not yet LOOP_COMPLETE", 0); got.Status != controllers.LoopActive {
			t.Errorf("a mention inside a line ended the loop: %+v", got)
		}
	})
	t.Run("--times ends it on its last tick", func(t *testing.T) {
		l := controllers.Loop{Interval: time.Hour, Times: 2, Status: controllers.LoopActive}
		if l = l.Ticked("a", 0); l.Status != controllers.LoopActive {
			t.Fatalf("after 1 of 2: %+v", l)
		}
		if l = l.Ticked("b", 0); l.Status != controllers.LoopDone || !strings.Contains(l.Reason, "2 times") {
			t.Errorf("after 2 of 2: %+v", l)
		}
	})
	t.Run("loop.max_ticks pauses it and says so", func(t *testing.T) {
		l := controllers.Loop{Interval: time.Hour, Ticks: 99, Status: controllers.LoopActive}
		if l = l.Ticked("a", 100); l.Status != controllers.LoopPaused || !strings.Contains(l.Reason, "loop.max_ticks") {
			t.Errorf("loop %+v, want paused at the cap", l)
		}
		unlimited := controllers.Loop{Interval: time.Hour, Ticks: 1000, Status: controllers.LoopActive}
		if got := unlimited.Ticked("a", 0); got.Status != controllers.LoopActive {
			t.Errorf("max_ticks 0 paused the loop: %+v", got)
		}
	})
}
