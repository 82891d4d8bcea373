package media

import (
	"context"
	"log/slog"
	"time"

	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/tools"
)

// localAPI is the local API's platform (adapters/api.Platform, which
// imports this package). It serves the files sent to its conversations
// from the store, so their bytes stay there once their message went.
const localAPI = "api"

// settleTimeout bounds the deletes of an accepted message's files.
const settleTimeout = 10 * time.Second

// outbound sends files: the send_file tool, and the pictures a reply
// shows from the workspace.
type outbound struct {
	files Store
	home  string
	// workspace is tools.workspace; a turn's own (a sub-agent's
	// worktree) takes its place.
	workspace string
	maxBytes  int64
	targets   cronjobs.Targets
	// homes are the platforms' home channels, which send_file reaches
	// without send_message.allowed_targets.
	homes   map[outbox.Target]bool
	allowed tools.Targets
	redact  func(string) string
	log     *slog.Logger
}

// Outbound is files sent out as a gateway runs them: it registers
// send_file among the core tools, decorates what the turns run so that
// the pictures a reply shows from the workspace go with it, and forgets
// a message's file bytes once its platform accepted it (except on the
// local API, which serves them from the store). The delivery worker
// reads the bytes into each file before the adapter's Send.
func Outbound(as Assembly) (*capability.Capability, error) {
	a := as.Assembly()
	allowed, err := tools.ParseTargets(a.Config.SendMessage.AllowedTargets)
	if err != nil {
		return nil, err
	}
	o := &outbound{
		files:     as.Files(),
		home:      a.Config.Home,
		workspace: a.Config.Tools.Workspace,
		maxBytes:  min(a.Config.Attachments.MaxBytes, MaxFileBytes),
		targets:   cronjobs.TargetsFor(a.Config, a.Platforms()),
		homes:     map[outbox.Target]bool{},
		allowed:   allowed,
		redact:    a.Redact,
		log:       a.Logger.With("part", "files out"),
	}
	if o.maxBytes <= 0 {
		o.maxBytes = MaxFileBytes
	}
	for _, p := range o.targets.Platforms {
		if home, err := o.targets.Resolve(p, nil); err == nil && len(home) == 1 {
			o.homes[home[0]] = true
		}
	}
	if err := a.Registry.Register(tools.Core, o.sendFile()); err != nil {
		return nil, err
	}
	return &capability.Capability{
		Runner:  &pictures{next: a.Runner, o: o},
		Settled: o.settled,
	}, nil
}

// roots are the directories a turn of conv, working in workspace (empty:
// the configured one), may send files from.
func (o *outbound) roots(conv, workspace string) roots {
	if workspace == "" {
		workspace = o.workspace
	}
	rs := roots{workspace: workspace}
	if o.home != "" && conv != "" {
		rs.kept = ConvDir(o.home, conv)
	}
	return rs
}

// settled forgets the bytes of an accepted message's files. A message
// dead-lettered keeps them: an operator may send it again (herald outbox
// retry). The local API's keep them too, as it serves them.
func (o *outbound) settled(m outbox.Message, accepted bool, _ string) {
	if !accepted || len(m.Files) == 0 || m.Target.Platform == localAPI {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	for _, f := range m.Files {
		if err := o.files.DeleteFile(ctx, f.Blob); err != nil {
			o.log.Warn("forgetting a sent file's bytes failed; they stay in the store",
				"conv", m.Conv, "outbox_id", m.ID, "file", f.Name, "blob", f.Blob, "err", err)
		}
	}
}
