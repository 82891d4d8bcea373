package approvals

import (
	"context"
	"path"

	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/delegation"
)

// Assembly is what the approvals capability is made with: what every
// capability is, the store of approvals and grants, and the API that
// serves them.
type Assembly interface {
	capability.Assembled
	Approvals() Store
	ServeApprovals(ap *Approver)
}

// Capability makes the Approver from approvals.* and gates with it the
// terminal's commands and the calls of the tools approvals.tools names;
// it registers /approve and /deny and hears the decisions other
// gateways take. It is made before any tool set is, so every set asks.
func Capability(as Assembly) (*capability.Capability, error) {
	base := as.Assembly()
	cfg := base.Config
	ap, err := New(Options{
		Store:               as.Approvals(),
		Outbox:              base.Outbox,
		Signals:             base.Store.Signals(),
		Meta:                base.Store.Sessions().Meta,
		Mode:                cfg.Approvals.Mode,
		Timeout:             cfg.Approvals.Timeout,
		Deny:                cfg.Approvals.Deny,
		Unattended:          cfg.Approvals.Unattended,
		Admins:              cfg.Approvals.Admins,
		SubagentAutoApprove: cfg.Delegation.SubagentAutoApprove,
		SubagentApprovals:   cfg.Delegation.SubagentApprovals,
		Depth:               delegation.DepthOf,
		Parent: func(ctx context.Context) (Parent, bool) {
			p, ok := delegation.ParentOf(ctx)
			return Parent(p), ok
		},
		Redact: base.Redact,
		Clock:  base.Clock,
		Logger: base.Logger.With("part", "approvals"),
	})
	if err != nil {
		return nil, err
	}
	if cfg.Approvals.Mode == ModeOff {
		base.Logger.Warn("approvals are off (approvals.mode: off): dangerous commands and the tools approvals.tools names run without asking; approvals.deny still refuses")
	}
	for _, cmd := range ap.Commands() {
		if err := base.Commands.Register(cmd); err != nil {
			return nil, err
		}
	}
	base.Workspace.SetGate(ap)
	if globs := cfg.Approvals.Tools; len(globs) > 0 {
		base.Registry.GateWith(ap, func(tool string) bool {
			for _, g := range globs {
				if ok, _ := path.Match(g, tool); ok {
					return true
				}
			}
			return false
		})
	}
	as.ServeApprovals(ap)
	return &capability.Capability{Signals: ap, Settled: ap.Settled}, nil
}
