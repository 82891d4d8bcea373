package redis

import (
	"context"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// Calls from many goroutines at once (the router's appends, the turns'
// commits and running-turn marks, the delivery worker's acks) go to Redis
// together: a few
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
//
// go-redis has an automatic pipeliner of its own (AutoPipeline), marked
// experimental. It is not used: a call queued there no longer heeds its
// context, and AutoPipeline gives one instance per client, shared by all
// its users, whose Close stops it for all of them, while a caller may
// hand Open a client (Options.Client) it uses elsewhere too.

// batchSenders is how many pipelines are in flight at once: enough that
// herald's side builds the next while Redis runs one.
const batchSenders = 4

// maxBatch bounds the calls of one pipeline.
const maxBatch = 256

// queuedCall is one command waiting for its reply, which the sender
// writes into cmd.
type queuedCall struct {
	cmd  goredis.Cmder
	done chan struct{}
}

// batcher is the senders and the queue they take calls from.
type batcher struct {
	client goredis.UniversalClient
	calls  chan *queuedCall

	mu     sync.RWMutex // held shared while a call is queued, alone by close
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

func newBatcher(client goredis.UniversalClient) *batcher {
	b := &batcher{client: client, calls: make(chan *queuedCall, maxBatch*batchSenders), stop: make(chan struct{})}
	b.wg.Add(batchSenders)
	for range batchSenders {
		go b.send()
	}
	return b
}

// fcall calls a function of the library and returns its array reply.
func (b *batcher) fcall(ctx context.Context, fn string, keys []string, args ...any) ([]any, error) {
	all := make([]any, 0, 3+len(keys)+len(args))
	all = append(all, "fcall", fn, len(keys))
	for _, k := range keys {
		all = append(all, k)
	}
	cmd := goredis.NewSliceCmd(ctx, append(all, args...)...)
	return await(ctx, b, cmd, cmd.Result)
}

// await sends cmd through b and returns its reply as result reads it.
func await[T any](ctx context.Context, b *batcher, cmd goredis.Cmder, result func() (T, error)) (T, error) {
	if err := b.do(ctx, cmd); err != nil {
		var zero T
		return zero, err
	}
	return result()
}

// do queues cmd and waits for its reply or for ctx to end; it returns
// only the errors of the wait, and cmd holds the reply. A command given
// up on may still run, and its reply must not be read then: as with a
// reply lost on the wire, the caller cannot tell.
func (b *batcher) do(ctx context.Context, cmd goredis.Cmder) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &queuedCall{cmd: cmd, done: make(chan struct{})}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return goredis.ErrClosed
	}
	select {
	case b.calls <- c:
	case <-ctx.Done():
		b.mu.RUnlock()
		return ctx.Err()
	}
	b.mu.RUnlock()
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send is one sender: it takes a call, and every other one waiting, and
// sends them. Once closed, it answers what is still queued with ErrClosed.
func (b *batcher) send() {
	defer b.wg.Done()
	batch := make([]*queuedCall, 0, maxBatch)
	for {
		select {
		case c := <-b.calls:
			batch = append(batch[:0], c)
		case <-b.stop:
			for {
				select {
				case c := <-b.calls:
					c.cmd.SetErr(goredis.ErrClosed)
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
func (b *batcher) run(batch []*queuedCall) {
	ctx := context.Background()
	if len(batch) == 1 {
		_ = b.client.Process(ctx, batch[0].cmd) // the error is the command's own
		close(batch[0].done)
		return
	}
	pipe := b.client.Pipeline()
	for _, c := range batch {
		_ = pipe.Process(ctx, c.cmd) // queued, not sent yet
	}
	// Each command carries its own error; Exec's is the first of them.
	_, _ = pipe.Exec(ctx)
	for _, c := range batch {
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
