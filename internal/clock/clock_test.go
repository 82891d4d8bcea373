package clock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/heraldgw/herald/internal/clock"
)

// TestMain checks that no AfterFunc goroutine or sleeper outlives its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// guard bounds how long a test waits for a goroutine to report; it is a
// failure deadline, never how a test synchronises.
const guard = 10 * time.Second

// subject is what a table test drives: a Fake, and the channel, Stop and
// Reset of the timer or ticker it made, the last two reporting what they
// returned.
type subject struct {
	clk   *clock.Fake
	c     <-chan time.Time
	stop  func() string
	reset func(time.Duration) string
}

// op is one step of a table test; it returns what it observed, or "" when
// it has nothing to say.
type op func(s subject) string

func advance(d time.Duration) op {
	return func(s subject) string { s.clk.Advance(d); return "" }
}

// recv reports what the channel holds: a Fake sends before Advance
// returns, so an empty channel means nothing fired.
func recv(s subject) string {
	select {
	case v := <-s.c:
		return "fired at " + v.Sub(t0).String()
	default:
		return "quiet"
	}
}

func stop(s subject) string { return s.stop() }

func reset(d time.Duration) op {
	return func(s subject) string { return s.reset(d) }
}

func waiters(s subject) string { return fmt.Sprintf("waiters %d", s.clk.Waiters()) }

// run applies ops in turn and returns what they observed.
func run(s subject, ops []op) []string {
	var got []string
	for _, o := range ops {
		if r := o(s); r != "" {
			got = append(got, r)
		}
	}
	return got
}

func TestFakeTimer(t *testing.T) {
	tests := []struct {
		desc string
		d    time.Duration
		ops  []op
		want []string
	}{
		{
			desc: "fires exactly at its deadline and not before",
			d:    time.Minute,
			ops:  []op{recv, waiters, advance(59 * time.Second), recv, advance(time.Second), recv, waiters, advance(time.Hour), recv},
			want: []string{"quiet", "waiters 1", "quiet", "fired at 1m0s", "waiters 0", "quiet"},
		},
		{
			desc: "Stop before the deadline keeps it from firing and reports true",
			d:    time.Minute,
			ops:  []op{advance(30 * time.Second), stop, waiters, advance(time.Hour), recv, stop},
			want: []string{"Stop true", "waiters 0", "quiet", "Stop false"},
		},
		{
			desc: "Stop after its value was received reports false",
			d:    time.Minute,
			ops:  []op{advance(time.Minute), recv, stop},
			want: []string{"fired at 1m0s", "Stop false"},
		},
		{
			desc: "Stop after it fired but before its value was read discards the value and reports true, as a Go 1.23 timer does",
			d:    time.Minute,
			ops:  []op{advance(time.Minute), stop, recv},
			want: []string{"Stop true", "quiet"},
		},
		{
			desc: "Reset before the deadline re-arms it from now",
			d:    time.Minute,
			ops:  []op{advance(30 * time.Second), reset(time.Minute), advance(59 * time.Second), recv, advance(time.Second), recv},
			want: []string{"Reset true", "quiet", "fired at 1m30s"},
		},
		{
			desc: "Reset after it fired re-arms it and reports false",
			d:    time.Minute,
			ops:  []op{advance(time.Minute), recv, reset(time.Minute), waiters, advance(time.Minute), recv},
			want: []string{"fired at 1m0s", "Reset false", "waiters 1", "fired at 2m0s"},
		},
		{
			desc: "Reset of a stopped timer re-arms it",
			d:    time.Minute,
			ops:  []op{stop, reset(time.Second), advance(time.Second), recv},
			want: []string{"Stop true", "Reset false", "fired at 1s"},
		},
		{
			desc: "a zero duration fires at creation, with no Advance",
			d:    0,
			ops:  []op{recv, waiters},
			want: []string{"fired at 0s", "waiters 0"},
		},
		{
			desc: "a negative duration fires at creation",
			d:    -time.Second,
			ops:  []op{recv},
			want: []string{"fired at 0s"},
		},
		{
			desc: "Reset to zero fires at once",
			d:    time.Minute,
			ops:  []op{advance(time.Second), reset(0), recv, waiters},
			want: []string{"Reset true", "fired at 1s", "waiters 0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			clk := clock.NewFake(t0)
			tm := clk.NewTimer(tt.d)
			got := run(subject{
				clk:   clk,
				c:     tm.C(),
				stop:  func() string { return fmt.Sprintf("Stop %t", tm.Stop()) },
				reset: func(d time.Duration) string { return fmt.Sprintf("Reset %t", tm.Reset(d)) },
			}, tt.ops)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("observed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFakeTicker(t *testing.T) {
	tests := []struct {
		desc string
		ops  []op
		want []string
	}{
		{
			desc: "ticks every period",
			ops:  []op{advance(9 * time.Second), recv, advance(time.Second), recv, advance(10 * time.Second), recv},
			want: []string{"quiet", "fired at 10s", "fired at 20s"},
		},
		{
			desc: "overdue by several periods it ticks once, and its next tick keeps its phase",
			ops:  []op{advance(35 * time.Second), recv, recv, advance(4 * time.Second), recv, advance(time.Second), recv},
			want: []string{"fired at 10s", "quiet", "quiet", "fired at 40s"},
		},
		{
			desc: "a tick its reader has not read yet drops the next",
			ops:  []op{advance(10 * time.Second), advance(10 * time.Second), recv, recv},
			want: []string{"fired at 10s", "quiet"},
		},
		{
			desc: "Stop ends it and discards an unread tick",
			ops:  []op{advance(10 * time.Second), stop, waiters, recv, advance(time.Minute), recv},
			want: []string{"stopped", "waiters 0", "quiet", "quiet"},
		},
		{
			desc: "Reset restarts a stopped ticker with the new period",
			ops:  []op{stop, reset(3 * time.Second), waiters, advance(3 * time.Second), recv, advance(3 * time.Second), recv},
			want: []string{"stopped", "reset", "waiters 1", "fired at 3s", "fired at 6s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			clk := clock.NewFake(t0)
			tk := clk.NewTicker(10 * time.Second)
			defer tk.Stop()
			got := run(subject{
				clk:   clk,
				c:     tk.C(),
				stop:  func() string { tk.Stop(); return "stopped" },
				reset: func(d time.Duration) string { tk.Reset(d); return "reset" },
			}, tt.ops)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("observed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFakeTickerPanicsOnNonPositivePeriod(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewTicker(0) did not panic; time.NewTicker does")
		}
	}()
	clock.NewFake(t0).NewTicker(0)
}

func TestFakeAfterFunc(t *testing.T) {
	tests := []struct {
		desc     string
		d        time.Duration
		before   time.Duration // advanced before the check that f has not started
		wantRuns bool
	}{
		{desc: "runs f once at its deadline", d: time.Minute, before: 59 * time.Second, wantRuns: true},
		{desc: "a zero duration runs f at creation", d: 0, wantRuns: true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			clk := clock.NewFake(t0)
			var runs atomic.Int32
			ran := make(chan struct{}, 10)
			tm := clk.AfterFunc(tt.d, func() { runs.Add(1); ran <- struct{}{} })
			if tm.C() != nil {
				t.Error("an AfterFunc timer's C() is not nil")
			}
			if tt.d > 0 {
				clk.Advance(tt.before)
				if got := clk.Waiters(); got != 1 {
					t.Fatalf("Waiters() before the deadline = %d, want 1: f was started early", got)
				}
				clk.Advance(tt.d - tt.before)
			}
			select {
			case <-ran:
			case <-time.After(guard):
				t.Fatal("f did not run once its deadline had passed")
			}
			clk.Advance(time.Hour)
			if tm.Stop() {
				t.Error("Stop() after f ran = true, want false")
			}
			// A second timer, fired after the first, bounds the wait for a
			// second run of f that would be a bug.
			done := make(chan struct{})
			clk.AfterFunc(time.Second, func() { close(done) })
			clk.Advance(time.Second)
			<-done
			if got := runs.Load(); got != 1 {
				t.Errorf("f ran %d times, want 1", got)
			}
		})
	}
}

func TestFakeAfterFuncStop(t *testing.T) {
	clk := clock.NewFake(t0)
	tm := clk.AfterFunc(time.Minute, func() { t.Error("f ran after Stop") })
	clk.Advance(30 * time.Second)
	if !tm.Stop() {
		t.Error("Stop() before the deadline = false, want true")
	}
	clk.Advance(time.Hour)
	if got := clk.Waiters(); got != 0 {
		t.Errorf("Waiters() after Stop = %d, want 0", got)
	}
}

func TestFakeFiresInDeadlineOrder(t *testing.T) {
	clk := clock.NewFake(t0)
	ds := []time.Duration{3 * time.Second, time.Second, 2 * time.Second, 2 * time.Second}
	var cs []<-chan time.Time
	for _, d := range ds {
		cs = append(cs, clk.NewTimer(d).C())
	}
	tk := clk.NewTicker(1500 * time.Millisecond)
	defer tk.Stop()
	clk.Advance(5 * time.Second)
	// Each fires once, with its own deadline rather than the time Advance
	// reached, as it would have had the clock stopped there on the way.
	var got []time.Duration
	for _, c := range append(cs, tk.C()) {
		select {
		case v := <-c:
			got = append(got, v.Sub(t0))
		default:
			got = append(got, -1)
		}
	}
	want := []time.Duration{3 * time.Second, time.Second, 2 * time.Second, 2 * time.Second, 1500 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("times sent (-want +got):\n%s", diff)
	}
	if got := clk.Now(); !got.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("Now() after Advance(5s) = %v, want %v", got, t0.Add(5*time.Second))
	}
}

func TestFakeSetFires(t *testing.T) {
	clk := clock.NewFake(t0)
	tm := clk.NewTimer(time.Hour)
	clk.Set(t0.Add(-time.Hour))
	if _, ok := <-nonBlocking(tm.C()); ok {
		t.Error("the timer fired when Set moved the clock back")
	}
	clk.Set(t0.Add(time.Hour))
	if _, ok := <-nonBlocking(tm.C()); !ok {
		t.Error("the timer did not fire when Set moved the clock to its deadline")
	}
}

// nonBlocking returns a closed channel holding what c holds now, if anything.
func nonBlocking(c <-chan time.Time) <-chan time.Time {
	out := make(chan time.Time, 1)
	select {
	case v := <-c:
		out <- v
	default:
	}
	close(out)
	return out
}

func TestFakeBlockUntil(t *testing.T) {
	tests := []struct {
		desc    string
		armed   int
		n       int
		wantErr error
	}{
		{desc: "returns at once when enough are armed", armed: 2, n: 2},
		{desc: "returns at once for zero", armed: 0, n: 0},
		{desc: "returns ctx's error when too few are armed", armed: 1, n: 2, wantErr: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			clk := clock.NewFake(t0)
			for range tt.armed {
				clk.NewTimer(time.Minute)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			if err := clk.BlockUntil(ctx, tt.n); !errors.Is(err, tt.wantErr) {
				t.Errorf("BlockUntil(%d) with %d armed = %v, want %v", tt.n, tt.armed, err, tt.wantErr)
			}
		})
	}
}

func TestFakeBlockUntilWaitsForAGoroutine(t *testing.T) {
	clk := clock.NewFake(t0)
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	const sleepers = 5
	done := make(chan bool, sleepers)
	for i := range sleepers {
		go func() { done <- clock.SleepOn(ctx, clk, time.Duration(i+1)*time.Second) }()
	}
	if err := clk.BlockUntil(ctx, sleepers); err != nil {
		t.Fatalf("BlockUntil(%d): %v", sleepers, err)
	}
	clk.Advance(sleepers * time.Second)
	for range sleepers {
		if !<-done {
			t.Error("SleepOn = false after the clock passed its duration, want true")
		}
	}
}

func TestSleepOn(t *testing.T) {
	tests := []struct {
		desc   string
		d      time.Duration
		cancel bool // end ctx once the sleeper is waiting, instead of advancing
		want   bool
	}{
		{desc: "true once the clock passes d", d: time.Minute, want: true},
		{desc: "true at once for a zero d", d: 0, want: true},
		{desc: "false when ctx ends first", d: time.Minute, cancel: true, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			clk := clock.NewFake(t0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan bool, 1)
			go func() { done <- clock.SleepOn(ctx, clk, tt.d) }()
			if tt.d > 0 {
				bctx, bcancel := context.WithTimeout(context.Background(), guard)
				defer bcancel()
				if err := clk.BlockUntil(bctx, 1); err != nil {
					t.Fatalf("the sleeper never armed its timer: %v", err)
				}
				if tt.cancel {
					cancel()
				} else {
					clk.Advance(tt.d)
				}
			}
			select {
			case got := <-done:
				if got != tt.want {
					t.Errorf("SleepOn = %t, want %t", got, tt.want)
				}
			case <-time.After(guard):
				t.Fatal("SleepOn did not return")
			}
			if got := clk.Waiters(); got != 0 {
				t.Errorf("Waiters() after SleepOn returned = %d, want 0: it left its timer armed", got)
			}
		})
	}
}

func TestSleep(t *testing.T) {
	if !clock.Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep of 1 ms = false, want true: its context did not end")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan bool, 1)
	go func() { done <- clock.Sleep(ctx, time.Hour) }()
	select {
	case passed := <-done:
		if passed {
			t.Error("Sleep with an ended context = true, want false")
		}
	case <-time.After(guard):
		t.Fatal("Sleep of an hour did not return when its context had ended")
	}
}

// TestReal is the one test on the wall clock: it checks only that Real
// hands its work to package time.
func TestReal(t *testing.T) {
	var c clock.Real
	tm := c.NewTimer(time.Millisecond)
	ran := make(chan struct{})
	af := c.AfterFunc(time.Millisecond, func() { close(ran) })
	tk := c.NewTicker(time.Millisecond)
	defer tk.Stop()
	for desc, ch := range map[string]<-chan time.Time{"timer": tm.C(), "ticker": tk.C()} {
		select {
		case <-ch:
		case <-time.After(guard):
			t.Errorf("the real %s did not fire", desc)
		}
	}
	select {
	case <-ran:
	case <-time.After(guard):
		t.Error("the real AfterFunc did not run f")
	}
	if af.C() != nil {
		t.Error("a real AfterFunc timer's C() is not nil")
	}
	if tm.Stop() {
		t.Error("Stop() of a real timer that fired and was read = true, want false")
	}
}
