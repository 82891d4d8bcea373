package adapters_test

import (
	"math"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
)

func TestBackoffWait(t *testing.T) {
	tests := []struct {
		desc string
		b    adapters.Backoff
		n    int
		want time.Duration
	}{
		{desc: "first failure", b: adapters.Backoff{Min: time.Second, Max: time.Minute}, n: 1, want: time.Second},
		{desc: "doubles", b: adapters.Backoff{Min: time.Second, Max: time.Minute}, n: 4, want: 8 * time.Second},
		{desc: "stops at max", b: adapters.Backoff{Min: time.Second, Max: time.Minute}, n: 7, want: time.Minute},
		{desc: "stays at max", b: adapters.Backoff{Min: time.Second, Max: time.Minute}, n: 1 << 30, want: time.Minute},
		{desc: "before any failure", b: adapters.Backoff{Min: time.Second, Max: time.Minute}, n: 0, want: time.Second},
		{desc: "max below min", b: adapters.Backoff{Min: time.Second, Max: time.Millisecond}, n: 3, want: time.Second},
		{desc: "no overflow", b: adapters.Backoff{Min: time.Second, Max: math.MaxInt64}, n: 80, want: math.MaxInt64},
		{desc: "no wait", b: adapters.Backoff{}, n: 1 << 30, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := tc.b.Wait(tc.n); got != tc.want {
				t.Errorf("%+v.Wait(%d) = %v, want %v", tc.b, tc.n, got, tc.want)
			}
		})
	}
}
