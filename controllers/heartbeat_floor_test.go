package controllers

import (
	"testing"
	"time"
)

// A heartbeat's least interval is never below its floor, however the
// Heartbeats were made: unset it is the floor, above it it holds.
func TestHeartbeatMinIntervalHasItsFloor(t *testing.T) {
	for _, tc := range []struct {
		set, want time.Duration
	}{
		{0, DefaultHeartbeatMinInterval},
		{time.Second, DefaultHeartbeatMinInterval},
		{59 * time.Second, DefaultHeartbeatMinInterval},
		{5 * time.Minute, 5 * time.Minute},
	} {
		hs := &Heartbeats{MinInterval: tc.set}
		if got := hs.minInterval(); got != tc.want {
			t.Errorf("MinInterval %s: the least interval is %s, want %s", tc.set, got, tc.want)
		}
		if _, err := ParseHeartbeat("30s", hs.minInterval()); err == nil {
			t.Errorf("MinInterval %s: a 30s heartbeat is taken", tc.set)
		}
	}
}
