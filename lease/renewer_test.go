package lease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/lease"
)

// fakeClaims is a store's side of claims: those it still gives the
// holder, and a failure to return.
type fakeClaims struct {
	mu      sync.Mutex
	keep    map[string]bool
	fail    error
	renewed chan []string
}

func (f *fakeClaims) renew(_ context.Context, cs []lease.Claim, ttl time.Duration) ([]lease.Claim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	var out []lease.Claim
	for _, c := range cs {
		names = append(names, c.Name)
		if f.keep[c.Name] {
			c.Expires = c.Expires.Add(ttl)
			out = append(out, c)
		}
	}
	f.renewed <- names
	return out, f.fail
}

func TestRenewer(t *testing.T) {
	const ttl = 30 * time.Second
	tests := []struct {
		desc     string
		keep     map[string]bool
		fail     error
		wantLost []string
		wantHeld []string
		// wantNext is how long after the renewal the next one comes.
		wantNext time.Duration
	}{
		{desc: "a renewed claim stays held", keep: map[string]bool{"a": true}, wantHeld: []string{"a"}, wantNext: ttl / 3},
		{desc: "a claim the store no longer gives is lost, once", keep: map[string]bool{}, wantLost: []string{"a"}, wantNext: ttl / 3},
		{desc: "a failed renewal keeps the claim and retries sooner", keep: map[string]bool{}, fail: errors.New("down"), wantHeld: []string{"a"}, wantNext: ttl / 9},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC))
			store := &fakeClaims{keep: tc.keep, fail: tc.fail, renewed: make(chan []string, 4)}
			var mu sync.Mutex
			var lost []string
			r, err := lease.NewRenewer(lease.RenewerOptions{Renew: store.renew, TTL: ttl, Clock: clk, Lost: func(c lease.Claim) {
				mu.Lock()
				lost = append(lost, c.Name)
				mu.Unlock()
			}})
			if err != nil {
				t.Fatal(err)
			}
			r.Hold(lease.Claim{Name: "a", Owner: "me", Token: 1, Expires: clk.Now().Add(ttl)})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := r.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer r.Shutdown(ctx)
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Advance(ttl/3 - time.Millisecond)
			select {
			case names := <-store.renewed:
				t.Fatalf("renewed %v before a third of the ttl", names)
			default:
			}
			clk.Advance(time.Millisecond)
			if got := <-store.renewed; !cmp.Equal(got, []string{"a"}) {
				t.Errorf("renewed %v, want [a]", got)
			}
			// The loop arms its next wait once the renewal is done.
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			gotLost := lost
			mu.Unlock()
			if diff := cmp.Diff(tc.wantLost, gotLost); diff != "" {
				t.Errorf("lost (-want +got):\n%s", diff)
			}
			_, held := r.Current("a")
			if held != (len(tc.wantHeld) > 0) {
				t.Errorf("held a = %t, want %t", held, len(tc.wantHeld) > 0)
			}
			if !held {
				return
			}
			clk.Advance(tc.wantNext - time.Millisecond)
			select {
			case names := <-store.renewed:
				t.Fatalf("renewed %v before %s", names, tc.wantNext)
			default:
			}
			clk.Advance(time.Millisecond)
			<-store.renewed
		})
	}
}

func TestRenewerDropStopsRenewing(t *testing.T) {
	clk := clock.NewFake(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC))
	store := &fakeClaims{keep: map[string]bool{"a": true, "b": true}, renewed: make(chan []string, 4)}
	r, err := lease.NewRenewer(lease.RenewerOptions{Renew: store.renew, TTL: 3 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	r.Hold(lease.Claim{Name: "a", Token: 1})
	r.Hold(lease.Claim{Name: "b", Token: 1})
	r.Drop("a")
	if err := r.RenewNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := <-store.renewed; !cmp.Equal(got, []string{"b"}) {
		t.Errorf("renewed %v, want [b]", got)
	}
}

// Every renews more often than a third of the TTL, each renewal still
// for the whole TTL; one longer than a third of the TTL is not taken.
func TestRenewerEvery(t *testing.T) {
	const ttl = 30 * time.Second
	for _, tc := range []struct {
		every, want time.Duration
	}{{time.Second, time.Second}, {time.Minute, ttl / 3}} {
		clk := clock.NewFake(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC))
		store := &fakeClaims{keep: map[string]bool{"a": true}, renewed: make(chan []string, 4)}
		r, err := lease.NewRenewer(lease.RenewerOptions{Renew: store.renew, TTL: ttl, Every: tc.every, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		r.Hold(lease.Claim{Name: "a", Owner: "me", Token: 1, Expires: clk.Now().Add(ttl)})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Advance(tc.want - time.Millisecond)
			select {
			case <-store.renewed:
				t.Fatalf("every %s: renewed before %s", tc.every, tc.want)
			default:
			}
			clk.Advance(time.Millisecond)
			select {
			case <-store.renewed:
			case <-ctx.Done():
				t.Fatalf("every %s: no renewal at %s", tc.every, tc.want)
			}
		}
		_ = r.Shutdown(ctx)
		cancel()
	}
}
