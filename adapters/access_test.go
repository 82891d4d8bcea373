package adapters_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/heraldgw/herald/adapters"
)

func TestAccess(t *testing.T) {
	tests := []struct {
		desc     string
		allowed  []string
		all      bool
		id, name string
		want     bool
	}{
		{desc: "nobody without a list", id: "42", want: false},
		{desc: "everybody with allow-all", all: true, id: "42", want: true},
		{desc: "listed id", allowed: []string{"7", "42"}, id: "42", want: true},
		{desc: "unlisted id", allowed: []string{"7"}, id: "42", want: false},
		{desc: "list wins over allow-all", allowed: []string{"7"}, all: true, id: "42", want: false},
		{desc: "name any case", allowed: []string{"@Alice"}, id: "42", name: "alice", want: true},
		{desc: "name with @", allowed: []string{"@alice"}, id: "42", name: "@ALICE", want: true},
		{desc: "name is not an id", allowed: []string{"alice"}, id: "42", name: "alice", want: false},
		{desc: "empty sender", allowed: []string{"@alice"}, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			a := adapters.NewAccess("telegram", tc.allowed, tc.all)
			if got := a.Allows(tc.id, tc.name); got != tc.want {
				t.Errorf("Allows(%q, %q) = %v, want %v", tc.id, tc.name, got, tc.want)
			}
		})
	}
}

func TestAccessLogStartSaysWhyNobody(t *testing.T) {
	var buf bytes.Buffer
	adapters.NewAccess("slack", nil, false).LogStart(slog.New(slog.NewTextHandler(&buf, nil)))
	if !strings.Contains(buf.String(), "serving nobody") || !strings.Contains(buf.String(), "platforms.slack.allowed_users or HERALD_ALLOW_ALL_USERS") {
		t.Errorf("start log = %q, want it to say nobody is served and how to change that", buf.String())
	}
}

// The adapters hand Access their logger, which names the platform
// already: every line Access writes names it once.
func TestAccessLogsNameThePlatformOnce(t *testing.T) {
	tests := []struct {
		desc    string
		allowed []string
		all     bool
		refuse  bool // LogRefused rather than LogStart
		want    string
	}{
		{desc: "allow-listed", allowed: []string{"7"}, want: "serving the allow-listed users"},
		{desc: "allow-all", all: true, want: "serving every user"},
		{desc: "nobody", want: "serving nobody"},
		{desc: "refused", allowed: []string{"7"}, refuse: true, want: "user_id=42 user_name=mallory"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil)).With("platform", "discord")
			a := adapters.NewAccess("discord", tc.allowed, tc.all)
			if tc.refuse {
				a.LogRefused(log, "42", "mallory")
			} else {
				a.LogStart(log)
			}
			if out := buf.String(); !strings.Contains(out, tc.want) || strings.Count(out, "platform=") != 1 {
				t.Errorf("log = %q, want %q with the platform named once", out, tc.want)
			}
		})
	}
}

func TestGroupConv(t *testing.T) {
	tests := []struct {
		scope    string
		inThread bool
		want     string
	}{
		{adapters.ScopeAuto, true, "slack:T1:C1:171.5"},
		{adapters.ScopeAuto, false, "slack:T1:C1:171.5:user:U9"},
		{adapters.ScopeShared, false, "slack:T1:C1:171.5"},
		{adapters.ScopePerUser, true, "slack:T1:C1:171.5:user:U9"},
	}
	for _, tc := range tests {
		if got := adapters.GroupConv(tc.scope, "slack:T1:C1:171.5", tc.inThread, "U9"); got != tc.want {
			t.Errorf("GroupConv(%s, thread %v) = %q, want %q", tc.scope, tc.inThread, got, tc.want)
		}
	}
}
