package delivery

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/bgloop"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/outbox"
)

// claimLoop is the one claim loop. It claims only as many messages as the
// senders will have sent well before the claims run out (see room), so
// no claim waits in this process while its time runs out. Once stopped,
// it returns at the first claim that finds nothing due; its end is seen
// through lanes.done, which it closes as the last sender ended.
type claimLoop struct {
	outbox           outbox.Store
	routes           *Routes
	name             string
	batch            int
	ttl              time.Duration
	pollMin, pollMax time.Duration
	clock            clock.Clock
	log              *slog.Logger
	notices          *notices
	doubt            *doubt
	room             *room
	order            *order
	lanes            *lanes
	beat             *heartbeat    // nil without a heartbeat
	stop             chan struct{} // closed by Shutdown: claim no more
	claiming         *sync.RWMutex // Worker.handoffs, held alone from a claim until its dispatch

	failing bool // the last claim failed
	loop    bgloop.Loop
}

// start runs the loop until it is stopped (stop) or ctx ends, which
// stops it hard.
func (cl *claimLoop) start(ctx context.Context, op string) error {
	return cl.loop.Start(ctx, op, cl.run)
}

func (cl *claimLoop) run(ctx context.Context) {
	defer cl.lanes.end()
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	wait := time.Duration(0)
	for {
		if d := cl.doubt.left(); d > 0 {
			// A claim or a commit of this worker may have taken messages
			// it never saw: no claim until those claims ran out (doubt).
			t := cl.clock.NewTimer(d)
			select {
			case <-t.C():
			case <-cl.stop:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		n := cl.room.left()
		if n == 0 {
			select {
			case <-cl.room.free:
				continue
			case <-ctx.Done():
				return
			}
		}
		mark, since := cl.notices.mark(), cl.order.mark()
		cl.claiming.Lock()
		claimed, all := cl.claim(ctx, min(n, cl.batch))
		cl.lanes.dispatch(claimed, since, true)
		cl.claiming.Unlock()
		if all {
			// Every message due when the claim began is claimed now.
			cl.notices.claimedAll(mark)
		}
		if len(claimed) > 0 {
			wait = 0
			continue
		}
		select {
		case <-cl.stop:
			select {
			case <-cl.notices.wake:
				// A commit queued messages while that claim ran (it
				// found the claim on its way and queued them due):
				// one more claim takes them before the loop ends.
				continue
			default:
			}
			return
		default:
		}
		wait = min(max(wait*2, cl.pollMin), cl.pollMax)
		idle.Reset(wait)
		select {
		case <-cl.notices.wake:
			wait = 0
		case <-idle.C:
		case <-cl.stop:
			// One more claim finds what became due meanwhile.
		case <-ctx.Done():
			idle.Stop()
			return
		}
		idle.Stop()
	}
}

// claim takes up to n due messages for the platforms with a route, and
// reports whether it took all that were due: it got fewer than n.
func (cl *claimLoop) claim(ctx context.Context, n int) (claimed []outbox.Claimed, all bool) {
	platforms := cl.routes.Platforms()
	if len(platforms) == 0 {
		return nil, false
	}
	at := cl.clock.Now()
	claimed, err := cl.outbox.Claim(ctx, cl.name, platforms, n, cl.ttl)
	if err == nil && len(claimed) > 0 {
		// A claim that took messages kept the heartbeat as a Beat does.
		cl.beat.beaten(at)
	}
	if cl.doubt.after(err) {
		cl.log.Warn("a claim failed and may have taken messages all the same; this worker claims nothing until its claims ran out, so that none is passed",
			"for", cl.doubt.left(), "err", err)
	}
	if err != nil {
		if ctx.Err() == nil {
			// The store may stay away for a while: the gateway's log shows
			// the same warning once a minute, counted (logcalm).
			cl.failing = true
			cl.log.Warn("claiming outbox messages failed", "err", err)
		}
		return nil, false
	}
	if cl.failing {
		cl.failing = false
		cl.log.Info("claiming outbox messages works again")
	}
	return claimed, len(claimed) < n
}
