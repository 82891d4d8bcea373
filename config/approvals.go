package config

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/heraldgw/herald/approvals"
)

// Approvals is approvals.*: what a dangerous action does when it would
// run (docs/approvals.md).
type Approvals struct {
	// Mode is approvals.ModeManual (ask the person) or approvals.ModeOff
	// (run without asking).
	Mode string `yaml:"mode"`
	// Timeout is how long a turn waits for an answer; none is a deny.
	Timeout time.Duration `yaml:"timeout"`
	// Deny are regular expressions (RE2) of commands never run, approved
	// or not.
	Deny []string `yaml:"deny"`
	// Tools are tools (globs: mcp_github_*) that ask before each call,
	// MCP tools included.
	Tools []string `yaml:"tools"`
	// Unattended is what happens with nobody to ask (a cron fire, a
	// kanban worker, a sub-agent): approvals.UnattendedDeny or
	// UnattendedAllow.
	Unattended string `yaml:"unattended"`
	// Admins are users (platform:id, as /whoami shows) who may answer
	// any approval of a group, beside the person whose message started
	// the turn.
	Admins []string `yaml:"admins"`
}

func (a Approvals) check(v *validator) {
	switch a.Mode {
	case approvals.ModeManual, approvals.ModeOff:
	default:
		v.add("approvals.mode", "unknown mode %s (manual or off)", quote(a.Mode))
	}
	v.positiveDuration("approvals.timeout", a.Timeout)
	for i, p := range a.Deny {
		key := fmt.Sprintf("approvals.deny[%d]", i)
		if strings.TrimSpace(p) == "" {
			v.add(key, "must not be empty (it would deny every command)")
		} else if _, err := regexp.Compile(p); err != nil {
			v.add(key, "%s is not a regular expression: %s", quote(p), strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
	}
	v.globs("approvals.tools", a.Tools)
	switch a.Unattended {
	case approvals.UnattendedDeny, approvals.UnattendedAllow:
	default:
		v.add("approvals.unattended", "unknown rule %s (deny or allow)", quote(a.Unattended))
	}
}
