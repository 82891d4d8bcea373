package gateway

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/sessions"
)

// backgroundStatus keeps one status line per delegation in its parent's
// chat, on platforms that show presence: "Background: 2 of 3 sub-agents
// done", edited as children end and removed when the last one has. The
// line's id is kept in the conversation's metadata, so whichever
// instance ends the next child edits the same line.
type backgroundStatus struct {
	by   map[string]adapters.Presence // by platform
	meta sessions.Store
	log  *slog.Logger
}

func newBackgroundStatus(as []adapters.Adapter, meta sessions.Store, log *slog.Logger) *backgroundStatus {
	b := &backgroundStatus{by: map[string]adapters.Presence{}, meta: meta, log: log}
	for _, a := range as {
		if pr, ok := a.(adapters.Presence); ok {
			b.by[a.Platform()] = pr
		}
	}
	return b
}

// hook is show, or nil when no platform shows presence: the runner then
// reads nothing after an end for it.
func (b *backgroundStatus) hook() func(context.Context, delegation.Delegation) {
	if len(b.by) == 0 {
		return nil
	}
	return b.show
}

// statusKey is the metadata key of a delegation's status line.
func statusKey(id string) string { return "background_status:" + id }

// show posts, edits or removes d's line.
func (b *backgroundStatus) show(ctx context.Context, d delegation.Delegation) {
	pr, ok := b.by[d.Origin.Platform]
	if !ok || len(d.Children) < 2 {
		// One child's end is its completion: a line would say nothing more.
		return
	}
	meta, err := b.meta.Meta(ctx, d.Conv)
	if err != nil {
		return
	}
	id := meta[statusKey(d.ID)]
	done := 0
	for _, c := range d.Children {
		if c.Status.Terminal() {
			done++
		}
	}
	if done == len(d.Children) {
		if id != "" {
			if err := pr.ClearStatus(ctx, d.Origin, id); err != nil {
				b.log.Debug("removing a background status line failed", "delegation", d.ID, "err", err)
			}
			_ = b.meta.SetMeta(ctx, d.Conv, statusKey(d.ID), "")
		}
		return
	}
	text := fmt.Sprintf("Background: %d of %d sub-agents done", done, len(d.Children))
	next, err := pr.Status(ctx, d.Origin, id, text)
	if err != nil {
		b.log.Debug("showing a background status line failed", "delegation", d.ID, "err", err)
		return
	}
	if next != id {
		_ = b.meta.SetMeta(ctx, d.Conv, statusKey(d.ID), next)
	}
}
