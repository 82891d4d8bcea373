package instances_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/instances"
	"github.com/heraldgw/herald/internal/clock"
)

// beatStore records the beats and leaves it is given.
type beatStore struct {
	mu     sync.Mutex
	beats  chan instances.Instance
	ttls   []time.Duration
	left   []string
	listed []instances.Instance
}

func (s *beatStore) Beat(_ context.Context, in instances.Instance, ttl time.Duration) error {
	s.mu.Lock()
	s.ttls = append(s.ttls, ttl)
	s.mu.Unlock()
	s.beats <- in
	return nil
}

func (s *beatStore) Leave(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.left = append(s.left, id)
	return nil
}

func (s *beatStore) Instances(context.Context) ([]instances.Instance, error) { return s.listed, nil }

var _ instances.Store = (*beatStore)(nil)

// A heartbeat records the process at once, again a gap after its counts
// change and on every tick, with what it counted over the last minute,
// and removes the record when it stops.
func TestHeartbeat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	clk := clock.NewFake(t0)
	st := &beatStore{beats: make(chan instances.Instance, 16)}
	tally := instances.NewTally()
	hb, err := instances.NewHeartbeat(instances.HeartbeatOptions{
		Store: st, Tally: tally, Clock: clk,
		Self: instances.Instance{ID: "gw-1", Host: "h", PID: 7, Version: "v1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) instances.Instance {
		t.Helper()
		select {
		case in := <-st.beats:
			return in
		case <-ctx.Done():
			t.Fatalf("no beat %s", what)
			return instances.Instance{}
		}
	}
	if err := hb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	first := next("at start")
	if first.ID != "gw-1" || first.Host != "h" || first.PID != 7 || first.Version != "v1" || !first.StartedAt.Equal(t0) || first.Minute != (instances.Counts{}) {
		t.Errorf("the first beat = %+v", first)
	}
	// A turn and a failed send: the beat waits out the gap since the last.
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	tally.Turn()
	tally.SendFailed()
	if err := clk.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	select {
	case in := <-st.beats:
		t.Fatalf("a beat before the gap passed: %+v", in)
	default:
	}
	clk.Advance(instances.DefaultGap)
	if got := next("after a change").Minute; got != (instances.Counts{Turns: 1, SendFailed: 1}) || got.Errors() != 1 {
		t.Errorf("after a turn and a failed send: %+v", got)
	}
	// The ticks go on, every 5 s from t0+1s; the counts leave the
	// minute at the first beat a minute after theirs.
	var minutes []int64
	for range 12 {
		clk.Advance(instances.DefaultEvery)
		minutes = append(minutes, next("on a tick").Minute.Turns)
	}
	if minutes[10] != 1 || minutes[11] != 0 {
		t.Errorf("turns in the minute at each tick = %v, want 1 until a minute after the turn, then 0", minutes)
	}
	if err := hb.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.left) != 1 || st.left[0] != "gw-1" {
		t.Errorf("left = %v, want gw-1 once", st.left)
	}
	if st.ttls[0] != 3*instances.DefaultEvery {
		t.Errorf("ttl = %v, want three beats", st.ttls[0])
	}
}
