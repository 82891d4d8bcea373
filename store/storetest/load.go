package storetest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/sessions"
)

// loadShape is how much work one load case pushes through how many
// workers, spread over how many store handles on one place (each handle
// standing for a gateway process).
type loadShape struct {
	desc      string
	convs     int
	perConv   int
	workers   int
	stores    int
	producers int
	// finishAndClaim makes a worker commit each turn with FinishAndClaim
	// and run the turn that claims, claiming by itself only when idle.
	finishAndClaim bool
}

func runLoad(t *testing.T, b Backend) {
	shapes := []loadShape{
		{desc: "200 conversations × 25 entries, 4 workers", convs: 200, perConv: 25, workers: 4, stores: 1, producers: 4},
		{desc: "40 conversations × 10 entries, 4 workers on two stores", convs: 40, perConv: 10, workers: 4, stores: 2, producers: 2},
		{desc: "100 conversations × 10 entries, 4 workers finishing and claiming in one call on two stores", convs: 100, perConv: 10, workers: 4, stores: 2, producers: 2, finishAndClaim: true},
	}
	for _, s := range shapes {
		t.Run(s.desc, func(t *testing.T) { runLoadShape(t, b, s) })
	}
}

// runLoadShape pushes conversations through concurrent workers while
// producers keep appending, and checks the per-conversation invariants:
// FIFO, at most one worker inside a conversation, nothing lost, nothing
// run twice, no conversation forgotten.
func runLoadShape(t *testing.T, b Backend, s loadShape) {
	const (
		// Long enough that no lease runs out under -race on a slow disk: an
		// expiry here would be a legitimate redelivery, not a bug.
		leaseTTL = time.Minute
		// A run that makes no progress for this long has lost a
		// conversation; waiting for the case timeout would only hide which.
		stallAfter = 20 * time.Second
	)
	total := int32(s.convs * s.perConv)
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	place := b.New(t)
	var views []sessions.Store
	for range s.stores {
		st, _ := openStore(t, place, clock.Real{}, sessions.Limits{})
		views = append(views, st.Sessions())
	}

	var (
		inside   = make([]atomic.Int32, s.convs) // workers inside each conversation now
		nextSeq  = make([]atomic.Int32, s.convs) // the entry each conversation expects next
		seen     = make([]atomic.Bool, s.convs*s.perConv)
		done     atomic.Int32
		progress atomic.Int64 // unix nanos of the last finished turn

		mu       sync.Mutex
		failures []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 20 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}

	var wg sync.WaitGroup
	var producing sync.WaitGroup
	// Each producer owns every producers-th conversation and appends to
	// them round by round, so entries of different conversations interleave
	// and workers start while the queues are still filling.
	for p := range s.producers {
		producing.Go(func() {
			ss := views[p%len(views)]
			for seq := range s.perConv {
				for c := p; c < s.convs; c += s.producers {
					in := user(convName("load", c), strconv.Itoa(seq))
					in.MessageID = fmt.Sprintf("%d/%d", c, seq)
					if _, err := ss.Append(ctx, in); err != nil {
						fail("Append conversation %d entry %d: %v", c, seq, err)
						cancel()
						return
					}
				}
			}
		})
	}

	// run checks turn and returns the Finish that commits it.
	run := func(worker string, turn *sessions.Turn) (sessions.Finish, error) {
		var c int
		if _, err := fmt.Sscanf(turn.Lease.Conv, "load-%d", &c); err != nil || c < 0 || c >= s.convs {
			return sessions.Finish{}, fmt.Errorf("claimed an unknown conversation %q", turn.Lease.Conv)
		}
		seq, err := strconv.Atoi(turn.Entry.Text)
		if err != nil || seq < 0 || seq >= s.perConv {
			return sessions.Finish{}, fmt.Errorf("conversation %d: unknown entry %q", c, turn.Entry.Text)
		}
		if n := inside[c].Add(1); n != 1 {
			fail("conversation %d: %s is inside with %d other worker(s)", c, worker, n-1)
		}
		if seen[c*s.perConv+seq].Swap(true) {
			fail("conversation %d: entry %d handed out again after it was acked", c, seq)
		}
		if want := nextSeq[c].Load(); int32(seq) != want {
			fail("conversation %d: %s got entry %d, want %d", c, worker, seq, want)
		}
		nextSeq[c].Store(int32(seq) + 1)
		// Leave before the release becomes visible, or the next holder
		// would find this worker still inside.
		inside[c].Add(-1)
		return sessions.Finish{
			EntryID: turn.Entry.ID,
			History: []chat.Message{{Role: "user", Content: turn.Entry.Text}},
			Release: true,
		}, nil
	}

	started := time.Now()
	progress.Store(started.UnixNano())
	for w := range s.workers {
		worker := fmt.Sprintf("w%d", w)
		ss := views[w%len(views)]
		wg.Go(func() {
			for done.Load() < total && ctx.Err() == nil {
				turn, err := ss.Claim(ctx, worker, leaseTTL)
				if err != nil {
					fail("%s: Claim: %v", worker, err)
					cancel()
					return
				}
				if turn == nil {
					time.Sleep(time.Millisecond)
					continue
				}
				for turn != nil {
					fin, err := run(worker, turn)
					if err != nil {
						fail("%s: %v", worker, err)
						cancel()
						return
					}
					var next *sessions.Turn
					if s.finishAndClaim {
						next, err = ss.FinishAndClaim(ctx, turn.Lease, fin, worker, leaseTTL)
					} else {
						err = ss.Finish(ctx, turn.Lease, fin)
					}
					if err != nil {
						fail("%s: finishing conversation %q: %v", worker, turn.Lease.Conv, err)
						cancel()
						return
					}
					done.Add(1)
					progress.Store(time.Now().UnixNano())
					turn = next
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() {
		producing.Wait()
		wg.Wait()
		close(finished)
	}()
	watch := time.NewTicker(100 * time.Millisecond)
	defer watch.Stop()
	for waiting := true; waiting; {
		select {
		case <-finished:
			waiting = false
		case <-watch.C:
			if time.Since(time.Unix(0, progress.Load())) > stallAfter {
				fail("no turn finished for %v with %d of %d done", stallAfter, done.Load(), total)
				cancel()
			}
		}
	}
	t.Logf("%d entries through %d workers in %v", done.Load(), s.workers, time.Since(started).Round(time.Millisecond))

	for _, f := range failures {
		t.Error(f)
	}
	for c := range s.convs {
		if n := nextSeq[c].Load(); int(n) != s.perConv {
			t.Errorf("conversation %d: processed up to entry %d of %d", c, n, s.perConv)
		}
	}
	if t.Failed() {
		return
	}
	ctx, cancel = context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	if turn, err := views[0].Claim(ctx, "w-last", leaseTTL); turn != nil || err != nil {
		t.Errorf("Claim after the run = %+v, %v; want nil, nil", turn, err)
	}
	// The history each turn committed is in order too.
	for c := range s.convs {
		h, err := views[0].History(ctx, convName("load", c))
		if err != nil {
			t.Fatalf("History: %v", err)
		}
		if len(h) != s.perConv {
			t.Errorf("conversation %d: %d history messages, want %d", c, len(h), s.perConv)
			continue
		}
		for i, m := range h {
			if m.Content != strconv.Itoa(i) {
				t.Errorf("conversation %d: history[%d] = %q, want %q", c, i, m.Content, strconv.Itoa(i))
				break
			}
		}
	}
}
