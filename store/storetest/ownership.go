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

// acquire calls Acquire and fails the case unless it reports want (held
// or not), and returns the grant's token.
func (o *ownership) acquire(ls lease.Store, name, holder string, want bool) int64 {
	o.t.Helper()
	token, err := ls.Acquire(o.ctx, name, holder, ttl)
	if err != nil {
		o.t.Fatalf("Acquire(%s, %s): %v", name, holder, err)
	}
	if held := token > 0; held != want {
		o.t.Errorf("Acquire(%s, %s) = token %d, want held %v", name, holder, token, want)
	}
	return token
}

// check calls Check and fails the case unless it reports want.
func (o *ownership) check(ls lease.Store, name, holder string, token int64, want bool) {
	o.t.Helper()
	held, err := ls.Check(o.ctx, name, holder, token)
	if err != nil {
		o.t.Fatalf("Check(%s, %s, %d): %v", name, holder, token, err)
	}
	if held != want {
		o.t.Errorf("Check(%s, %s, %d) = %v, want %v", name, holder, token, held, want)
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
					token, err := views[i%2].Acquire(o.ctx, name, fmt.Sprintf("p%d", i), ttl)
					if err != nil {
						t.Errorf("round %d: Acquire(p%d): %v", r, i, err)
					}
					if token > 0 {
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

	// The fencing token: a stalled holder that checks its token finds it
	// stale once another took the lease, and so does the same holder
	// whose lease lapsed, even when it took it again.
	t.Run("each grant but a renewal has a greater token; Check holds the holder to its token", func(t *testing.T) {
		o := newOwnership(t, b)
		other, _ := openStore(t, o.place, o.clk, o.lim)
		ls2 := other.Leases()
		t1 := o.acquire(o.ls, "l", "p1", true)
		o.check(ls2, "l", "p1", t1, true)
		o.clk.Advance(ttl / 2)
		if t := o.acquire(o.ls, "l", "p1", true); t != t1 {
			o.t.Errorf("a renewal's token %d, want the grant's %d", t, t1)
		}
		o.check(o.ls, "l", "p2", t1, false)
		o.check(o.ls, "l", "p1", t1+1, false)

		// p1 stalls past its lease; p2 takes it.
		o.clk.Advance(ttl)
		o.check(o.ls, "l", "p1", t1, false)
		t2 := o.acquire(ls2, "l", "p2", true)
		if t2 <= t1 {
			o.t.Errorf("the takeover's token %d, want more than %d", t2, t1)
		}
		o.check(o.ls, "l", "p1", t1, false)
		o.check(o.ls, "l", "p2", t2, true)

		// A release frees the lease; the next grant, even to the same
		// holder, has a new token, and the released one checks false.
		o.release(ls2, "l", "p2")
		o.check(o.ls, "l", "p2", t2, false)
		t3 := o.acquire(ls2, "l", "p2", true)
		if t3 <= t2 {
			o.t.Errorf("the grant after a release has token %d, want more than %d", t3, t2)
		}
		// The same holder again after its lease lapsed, no one in
		// between: a new token too.
		o.clk.Advance(ttl + time.Millisecond)
		t4 := o.acquire(ls2, "l", "p2", true)
		if t4 <= t3 {
			o.t.Errorf("the grant after a lapse has token %d, want more than %d", t4, t3)
		}
		o.check(o.ls, "l", "p2", t3, false)
		o.check(o.ls, "l", "p2", t4, true)
		// A lease never taken holds no one.
		o.check(o.ls, "never-taken", "p1", 1, false)
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
			token, err := o.ls.Acquire(o.ctx, tc.name, tc.holder, tc.ttl)
			wantCode(t, "Acquire with "+tc.desc, err, errs.Invalid)
			if token != 0 {
				t.Errorf("Acquire with %s: token %d, want 0", tc.desc, token)
			}
			if tc.ttl > 0 {
				wantCode(t, "Release with "+tc.desc, o.ls.Release(o.ctx, tc.name, tc.holder), errs.Invalid)
				_, err := o.ls.Check(o.ctx, tc.name, tc.holder, 1)
				wantCode(t, "Check with "+tc.desc, err, errs.Invalid)
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
		_, err = o.ls.Check(o.ctx, "l", "p1", 1)
		wantCode(t, "Check", err, errs.Closed)
		wantCode(t, "Release", o.ls.Release(o.ctx, "l", "p1"), errs.Closed)
	})
}
