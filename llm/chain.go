package llm

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/clock"
)

// Provider is one model of a fallback chain.
type Provider struct {
	Name string // how logs and /status name it: model@host
	// Model is the model it asks for (the first provider asks for the
	// request's, when it names one); usage is counted under it.
	Model  string
	Client Client
}

// Chain is a Client that asks its providers in order: the next one only
// when the one before failed in a way another model may mend (FallsBack)
// and nothing of the reply was streamed yet. A request that names a
// Model names the first provider's; the others use their own.
type Chain struct {
	providers []Provider
	clk       clock.Clock
	log       *slog.Logger
	observer  Observer

	mu   sync.Mutex
	last ChainState
}

var _ Client = (*Chain)(nil)

// ChainState is which provider of a chain answered a call.
type ChainState struct {
	Provider string    `json:"provider"`         // its name
	Model    string    `json:"model,omitempty"`  // the model it asked for
	Fallback bool      `json:"fallback"`         // it is not the first
	Reason   string    `json:"reason,omitempty"` // when Fallback: why the first did not answer, one line
	At       time.Time `json:"at"`               // when it answered
}

// NewChain returns a chain of providers, the first the main one; at
// least one is needed. clk (nil: the wall clock) dates ChainState.
func NewChain(clk clock.Clock, log *slog.Logger, providers ...Provider) *Chain {
	if clk == nil {
		clk = clock.Real{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Chain{providers: providers, clk: clk, log: log}
}

// Observe makes o told of each switch to a fallback; call it before
// the chain's first call. It returns c.
func (c *Chain) Observe(o Observer) *Chain {
	c.observer = o
	return c
}

// Last is which provider answered the process's latest call, of any
// conversation; zero before any did. A response says it of its own call
// (Response.Answered).
func (c *Chain) Last() ChainState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// FallsBack reports whether a call that failed with err may be answered
// by another model: its key pool has none to offer, or its server
// refused the model or the request, the account or keys, or did not
// answer. A cancelled call, a missing configuration and a request too
// long (which the caller trims) do not fall back.
func FallsBack(err error) bool {
	switch ClassOf(err) {
	case ClassModelNotFound, ClassBadRequest, ClassAuth, ClassPayment, ClassRateLimited, ClassTimeout, ClassUnavailable:
		return true
	}
	return false
}

func (c *Chain) Complete(ctx context.Context, req Request) (*Response, error) {
	streamed := false
	if deliver := req.Stream; deliver != nil {
		req.Stream = func(d string) { streamed = true; deliver(d) }
	}
	var first error
	for i, p := range c.providers {
		r := req
		if i > 0 {
			r.Model = ""
		}
		resp, err := p.Client.Complete(ctx, r)
		if err == nil {
			resp.Answered = c.answered(i, cmp.Or(r.Model, p.Model), first)
			return resp, nil
		}
		if i == 0 {
			first = err
		}
		if streamed || i == len(c.providers)-1 || !FallsBack(err) {
			return nil, err
		}
		c.log.Warn("model failed; falling back", "from", p.Name, "to", c.providers[i+1].Name, "class", ClassOf(err), "err", err)
		if c.observer != nil {
			c.observer.FellBack(p.Name, c.providers[i+1].Name, ClassOf(err))
		}
	}
	return nil, fail(&Error{Class: ClassNotConfigured}) // a chain of no providers
}

func (c *Chain) answered(i int, model string, first error) ChainState {
	st := ChainState{Provider: c.providers[i].Name, Model: model, Fallback: i > 0, At: c.clk.Now()}
	if first != nil {
		st.Reason = UserMessage(first)
	}
	c.mu.Lock()
	c.last = st
	c.mu.Unlock()
	return st
}
