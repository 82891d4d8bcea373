package controllers_test

import (
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/internal/errs"
)

func TestParseHeartbeat(t *testing.T) {
	least := controllers.DefaultHeartbeatMinInterval
	h, err := controllers.ParseHeartbeat("30m check the inbox", least)
	if err != nil || h.Interval != 30*time.Minute || h.Prompt != "check the inbox" {
		t.Errorf("ParseHeartbeat = %+v, %v", h, err)
	}
	if h, err := controllers.ParseHeartbeat("2h", least); err != nil || h.Prompt != controllers.DefaultHeartbeatPrompt {
		t.Errorf("a heartbeat with no prompt = %+v, %v; want the default prompt", h, err)
	}
	for args, want := range map[string]string{"30s": "below the least, 1m0s", "often": `interval "often"`, "": `interval ""`} {
		if _, err := controllers.ParseHeartbeat(args, least); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseHeartbeat(%q) = %v, want Invalid with %q", args, err, want)
		}
	}
}

func TestHeartbeatDue(t *testing.T) {
	anchor := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	h := controllers.Heartbeat{Interval: 10 * time.Minute, Anchor: anchor}
	for _, tc := range []struct {
		desc string
		now  time.Duration // after the anchor
		want time.Duration // after the anchor
	}{
		{desc: "at the anchor", now: 0, want: 10 * time.Minute},
		{desc: "between ticks", now: 4 * time.Minute, want: 10 * time.Minute},
		{desc: "on a tick: the next one", now: 10 * time.Minute, want: 20 * time.Minute},
		{desc: "three ticks missed: one, the next", now: 37 * time.Minute, want: 40 * time.Minute},
		{desc: "before the anchor", now: -time.Minute, want: 10 * time.Minute},
	} {
		if got := h.Due(anchor.Add(tc.now)); !got.Equal(anchor.Add(tc.want)) {
			t.Errorf("%s: Due = %s, want %s", tc.desc, got, anchor.Add(tc.want))
		}
	}
}
