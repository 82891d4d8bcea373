package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/testkit"
)

// fakeComponent is a Component of function fields; nil ones succeed.
type fakeComponent struct {
	start    func(context.Context) error
	shutdown func(context.Context) error
}

var _ Component = (*fakeComponent)(nil)

func (f *fakeComponent) Start(ctx context.Context) error {
	if f.start == nil {
		return nil
	}
	return f.start(ctx)
}

func (f *fakeComponent) Shutdown(ctx context.Context) error {
	if f.shutdown == nil {
		return nil
	}
	return f.shutdown(ctx)
}

var errFake = errors.New("fake failure")

func TestComponentsStartInOrderAndStopInReverse(t *testing.T) {
	tests := []struct {
		desc string
		// failStart and failStop name the component whose Start or
		// Shutdown fails.
		failStart, failStop string
		// stop shuts the list down after it started.
		stop bool
		want []string
		// wantErr are what the error says, each naming a component.
		wantErr []string
	}{
		{
			desc: "start in list order, stop in reverse",
			stop: true,
			want: []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"},
		},
		{
			desc:      "a failing start stops those started, in reverse",
			failStart: "c",
			want:      []string{"start a", "start b", "start c", "stop b", "stop a"},
			wantErr:   []string{"starting c"},
		},
		{
			desc:      "the first failing start stops nothing",
			failStart: "a",
			want:      []string{"start a"},
			wantErr:   []string{"starting a"},
		},
		{
			desc:     "a failing stop stops the ones started before it too",
			failStop: "b",
			stop:     true,
			want:     []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"},
			wantErr:  []string{"stopping b"},
		},
		{
			desc:      "a failing start and a failing stop are both reported",
			failStart: "c",
			failStop:  "a",
			want:      []string{"start a", "start b", "start c", "stop b", "stop a"},
			wantErr:   []string{"starting c", "stopping a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var got []string
			var cs components
			for _, name := range []string{"a", "b", "c"} {
				cs = append(cs, namedComponent{name: name, c: &fakeComponent{
					start: func(context.Context) error {
						got = append(got, "start "+name)
						if name == tt.failStart {
							return errFake
						}
						return nil
					},
					shutdown: func(context.Context) error {
						got = append(got, "stop "+name)
						if name == tt.failStop {
							return errFake
						}
						return nil
					},
				}})
			}
			logs := &testkit.LogBuffer{}
			log := logs.Logger()
			ctx := context.Background()
			err := cs.start(ctx, log)
			if err == nil && tt.stop {
				err = cs.shutdown(ctx, log)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Errorf("err = %v, want nil", err)
				}
			} else if !errors.Is(err, errFake) {
				t.Errorf("err = %v, want the component's", err)
			}
			for _, want := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want it to say %q", err, want)
				}
			}
			for _, call := range got {
				if name, ok := strings.CutPrefix(call, "stop "); ok && !strings.Contains(logs.String(), "part="+name+" took_ms=") {
					t.Errorf("no stop logged for %s with took_ms:\n%s", name, logs)
				}
			}
		})
	}
}

func TestBoundedComponentBoundsItsShutdown(t *testing.T) {
	tests := []struct {
		desc string
		// caller bounds the ctx the list is shut down with; 0 is none.
		caller time.Duration
		// own is the component's budget; 0 is an unbounded component.
		own time.Duration
		// want is what is left of the ctx its Shutdown gets; 0 is no
		// deadline.
		want time.Duration
	}{
		{desc: "its own budget when the caller sets none", own: time.Hour, want: time.Hour},
		{desc: "its own budget when it is the sooner", caller: 2 * time.Hour, own: time.Hour, want: time.Hour},
		{desc: "the caller's deadline when it is the sooner", caller: time.Minute, own: time.Hour, want: time.Minute},
		{desc: "an unbounded one gets the caller's ctx", caller: time.Minute, want: time.Minute},
		{desc: "an unbounded one under no deadline has none"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var left time.Duration
			var c Component = &fakeComponent{shutdown: func(ctx context.Context) error {
				if d, ok := ctx.Deadline(); ok {
					left = time.Until(d)
				}
				return nil
			}}
			if tt.own > 0 {
				c = bounded(c, tt.own)
			}
			// A neighbour stopped after it sees the caller's ctx: the
			// budget is the bounded one's alone.
			var neighbour bool
			next := &fakeComponent{shutdown: func(ctx context.Context) error {
				_, neighbour = ctx.Deadline()
				return nil
			}}
			cs := components{{name: "next", c: next}, {name: "it", c: c}}
			ctx := context.Background()
			if tt.caller > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.caller)
				defer cancel()
			}
			if err := cs.shutdown(ctx, (&testkit.LogBuffer{}).Logger()); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			// What is left is a little under the budget: time passed
			// since the deadline was set.
			if left > tt.want || left < tt.want-10*time.Second {
				t.Errorf("Shutdown's ctx has %v left, want %v", left, tt.want)
			}
			if neighbour != (tt.caller > 0) {
				t.Errorf("the neighbour has a deadline: %v, want %v", neighbour, tt.caller > 0)
			}
		})
	}
}

// The gateway's loops stop so that each one's dependencies outlive it:
// the cron scheduler and the turns before the delivery worker that sends
// their reports and replies and the tailer whose signals they hear.
func TestGatewayStopsItsPartsInReverseOrder(t *testing.T) {
	model := testkit.NewModelServer(t)
	h := startGateway(t, testConfig(t, model), Options{})
	h.stop()
	var stopped []string
	for line := range strings.Lines(h.logs.String()) {
		var rec struct {
			Msg    string `json:"msg"`
			Part   string `json:"part"`
			TookMS *int64 `json:"took_ms"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "part stopped" && rec.TookMS != nil {
			stopped = append(stopped, rec.Part)
		}
	}
	want := []string{"kanban", "kanban-notify", "cron", "controllers", "completions", "delegation", "turns", "presence", "signals", "delivery", "gauges", "instances"}
	if diff := cmp.Diff(want, stopped); diff != "" {
		t.Errorf("stopped (-want +got):\n%s", diff)
	}
}
