package delegation

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/lease"
)

// StatusMeta is where a status line's id is kept: its conversation's
// metadata (a sessions.Store holds it).
type StatusMeta interface {
	Meta(ctx context.Context, conv string) (map[string]string, error)
	// SetMeta sets one key; an empty value deletes it.
	SetMeta(ctx context.Context, conv, key, value string) error
}

// StatusLinesOptions configure StatusLines.
type StatusLinesOptions struct {
	// Adapters are the platforms served; those that show presence
	// (adapters.Presence) show the lines.
	Adapters []adapters.Adapter
	Meta     StatusMeta
	Once     lease.OnceStore // the once-only claims on the lines' posts
	// Read reads a delegation as the store has it (Store.Delegation).
	Read   func(ctx context.Context, id string) (Delegation, error)
	Owner  string // this instance, the posts' claimer
	Logger *slog.Logger
}

// StatusLines is the Runner's Progress hook that keeps one status line
// per delegation in its parent's chat, on platforms that show presence:
// "Background: 2 of 3 sub-agents done", edited as children end and
// removed when the last one has; nil when no platform shows presence, so
// the runner reads nothing after an end for it.
//
// The line's id is kept in the conversation's metadata, so whichever
// instance ends the next child edits the same line. The line is posted
// once: the instance that posts it first claims the post
// (lease.OnceStore, named by the delegation), so two instances ending a
// batch's first children at once do not both post; an end that finds
// the post claimed and no line yet leaves it to the poster, which reads
// the delegation again once its line's id is stored and shows that.
func StatusLines(o StatusLinesOptions) func(context.Context, Delegation) {
	s := &statusLines{by: map[string]adapters.Presence{}, meta: o.Meta, once: o.Once, read: o.Read, owner: o.Owner, log: o.Logger}
	for _, a := range o.Adapters {
		if pr, ok := a.(adapters.Presence); ok {
			s.by[a.Platform()] = pr
		}
	}
	if len(s.by) == 0 {
		return nil
	}
	return s.show
}

// statusLines are the status lines of StatusLines.
type statusLines struct {
	by    map[string]adapters.Presence // by platform
	meta  StatusMeta
	once  lease.OnceStore
	read  func(ctx context.Context, id string) (Delegation, error)
	owner string // this instance, the post's claimer
	log   *slog.Logger
}

// statusPostTTL is how long a claim on a line's post lasts: an
// instance that died posting leaves the post to the next end after it.
const statusPostTTL = time.Minute

// statusKey is the metadata key of a delegation's status line.
func statusKey(id string) string { return "background_status:" + id }

// statusPost is the once-only claim on the post of d's line.
func statusPost(id string) string { return "background_status:" + id }

// show posts, edits or removes d's line.
func (s *statusLines) show(ctx context.Context, d Delegation) {
	pr, ok := s.by[d.Origin.Platform]
	if !ok || len(d.Children) < 2 {
		// One child's end is its completion: a line would say nothing more.
		return
	}
	meta, err := s.meta.Meta(ctx, d.Conv)
	if err != nil {
		return
	}
	if id := meta[statusKey(d.ID)]; id != "" {
		s.update(ctx, pr, d, id)
		return
	}
	if doneChildren(d) == len(d.Children) {
		// No line, or one being posted, whose poster removes it.
		return
	}
	c, state, err := s.once.ClaimOnce(ctx, statusPost(d.ID), s.owner, statusPostTTL)
	if err != nil || state != lease.OnceClaimed {
		return // another instance posts it, or has
	}
	id, err := pr.Status(ctx, d.Origin, "", progressText(d))
	if err != nil {
		s.log.Debug("showing a background status line failed", "delegation", d.ID, "err", err)
		return // the claim runs out: the next end posts it
	}
	if err := s.meta.SetMeta(ctx, d.Conv, statusKey(d.ID), id); err != nil {
		s.log.Debug("keeping a background status line's id failed", "delegation", d.ID, "err", err)
	}
	if err := s.once.DoneOnce(ctx, c); err != nil {
		s.log.Debug("marking a background status line posted failed", "delegation", d.ID, "err", err)
	}
	// Ends recorded while the line was posted found no line to edit.
	if now, err := s.read(ctx, d.ID); err == nil && doneChildren(now) != doneChildren(d) {
		s.update(ctx, pr, now, id)
	}
}

// update edits d's line id to d's progress, or removes it once every
// child has ended.
func (s *statusLines) update(ctx context.Context, pr adapters.Presence, d Delegation, id string) {
	if doneChildren(d) == len(d.Children) {
		if err := pr.ClearStatus(ctx, d.Origin, id); err != nil {
			s.log.Debug("removing a background status line failed", "delegation", d.ID, "err", err)
		}
		_ = s.meta.SetMeta(ctx, d.Conv, statusKey(d.ID), "")
		return
	}
	next, err := pr.Status(ctx, d.Origin, id, progressText(d))
	if err != nil {
		s.log.Debug("showing a background status line failed", "delegation", d.ID, "err", err)
		return
	}
	if next != id {
		_ = s.meta.SetMeta(ctx, d.Conv, statusKey(d.ID), next)
	}
}

// doneChildren counts d's children that have ended.
func doneChildren(d Delegation) int {
	n := 0
	for _, c := range d.Children {
		if c.Status.Terminal() {
			n++
		}
	}
	return n
}

func progressText(d Delegation) string {
	return fmt.Sprintf("Background: %d of %d sub-agents done", doneChildren(d), len(d.Children))
}
