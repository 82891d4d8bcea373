package storetest

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/sessions"
)

// ownership is one case's fixture and the lease store of its open store.
type ownership struct {
	*fixture
	ls lease.Store
}

func newOwnership(t *testing.T, b Backend) *ownership {
	t.Helper()
	f := newFixture(t, b, sessions.Limits{})
	o := &ownership{fixture: f}
	o.ls = f.st.Leases()
	return o
}

// acquire calls Acquire and fails the case unless it reports want.
func (o *ownership) acquire(ls lease.Store, name, holder string, want bool) {
	o.t.Helper()
	held, err := ls.Acquire(o.ctx, name, holder, ttl)
	if err != nil {
		o.t.Fatalf("Acquire(%s, %s): %v", name, holder, err)
	}
	if held != want {
		o.t.Errorf("Acquire(%s, %s) = %v, want %v", name, holder, held, want)
	}
}

func (o *ownership) release(ls lease.Store, name, holder string) {
	o.t.Helper()
	if err := ls.Release(o.ctx, name, holder); err != nil {
		o.t.Fatalf("Release(%s, %s): %v", name, holder, err)
	}
}

func runOwnership(t *testing.T, b Backend) {
	t.Run("one holder at a time; the holder renews", func(t *testing.T) {
		o := newOwnership(t, b)
		o.acquire(o.ls, "adapter:telegram", "p1", true)
		o.acquire(o.ls, "adapter:telegram", "p2", false)
		o.acquire(o.ls, "adapter:telegram", "p1", true)
		// Names are independent.
		o.acquire(o.ls, "adapter:discord", "p2", true)
		o.acquire(o.ls, "adapter:discord", "p1", false)
	})

	// Two store handles on one place stand for two gateway processes.
	t.Run("one holder among concurrent acquires on two stores", func(t *testing.T) {
		o := newOwnership(t, b)
		other, _ := openStore(t, o.place, o.clk, o.lim)
		views := []lease.Store{o.ls, other.Leases()}
		const rounds, holders = 5, 16
		for r := range rounds {
			name := fmt.Sprintf("adapter:race-%d", r)
			var won atomic.Int32
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range holders {
				wg.Go(func() {
					<-start
					held, err := views[i%2].Acquire(o.ctx, name, fmt.Sprintf("p%d", i), ttl)
					if err != nil {
						t.Errorf("round %d: Acquire(p%d): %v", r, i, err)
					}
					if held {
						won.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			if n := won.Load(); n != 1 {
				t.Errorf("round %d: %d of %d concurrent acquires got the lease, want 1", r, n, holders)
			}
		}
	})

	t.Run("a renewal moves the expiry", func(t *testing.T) {
		o := newOwnership(t, b)
		o.acquire(o.ls, "l", "p1", true)
		o.clk.Advance(ttl * 2 / 3)
		o.acquire(o.ls, "l", "p1", true)
		// Past the first grant's expiry, inside the renewal's.
		o.clk.Advance(ttl * 2 / 3)
		o.acquire(o.ls, "l", "p2", false)
		o.clk.Advance(ttl / 3)
		o.acquire(o.ls, "l", "p2", true)
	})

	t.Run("takeover after expiry by the store's clock", func(t *testing.T) {
		o := newOwnership(t, b)
		other, _ := openStore(t, o.place, o.clk, o.lim)
		ls2 := other.Leases()
		o.acquire(o.ls, "l", "p1", true)
		o.clk.Advance(ttl - time.Millisecond)
		o.acquire(ls2, "l", "p2", false)
		o.clk.Advance(time.Millisecond)
		o.acquire(ls2, "l", "p2", true)
		// The old holder finds it taken and cannot free it.
		o.acquire(o.ls, "l", "p1", false)
		o.release(o.ls, "l", "p1")
		o.acquire(o.ls, "l", "p3", false)
		o.acquire(ls2, "l", "p2", true)
	})

	t.Run("release by the holder frees the lease at once", func(t *testing.T) {
		o := newOwnership(t, b)
		o.acquire(o.ls, "l", "p1", true)
		o.release(o.ls, "l", "p1")
		o.acquire(o.ls, "l", "p2", true)
	})

	t.Run("release by another holder is a no-op", func(t *testing.T) {
		o := newOwnership(t, b)
		o.release(o.ls, "never-taken", "p1")
		o.acquire(o.ls, "l", "p1", true)
		o.release(o.ls, "l", "p2")
		o.acquire(o.ls, "l", "p2", false)
		o.acquire(o.ls, "l", "p1", true)
		// An expired lease released by its old holder after a takeover
		// stays with the new one (covered above); one released after it
		// expired, with no takeover, is simply free.
		o.clk.Advance(ttl + time.Second)
		o.release(o.ls, "l", "p1")
		o.acquire(o.ls, "l", "p2", true)
	})

	t.Run("a lease outlives the store handle", func(t *testing.T) {
		o := newOwnership(t, b)
		o.acquire(o.ls, "l", "p1", true)
		o.reopen(true)
		o.ls = o.st.Leases()
		o.acquire(o.ls, "l", "p2", false)
		o.acquire(o.ls, "l", "p1", true)
	})

	t.Run("bad input is Invalid", func(t *testing.T) {
		o := newOwnership(t, b)
		long := strings.Repeat("n", lease.MaxName+1)
		cases := []struct {
			desc         string
			name, holder string
			ttl          time.Duration
		}{
			{"empty name", "", "p1", ttl},
			{"empty holder", "l", "", ttl},
			{"overlong name", long, "p1", ttl},
			{"overlong holder", "l", long, ttl},
			{"zero ttl", "l", "p1", 0},
			{"negative ttl", "l", "p1", -time.Second},
		}
		for _, tc := range cases {
			held, err := o.ls.Acquire(o.ctx, tc.name, tc.holder, tc.ttl)
			wantCode(t, "Acquire with "+tc.desc, err, errs.Invalid)
			if held {
				t.Errorf("Acquire with %s: held = true", tc.desc)
			}
			if tc.ttl > 0 {
				wantCode(t, "Release with "+tc.desc, o.ls.Release(o.ctx, tc.name, tc.holder), errs.Invalid)
			}
		}
		// Nothing was taken by the refused calls.
		o.acquire(o.ls, "l", "p2", true)
	})

	t.Run("a closed store is Closed", func(t *testing.T) {
		o := newOwnership(t, b)
		if err := o.closeSt(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		_, err := o.ls.Acquire(o.ctx, "l", "p1", ttl)
		wantCode(t, "Acquire", err, errs.Closed)
		wantCode(t, "Release", o.ls.Release(o.ctx, "l", "p1"), errs.Closed)
	})
}
