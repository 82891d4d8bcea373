package bench

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
)

// As with the other benches, the figures are not judged, only that a
// tiny run completes and reports every field.
func TestDelegation(t *testing.T) {
	tests := []struct {
		desc string
		opt  func(t *testing.T) DelegationOptions
	}{
		{
			desc: "sqlite",
			opt: func(t *testing.T) DelegationOptions {
				return DelegationOptions{Store: "sqlite", TempDir: t.TempDir()}
			},
		},
		{
			desc: "redis",
			opt: func(t *testing.T) DelegationOptions {
				return DelegationOptions{Store: "redis", RedisURL: testkit.StartRedis(t).URL(), TempDir: t.TempDir()}
			},
		},
	}
	positive := []string{
		"dispatch_turns", "dispatch_tasks", "dispatch_turn_p50_ms", "dispatch_turn_p99_ms",
		"noop_turn_p50_ms", "noop_turn_p99_ms", "target_dispatch_overhead_p99_ms",
		"dispatch_tool_p50_ms", "dispatch_tool_p99_ms", "dispatch_commit_p50_ms", "dispatch_commit_p99_ms",
		"noop_commit_p50_ms", "noop_commit_p99_ms",
		"sessions", "children", "child_delay_ms", "runner_max", "turn_workers",
		"all_children_started_s", "all_children_ended_s", "all_completions_delivered_s",
		"all_parent_turns_started_s", "target_all_parent_turns_started_s",
		"completion_latency_p50_ms", "completion_latency_p99_ms", "fan_cpu_s", "peak_rss_mb",
	}
	// A difference of quantiles, or a spread of commits that may fall
	// on one clock reading: numbers, of any sign.
	present := []string{"dispatch_overhead_p50_ms", "dispatch_overhead_p99_ms", "dispatch_spread_s"}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			opt := tt.opt(t)
			opt.DispatchTurns, opt.Sessions, opt.Tasks, opt.ChildDelay = 5, 3, 3, 20*time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := Delegation(ctx, opt)
			if err != nil {
				t.Fatalf("Delegation: %v", err)
			}
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			var fields map[string]any
			if err := json.Unmarshal(b, &fields); err != nil {
				t.Fatal(err)
			}
			want := positive
			if opt.Store == "redis" {
				want = append(want[:len(want):len(want)], "fan_server_cpu_s")
			}
			for _, k := range want {
				if v, ok := fields[k].(float64); !ok || v <= 0 {
					t.Errorf("%s = %v, want a positive number (all: %s)", k, fields[k], b)
				}
			}
			for _, k := range present {
				if _, ok := fields[k].(float64); !ok {
					t.Errorf("%s = %v, want a number (all: %s)", k, fields[k], b)
				}
			}
			if res.Store != opt.Store || res.Children != 9 {
				t.Errorf("store, children = %q, %d; want %q, 9", res.Store, res.Children, opt.Store)
			}
			assertCleanedUp(t, QueueOptions{Store: opt.Store, RedisURL: opt.RedisURL, TempDir: opt.TempDir})
			if left, err := os.ReadDir(opt.TempDir); err != nil || len(left) != 0 {
				t.Errorf("temp dir keeps %v after the run (%v)", left, err)
			}
		})
	}
}

func TestDelegationRejectsBadOptions(t *testing.T) {
	tests := []struct {
		desc string
		opt  DelegationOptions
	}{
		{desc: "unknown store", opt: DelegationOptions{Store: "mysql"}},
		{desc: "negative turns", opt: DelegationOptions{Store: "sqlite", DispatchTurns: -1}},
		{desc: "negative sessions", opt: DelegationOptions{Store: "sqlite", Sessions: -3}},
		{desc: "negative tasks", opt: DelegationOptions{Store: "sqlite", Tasks: -1}},
		{desc: "negative delay", opt: DelegationOptions{Store: "sqlite", ChildDelay: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if _, err := Delegation(context.Background(), tt.opt); err == nil {
				t.Fatal("Delegation succeeded, want an error")
			}
		})
	}
}
