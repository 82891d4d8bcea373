package config

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// The values of approvals.* and delegation.subagent_approvals, and
// approvals.timeout's default. Package approvals names them too
// (approvals.ModeManual, …): it makes its capability from a Config, so
// the config cannot import it.
const (
	ApprovalsManual          = "manual"
	ApprovalsOff             = "off"
	ApprovalsUnattendedDeny  = "deny"
	ApprovalsUnattendedAllow = "allow"
	SubagentApprovalsDeny    = "deny"
	SubagentApprovalsAsk     = "ask"
	DefaultApprovalTimeout   = 300 * time.Second
)

// Approvals is approvals.*: what a dangerous action does when it would
// run (docs/approvals.md).
type Approvals struct {
	// Mode is ApprovalsManual (ask the person) or ApprovalsOff
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
	// kanban worker, a sub-agent): ApprovalsUnattendedDeny or
	// ApprovalsUnattendedAllow.
	Unattended string `yaml:"unattended"`
	// Admins are users (platform:id, as /whoami shows) who may answer
	// any approval of a group, beside the person whose message started
	// the turn.
	Admins []string `yaml:"admins"`
}

func (a Approvals) check(v *validator) {
	switch a.Mode {
	case ApprovalsManual, ApprovalsOff:
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
	case ApprovalsUnattendedDeny, ApprovalsUnattendedAllow:
	default:
		v.add("approvals.unattended", "unknown rule %s (deny or allow)", quote(a.Unattended))
	}
}
