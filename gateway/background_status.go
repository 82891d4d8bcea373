package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/sessions"
)

// backgroundStatus keeps one status line per delegation in its parent's
// chat, on platforms that show presence: "Background: 2 of 3 sub-agents
// done", edited as children end and removed when the last one has. The
// line's id is kept in the conversation's metadata, so whichever
// instance ends the next child edits the same line. The line is posted
// once: the instance that posts it first claims the post
// (lease.OnceStore, named by the delegation), so two instances ending
// a batch's first children at once do not both post; an end that finds
// the post claimed and no line yet leaves it to the poster, which reads
// the delegation again once its line's id is stored and shows that.
type backgroundStatus struct {
	by    map[string]adapters.Presence // by platform
	meta  sessions.Store
	once  lease.OnceStore
	read  func(ctx context.Context, id string) (delegation.Delegation, error)
	owner string // this instance, the post's claimer
	log   *slog.Logger
}

// statusPostTTL is how long a claim on a line's post lasts: an
// instance that died posting leaves the post to the next end after it.
const statusPostTTL = time.Minute

func newBackgroundStatus(as []adapters.Adapter, meta sessions.Store, once lease.OnceStore,
	read func(context.Context, string) (delegation.Delegation, error), owner string, log *slog.Logger) *backgroundStatus {
	b := &backgroundStatus{by: map[string]adapters.Presence{}, meta: meta, once: once, read: read, owner: owner, log: log}
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

// statusPost is the once-only claim on the post of d's line.
func statusPost(id string) string { return "background_status:" + id }

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
	if id := meta[statusKey(d.ID)]; id != "" {
		b.update(ctx, pr, d, id)
		return
	}
	if doneChildren(d) == len(d.Children) {
		// No line, or one being posted, whose poster removes it.
		return
	}
	c, state, err := b.once.ClaimOnce(ctx, statusPost(d.ID), b.owner, statusPostTTL)
	if err != nil || state != lease.OnceClaimed {
		return // another instance posts it, or has
	}
	id, err := pr.Status(ctx, d.Origin, "", progressText(d))
	if err != nil {
		b.log.Debug("showing a background status line failed", "delegation", d.ID, "err", err)
		return // the claim runs out: the next end posts it
	}
	if err := b.meta.SetMeta(ctx, d.Conv, statusKey(d.ID), id); err != nil {
		b.log.Debug("keeping a background status line's id failed", "delegation", d.ID, "err", err)
	}
	if err := b.once.DoneOnce(ctx, c); err != nil {
		b.log.Debug("marking a background status line posted failed", "delegation", d.ID, "err", err)
	}
	// Ends recorded while the line was posted found no line to edit.
	if now, err := b.read(ctx, d.ID); err == nil && doneChildren(now) != doneChildren(d) {
		b.update(ctx, pr, now, id)
	}
}

// update edits d's line id to d's progress, or removes it once every
// child has ended.
func (b *backgroundStatus) update(ctx context.Context, pr adapters.Presence, d delegation.Delegation, id string) {
	if doneChildren(d) == len(d.Children) {
		if err := pr.ClearStatus(ctx, d.Origin, id); err != nil {
			b.log.Debug("removing a background status line failed", "delegation", d.ID, "err", err)
		}
		_ = b.meta.SetMeta(ctx, d.Conv, statusKey(d.ID), "")
		return
	}
	next, err := pr.Status(ctx, d.Origin, id, progressText(d))
	if err != nil {
		b.log.Debug("showing a background status line failed", "delegation", d.ID, "err", err)
		return
	}
	if next != id {
		_ = b.meta.SetMeta(ctx, d.Conv, statusKey(d.ID), next)
	}
}

// doneChildren counts d's children that have ended.
func doneChildren(d delegation.Delegation) int {
	n := 0
	for _, c := range d.Children {
		if c.Status.Terminal() {
			n++
		}
	}
	return n
}

func progressText(d delegation.Delegation) string {
	return fmt.Sprintf("Background: %d of %d sub-agents done", doneChildren(d), len(d.Children))
}
