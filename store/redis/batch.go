package redis

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Calls from many goroutines at once (the router's appends, the turns'
// commits, the delivery worker's acks) go to Redis
// together: a few
// senders each take every call waiting and send them as one pipeline, one
// write and one read for the lot, rather than each call taking a
// connection of its own for a round trip. A call that finds a sender idle
// goes out at once, alone, so nothing waits for company; on one server
// without WAIT, a call that finds nothing in flight (no call queued, no
// pipeline out, no other call going alone) goes on its caller's
// goroutine, making no hand-off to a sender and back. Under load the
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
	client  goredis.UniversalClient
	cluster *goredis.ClusterClient // client, when it is a cluster's
	calls   chan *queuedCall

	waitN       int           // replicas each pipeline's writes must reach (WAIT), 0 for none
	waitTimeout time.Duration // how long a pipeline waits for them
	waiting     chan struct{} // a slot per pipeline waiting for replicas
	shortMu     sync.Mutex
	short       map[string]time.Time // node → until when it counts as short of replicas

	// busy counts the pipelines out and the calls going alone: a call
	// goes alone only when it finds none, and the queue empty, and only
	// when alone is set: on one server without WAIT. On a cluster (whose
	// client retries a call through a failover) or with WAIT (which may
	// wait its timeout), a call stays with the senders, so that its
	// caller can stop waiting when its context ends.
	busy  atomic.Int32
	alone bool

	mu     sync.RWMutex // held shared while a call is queued or goes alone, alone by close
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

func newBatcher(client goredis.UniversalClient, waitN int, waitTimeout time.Duration) *batcher {
	b := &batcher{client: client, calls: make(chan *queuedCall, maxBatch*batchSenders), stop: make(chan struct{}),
		waitN: waitN, waitTimeout: waitTimeout, waiting: make(chan struct{}, maxWaiting), short: map[string]time.Time{}}
	b.cluster, _ = client.(*goredis.ClusterClient)
	b.alone = b.cluster == nil && waitN == 0
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
	cmd := scriptCmd{goredis.NewSliceCmd(ctx, append(all, args...)...)}
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

// do sends cmd, on this goroutine when it may go alone and nothing else
// is in flight, else through the queue, and waits for its reply or for
// ctx to end; it returns only the errors of the wait, and cmd holds the
// reply. A command given up on may still run, and its reply must not be
// read then: as with a reply lost on the wire, the caller cannot tell. A
// command that goes alone heeds ctx until it is sent; on the wire the
// client's read and write timeouts bound it, as they bound a pipeline.
func (b *batcher) do(ctx context.Context, cmd goredis.Cmder) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return goredis.ErrClosed
	}
	if b.alone && len(b.calls) == 0 && b.busy.CompareAndSwap(0, 1) {
		b.wg.Add(1) // close waits for it as for a sender
		b.mu.RUnlock()
		defer b.wg.Done()
		defer b.busy.Add(-1)
		b.runAlone(cmd)
		return nil
	}
	c := &queuedCall{cmd: cmd, done: make(chan struct{})}
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
		b.busy.Add(1)
		b.run(batch)
		b.busy.Add(-1)
		clear(batch)
	}
}

// run sends batch and hands each call its reply. The pipeline runs
// without a caller's context: a caller that stops waiting does not take
// the others' replies with it. The client's read and write timeouts bound
// it.
func (b *batcher) run(batch []*queuedCall) {
	ctx := context.Background()
	if b.waitN > 0 {
		b.runWaited(ctx, batch, 0)
		return
	}
	defer b.reloadOnFailure(ctx, batch)
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

// runAlone sends cmd as a sender sends a call it found alone.
func (b *batcher) runAlone(cmd goredis.Cmder) {
	_ = b.client.Process(context.Background(), cmd) // the error is the command's own
}

// runWaited sends batch with a WAIT after it on each connection it goes
// out on, so that every call's writes are known to be on waitN replicas
// before its reply is used; a call whose WAIT fell short gets an error in
// place of its reply (its writes may stand, as after a lost reply). WAIT
// counts the writes of the connection it comes on, so the calls for one
// node go out as one pipeline on one connection (on a cluster, one per
// primary, grouped by the slot of each call's first key).
//
// Each node's pipeline runs on its own and answers its calls as soon as
// it is done, and the sender goes on to the next batch meanwhile (at most
// maxWaiting pipelines wait at once): a primary whose replica is gone
// holds back only its own shards' calls, for the WAIT's timeout, not every
// call behind them. A node found short of replicas is given a short
// timeout for a moment (shortFor), so that its calls fail fast rather
// than each waiting the whole timeout while its replica is away.
func (b *batcher) runWaited(ctx context.Context, batch []*queuedCall, round int) {
	for node, calls := range b.byNode(ctx, batch) {
		b.waiting <- struct{}{}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer func() { <-b.waiting }()
			b.sendWaited(ctx, node, calls, round)
		}()
	}
}

// sendWaited sends one node's calls and their WAIT. A call the node
// refused as not its own (MOVED, ASK, READONLY, a node down) did not run
// and goes out again, to the node the cluster names once it has read its
// slots again; every other call is answered.
func (b *batcher) sendWaited(ctx context.Context, node pipeliner, calls []*queuedCall, round int) {
	pipe := node.Pipeline()
	for _, c := range calls {
		_ = pipe.Process(ctx, c.cmd)
	}
	timeout := b.waitTimeout
	addr := nodeAddr(node)
	if b.isShort(addr) {
		timeout = min(timeout, shortWait)
	}
	w := goredis.NewIntCmd(ctx, "wait", b.waitN, timeout.Milliseconds())
	_ = pipe.Process(ctx, w)
	_, _ = pipe.Exec(ctx)
	var again []*queuedCall
	short := w.Err() != nil || w.Val() < int64(b.waitN)
	for _, c := range calls {
		switch err := c.cmd.Err(); {
		case redirected(err) && round < 3:
			c.cmd.SetErr(nil)
			again = append(again, c)
			continue
		case (err == nil || err == goredis.Nil) && short:
			c.cmd.SetErr(notReplicated(b.waitN, w))
		}
		close(c.done)
	}
	if short {
		b.markShort(addr)
	}
	if len(again) > 0 {
		if b.cluster != nil {
			b.cluster.ReloadState(ctx)
		}
		time.Sleep(time.Duration(round+1) * 50 * time.Millisecond)
		for node, calls := range b.byNode(ctx, again) {
			b.sendWaited(ctx, node, calls, round+1)
		}
	}
}

// shortWait is the WAIT timeout of a node found short of replicas within
// shortFor.
const (
	shortWait = 50 * time.Millisecond
	shortFor  = time.Second
)

// maxWaiting bounds the pipelines waiting for replicas at once.
const maxWaiting = 64

func (b *batcher) isShort(addr string) bool {
	b.shortMu.Lock()
	defer b.shortMu.Unlock()
	until, ok := b.short[addr]
	return ok && time.Now().Before(until)
}

func (b *batcher) markShort(addr string) {
	b.shortMu.Lock()
	defer b.shortMu.Unlock()
	b.short[addr] = time.Now().Add(shortFor)
}

// nodeAddr names a node's client, for the record of nodes short of
// replicas.
func nodeAddr(node pipeliner) string {
	if c, ok := node.(*goredis.Client); ok {
		return c.Options().Addr
	}
	return ""
}

// byNode groups calls by the primary each goes to: on a cluster by the
// slot of its first key, else all to the one client. A call whose node
// is unknown now is answered with the error saying so.
func (b *batcher) byNode(ctx context.Context, calls []*queuedCall) map[pipeliner][]*queuedCall {
	out := make(map[pipeliner][]*queuedCall, 1)
	if b.cluster == nil {
		out[b.client] = calls
		return out
	}
	for _, c := range calls {
		node, err := b.cluster.MasterForKey(ctx, firstKey(c.cmd))
		if err != nil {
			c.cmd.SetErr(err)
			close(c.done)
			continue
		}
		out[node] = append(out[node], c)
	}
	return out
}

// pipeliner is a client a pipeline is made from.
type pipeliner interface {
	Pipeline() goredis.Pipeliner
}

// isReply reports whether err is nil or the server's own answer to the
// command (which ran): not a failure to reach the server.
func isReply(err error) bool {
	if err == nil || err == goredis.Nil {
		return true
	}
	_, ok := err.(goredis.Error)
	return ok && !redirected(err)
}

// notReplicated is the error of a call whose writes reached fewer
// replicas than asked: the call ran, whatever error the WAIT got.
func notReplicated(n int, w *goredis.IntCmd) error {
	if err := w.Err(); err != nil {
		return replicationError{fmt.Errorf("redis: waiting for %d replicas: %w", n, err)}
	}
	return replicationError{fmt.Errorf("redis: the writes reached %d of the %d replicas asked (store.redis_wait_replicas) in time; they may stand", w.Val(), n)}
}

// replicationError is a call's error that its WAIT made: the call ran,
// so a server's refusal of the WAIT says nothing of it (DB.fail).
type replicationError struct{ error }

func (e replicationError) Unwrap() error { return e.error }

// reloadOnFailure makes a cluster client read the slots again when a
// call found its node gone, so that the next call finds the primary that
// took over.
func (b *batcher) reloadOnFailure(ctx context.Context, batch []*queuedCall) {
	if b.cluster == nil {
		return
	}
	for _, c := range batch {
		if err := c.cmd.Err(); err != nil && !isReply(err) {
			b.cluster.ReloadState(ctx)
			return
		}
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
