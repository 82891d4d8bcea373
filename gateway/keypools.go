package gateway

import (
	"context"
	"log/slog"
	"sync"

	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/signals"
)

// signalKeysMarked tells every gateway on the store that a key of the
// pool its Text names was marked (cooling, dead) or revived: their
// pools of that name read the store at their next request instead of
// going on with the view they hold (llm.Pool.Forget).
const signalKeysMarked signals.Kind = "model.keys_marked"

// signalKeysConv is the conversation the signal is filed under: a mark
// is the pool's, no conversation's.
const signalKeysConv = "herald:model"

// keyPools are the key pools this gateway made: told of other gateways'
// marks, and flushed of their counted uses as it stops.
type keyPools struct {
	signals signals.Store
	log     *slog.Logger

	mu  sync.Mutex
	all []*llm.Pool
}

// add keeps p and returns it.
func (k *keyPools) add(p *llm.Pool) *llm.Pool {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.all = append(k.all, p)
	return p
}

// marked tells the other gateways that pool's keys changed in the store
// (llm.PoolOptions.Marked).
func (k *keyPools) marked(ctx context.Context, pool string) {
	if k.signals == nil {
		return
	}
	err := k.signals.Signal(ctx, signals.Signal{Conv: signalKeysConv, Kind: signalKeysMarked, Text: pool})
	if err != nil && ctx.Err() == nil {
		k.log.Warn("telling the other gateways of a key's mark failed; they see it within a minute", "pool", pool, "err", err)
	}
}

// HandleSignal makes the pools a mark names read the store again.
func (k *keyPools) HandleSignal(s signals.Signal) {
	if s.Kind != signalKeysMarked {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.all {
		if p.Name() == s.Text {
			p.Forget()
		}
	}
	k.log.Debug("a key of the pool was marked or revived; its next request reads the store", "pool", s.Text)
}

// flush writes the uses the pools counted and did not write yet.
func (k *keyPools) flush(ctx context.Context) {
	k.mu.Lock()
	all := append([]*llm.Pool(nil), k.all...)
	k.mu.Unlock()
	for _, p := range all {
		p.Flush(ctx)
	}
}
