// Package adaptertest holds the adapters tests share: one made of
// functions (Adapter), one that records its presence calls (Presence),
// and the real chat adapters against the fake platforms, with what each
// chat shows (StreamingChats).
package adaptertest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/outbox"
)

// Adapter is an adapter made of functions; a nil function does the
// obvious nothing: Run waits for its context, Send accepts.
type Adapter struct {
	Name   string
	OnSend func(ctx context.Context, m outbox.Message) adapters.SendResult
	OnRun  func(ctx context.Context, inbox adapters.Inbox) error
}

var _ adapters.Adapter = (*Adapter)(nil)

func (a *Adapter) Platform() string { return a.Name }

func (a *Adapter) Run(ctx context.Context, inbox adapters.Inbox) error {
	if a.OnRun != nil {
		return a.OnRun(ctx, inbox)
	}
	<-ctx.Done()
	return nil
}

func (a *Adapter) Send(ctx context.Context, m outbox.Message) adapters.SendResult {
	if a.OnSend != nil {
		return a.OnSend(ctx, m)
	}
	return adapters.SendResult{Outcome: adapters.Accepted}
}

// PresenceCall is one call a Presence got: typing, post (a new status
// line), edit or clear.
type PresenceCall struct {
	Kind   string
	Target outbox.Target
	ID     string // the status line's
	Text   string
	At     time.Time // the wall clock at the call
}

// Presence is an Adapter that records its presence calls; a nil function
// answers at once without error, and a posted status line gets the id
// "s1", "s2", ….
type Presence struct {
	Adapter
	OnTyping func(ctx context.Context) error
	OnStatus func(ctx context.Context, id, text string) error

	mu    sync.Mutex
	calls []PresenceCall
	posts int
}

var _ adapters.Presence = (*Presence)(nil)

func (p *Presence) record(c PresenceCall) {
	c.At = time.Now()
	p.mu.Lock()
	p.calls = append(p.calls, c)
	p.mu.Unlock()
}

func (p *Presence) Typing(ctx context.Context, t outbox.Target) error {
	p.record(PresenceCall{Kind: "typing", Target: t})
	if p.OnTyping != nil {
		return p.OnTyping(ctx)
	}
	return nil
}

func (p *Presence) Status(ctx context.Context, t outbox.Target, id, text string) (string, error) {
	kind := "edit"
	if id == "" {
		kind = "post"
	}
	p.record(PresenceCall{Kind: kind, Target: t, ID: id, Text: text})
	if p.OnStatus != nil {
		if err := p.OnStatus(ctx, id, text); err != nil {
			return "", err
		}
	}
	if id != "" {
		return id, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts++
	return fmt.Sprintf("s%d", p.posts), nil
}

func (p *Presence) ClearStatus(ctx context.Context, t outbox.Target, id string) error {
	p.record(PresenceCall{Kind: "clear", Target: t, ID: id})
	return nil
}

// Calls returns the calls so far.
func (p *Presence) Calls() []PresenceCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]PresenceCall(nil), p.calls...)
}

// Count counts the calls of kind so far.
func (p *Presence) Count(kind string) int {
	n := 0
	for _, c := range p.Calls() {
		if c.Kind == kind {
			n++
		}
	}
	return n
}
