package bench

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/internal/testkit"
)

// The figures are not judged here, only that a run completes and
// reports every field, on both backends.
func TestQueue(t *testing.T) {
	tests := []struct {
		desc string
		opt  func(t *testing.T) QueueOptions
	}{
		{
			desc: "sqlite",
			opt: func(t *testing.T) QueueOptions {
				return QueueOptions{Store: "sqlite", TempDir: t.TempDir()}
			},
		},
		{
			desc: "redis",
			opt: func(t *testing.T) QueueOptions {
				return QueueOptions{Store: "redis", RedisURL: testkit.StartRedis(t).URL()}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			opt := tt.opt(t)
			opt.Entries, opt.Conversations = 60, 4
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := Queue(ctx, opt)
			if err != nil {
				t.Fatalf("Queue: %v", err)
			}
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			var fields map[string]any
			if err := json.Unmarshal(b, &fields); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"entries_per_s", "raw_per_s", "ratio", "p50_ms", "p99_ms", "entries", "conversations"} {
				v, ok := fields[k].(float64)
				if !ok || v <= 0 {
					t.Errorf("%s = %v, want a positive number (all: %s)", k, fields[k], b)
				}
			}
			if fields["store"] != opt.Store {
				t.Errorf("store = %v, want %q", fields["store"], opt.Store)
			}
			if res.Entries != 60 || res.Conversations != 4 {
				t.Errorf("entries, conversations = %d, %d; want 60, 4", res.Entries, res.Conversations)
			}
			assertCleanedUp(t, opt)
		})
	}
}

func assertCleanedUp(t *testing.T, opt QueueOptions) {
	t.Helper()
	switch opt.Store {
	case "sqlite":
		left, err := os.ReadDir(opt.TempDir)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 0 {
			t.Errorf("temp dir keeps %d entries after the run, e.g. %s", len(left), left[0].Name())
		}
	case "redis":
		o, err := goredis.ParseURL(opt.RedisURL)
		if err != nil {
			t.Fatal(err)
		}
		c := goredis.NewClient(o)
		defer c.Close()
		keys, err := c.Keys(context.Background(), benchPrefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 0 {
			t.Errorf("redis keeps %d bench keys after the run, e.g. %s", len(keys), keys[0])
		}
	}
}

func TestQueueRejectsBadOptions(t *testing.T) {
	tests := []struct {
		desc string
		opt  QueueOptions
	}{
		{desc: "unknown store", opt: QueueOptions{Store: "mysql"}},
		{desc: "negative entries", opt: QueueOptions{Store: "sqlite", Entries: -1}},
		{desc: "negative conversations", opt: QueueOptions{Store: "sqlite", Conversations: -3}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if _, err := Queue(context.Background(), tt.opt); err == nil {
				t.Fatal("Queue succeeded, want an error")
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		desc string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{desc: "median of 1..100", in: s, p: 50, want: 50 * time.Millisecond},
		{desc: "p99 of 1..100", in: s, p: 99, want: 99 * time.Millisecond},
		{desc: "p100 is the max", in: s, p: 100, want: 100 * time.Millisecond},
		{desc: "one sample", in: s[:1], p: 99, want: time.Millisecond},
		{desc: "no samples", in: nil, p: 50, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := percentile(tt.in, tt.p); got != tt.want {
				t.Errorf("percentile(p=%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestShare(t *testing.T) {
	for _, c := range []struct{ entries, convs int }{{60, 4}, {61, 4}, {3, 7}, {20000, 32}} {
		total := 0
		for i := range c.convs {
			total += share(c.entries, c.convs, i)
		}
		if total != c.entries {
			t.Errorf("shares of %d over %d add up to %d", c.entries, c.convs, total)
		}
	}
}
