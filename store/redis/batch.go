package redis

import (
	"context"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// Script calls from many goroutines at once (the router's appends, the
// turns' commits, the delivery worker's acks) go to Redis together: a few
// senders each take every call waiting and send them as one pipeline, one
// write and one read for the lot, rather than each call taking a
// connection of its own for a round trip. A call that finds a sender idle
// goes out at once, alone, so nothing waits for company; under load the
// calls that arrive during one round trip make the next pipeline. Redis
// runs a pipeline's calls one after another, each on its own, as it would
// run them from separate connections, and the replies come back in order.
// The saving is the system calls and connection bookkeeping of each round
// trip, on both sides, and with them most of what a short script costs
// beyond its own work.

// batchSenders is how many pipelines are in flight at once: enough that
// herald's side builds the next while Redis runs one.
const batchSenders = 4

// maxBatch bounds the calls of one pipeline.
const maxBatch = 256

// scriptCall is one FCALL waiting for its reply.
type scriptCall struct {
	fn   string
	keys []string
	args []any
	val  []any
	err  error
	done chan struct{}
}

// batcher is the senders and the queue they take calls from.
type batcher struct {
	client goredis.UniversalClient
	calls  chan *scriptCall

	mu     sync.RWMutex // held shared while a call is queued, alone by close
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

func newBatcher(client goredis.UniversalClient) *batcher {
	b := &batcher{client: client, calls: make(chan *scriptCall, maxBatch*batchSenders), stop: make(chan struct{})}
	b.wg.Add(batchSenders)
	for range batchSenders {
		go b.send()
	}
	return b
}

// fcall queues one call and waits for its reply or for ctx to end. A call
// given up on may still run: as with a reply lost on the wire, the caller
// cannot tell.
func (b *batcher) fcall(ctx context.Context, fn string, keys []string, args ...any) ([]any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &scriptCall{fn: fn, keys: keys, args: args, done: make(chan struct{})}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return nil, goredis.ErrClosed
	}
	select {
	case b.calls <- c:
	case <-ctx.Done():
		b.mu.RUnlock()
		return nil, ctx.Err()
	}
	b.mu.RUnlock()
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// send is one sender: it takes a call, and every other one waiting, and
// sends them. Once closed, it answers what is still queued with ErrClosed.
func (b *batcher) send() {
	defer b.wg.Done()
	batch := make([]*scriptCall, 0, maxBatch)
	for {
		select {
		case c := <-b.calls:
			batch = append(batch[:0], c)
		case <-b.stop:
			for {
				select {
				case c := <-b.calls:
					c.err = goredis.ErrClosed
					close(c.done)
				default:
					return
				}
			}
		}
	more:
		for len(batch) < maxBatch {
			select {
			case c := <-b.calls:
				batch = append(batch, c)
			default:
				break more
			}
		}
		b.run(batch)
		clear(batch)
	}
}

// run sends batch and hands each call its reply. The pipeline runs
// without a caller's context: a caller that stops waiting does not take
// the others' replies with it. The client's read and write timeouts bound
// it.
func (b *batcher) run(batch []*scriptCall) {
	ctx := context.Background()
	if len(batch) == 1 {
		c := batch[0]
		c.val, c.err = b.client.FCall(ctx, c.fn, c.keys, c.args...).Slice()
		close(c.done)
		return
	}
	pipe := b.client.Pipeline()
	cmds := make([]*goredis.Cmd, len(batch))
	for i, c := range batch {
		cmds[i] = pipe.FCall(ctx, c.fn, c.keys, c.args...)
	}
	// Each command carries its own error; Exec's is the first of them.
	_, _ = pipe.Exec(ctx)
	for i, c := range batch {
		c.val, c.err = cmds[i].Slice()
		close(c.done)
	}
}

// close stops the senders once the calls queued are answered or refused.
func (b *batcher) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stop)
	b.wg.Wait()
}
