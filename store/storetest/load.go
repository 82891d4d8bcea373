package storetest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/sessions"
)

// runLoad pushes many conversations through a few concurrent workers while
// producers keep appending, and checks the per-conversation invariants:
// FIFO, at most one worker inside a conversation, nothing lost, nothing
// run twice.
func runLoad(t *testing.T, b Backend) {
	const (
		convs     = 200
		perConv   = 25
		workers   = 4
		producers = 4
		total     = convs * perConv
		// Long enough that no lease runs out under -race on a slow disk: an
		// expiry here would be a legitimate redelivery, not a bug.
		leaseTTL = time.Minute
	)
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	st, _ := openStore(t, b.New(t), clock.Real{}, sessions.Limits{})
	ss := st.Sessions()

	var (
		inside  [convs]atomic.Int32 // workers inside each conversation now
		nextSeq [convs]atomic.Int32 // the sequence number each conversation expects next
		seen    [convs][perConv]atomic.Bool
		done    atomic.Int32

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
	// Each producer owns every producers-th conversation and appends to
	// them round by round, so entries of different conversations interleave
	// and workers start while the queues are still filling.
	for p := range producers {
		wg.Go(func() {
			for seq := range perConv {
				for c := p; c < convs; c += producers {
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

	run := func(worker string, turn *sessions.Turn) error {
		var c int
		if _, err := fmt.Sscanf(turn.Lease.Conv, "load-%d", &c); err != nil || c < 0 || c >= convs {
			return fmt.Errorf("claimed an unknown conversation %q", turn.Lease.Conv)
		}
		seq, err := strconv.Atoi(turn.Entry.Text)
		if err != nil || seq < 0 || seq >= perConv {
			return fmt.Errorf("conversation %d: unknown entry %q", c, turn.Entry.Text)
		}
		if n := inside[c].Add(1); n != 1 {
			fail("conversation %d: %s is inside with %d other worker(s)", c, worker, n-1)
		}
		if seen[c][seq].Swap(true) {
			fail("conversation %d: entry %d handed out again after it was acked", c, seq)
		}
		if want := nextSeq[c].Load(); int32(seq) != want {
			fail("conversation %d: %s got entry %d, want %d", c, worker, seq, want)
		}
		nextSeq[c].Store(int32(seq) + 1)
		// Leave before the release becomes visible, or the next holder
		// would find this worker still inside.
		inside[c].Add(-1)
		return ss.Finish(ctx, turn.Lease, sessions.Finish{
			EntryID: turn.Entry.ID,
			History: []sessions.Message{{Role: "user", Content: turn.Entry.Text}},
			Release: true,
		})
	}

	started := time.Now()
	for w := range workers {
		worker := fmt.Sprintf("w%d", w)
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
				if err := run(worker, turn); err != nil {
					fail("%s: %v", worker, err)
					cancel()
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	t.Logf("%d entries through %d workers in %v", done.Load(), workers, time.Since(started).Round(time.Millisecond))

	for _, f := range failures {
		t.Error(f)
	}
	if n := done.Load(); n != total {
		t.Fatalf("%d of %d entries processed before %v", n, total, caseTimeout)
	}
	for c := range convs {
		if n := nextSeq[c].Load(); n != perConv {
			t.Errorf("conversation %d: processed up to entry %d, want %d", c, n, perConv)
		}
	}
	if turn, err := ss.Claim(ctx, "w-last", leaseTTL); turn != nil || err != nil {
		t.Errorf("Claim after the run = %+v, %v; want nil, nil", turn, err)
	}
	// The history each turn committed is in order too.
	for c := range convs {
		h, err := ss.History(ctx, convName("load", c))
		if err != nil {
			t.Fatalf("History: %v", err)
		}
		if len(h) != perConv {
			t.Errorf("conversation %d: %d history messages, want %d", c, len(h), perConv)
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
