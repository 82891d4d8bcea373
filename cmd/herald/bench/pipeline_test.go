package bench

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
)

// As with the queue bench, the figures are not judged, only that both
// runs complete on both backends and report every field.
func TestPipeline(t *testing.T) {
	stores := []struct {
		desc string
		opt  func(t *testing.T) PipelineOptions
	}{
		{
			desc: "sqlite",
			opt: func(t *testing.T) PipelineOptions {
				return PipelineOptions{Store: "sqlite", TempDir: t.TempDir()}
			},
		},
		{
			desc: "redis",
			opt: func(t *testing.T) PipelineOptions {
				return PipelineOptions{Store: "redis", RedisURL: testkit.StartRedis(t).URL()}
			},
		},
	}
	modes := []struct {
		desc   string
		set    func(*PipelineOptions)
		fields []string
	}{
		{
			desc: "throughput",
			set:  func(o *PipelineOptions) { o.Turns, o.Conversations = 60, 4 },
			fields: []string{
				"turns", "conversations", "turns_per_s", "raw_per_s", "ratio",
				"loaded_p50_ms", "loaded_p99_ms", "unloaded_turns", "added_p50_ms", "added_p99_ms", "peak_rss_mb",
				"cpu_us_per_turn", "raw_cpu_us_per_pass",
			},
		},
		{
			// The model a server on loopback, asked through the
			// gateway's client and key pool.
			desc: "inflight over HTTP",
			set: func(o *PipelineOptions) {
				o.InFlight, o.ModelDelay, o.HTTPModel = 20, 20*time.Millisecond, true
			},
			fields: []string{
				"turns", "conversations", "inflight", "model_delay_ms", "turn_workers",
				"delivered_s", "all_started_s", "all_committed_s", "all_done_s", "burst_added_p50_s", "burst_added_p99_s", "peak_rss_mb",
			},
		},
		{
			desc: "inflight",
			set:  func(o *PipelineOptions) { o.InFlight, o.ModelDelay = 50, 20*time.Millisecond },
			fields: []string{
				"turns", "conversations", "inflight", "model_delay_ms", "turn_workers",
				"delivered_s", "all_started_s", "all_committed_s", "all_done_s", "burst_added_p50_s", "burst_added_p99_s", "peak_rss_mb",
				"stacks_mb", "stack_start_kb",
			},
		},
	}
	for _, st := range stores {
		for _, m := range modes {
			t.Run(st.desc+"/"+m.desc, func(t *testing.T) {
				opt := st.opt(t)
				m.set(&opt)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				res, err := Pipeline(ctx, opt)
				if err != nil {
					t.Fatalf("Pipeline: %v", err)
				}
				b, err := json.Marshal(res)
				if err != nil {
					t.Fatal(err)
				}
				var fields map[string]any
				if err := json.Unmarshal(b, &fields); err != nil {
					t.Fatal(err)
				}
				want := m.fields
				if opt.Store == "redis" && m.desc == "throughput" {
					want = append(slices.Clone(want), "server_cpu_us_per_turn", "raw_server_cpu_us_per_pass")
				}
				for _, k := range want {
					if v, ok := fields[k].(float64); !ok || v <= 0 {
						t.Errorf("%s = %v, want a positive number (all: %s)", k, fields[k], b)
					}
				}
				if mode, _, _ := strings.Cut(m.desc, " "); fields["store"] != opt.Store || fields["mode"] != mode {
					t.Errorf("store, mode = %v, %v; want %q, %q", fields["store"], fields["mode"], opt.Store, mode)
				}
				assertCleanedUp(t, QueueOptions{Store: opt.Store, RedisURL: opt.RedisURL, TempDir: opt.TempDir})
			})
		}
	}
}

func TestPipelineRejectsBadOptions(t *testing.T) {
	tests := []struct {
		desc string
		opt  PipelineOptions
	}{
		{desc: "unknown store", opt: PipelineOptions{Store: "mysql"}},
		{desc: "negative turns", opt: PipelineOptions{Store: "sqlite", Turns: -1}},
		{desc: "negative conversations", opt: PipelineOptions{Store: "sqlite", Conversations: -3}},
		{desc: "negative delay", opt: PipelineOptions{Store: "sqlite", ModelDelay: -time.Second}},
		{desc: "fewer turn workers than turns in flight", opt: PipelineOptions{Store: "sqlite", InFlight: 100, TurnWorkers: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if _, err := Pipeline(context.Background(), tt.opt); err == nil {
				t.Fatal("Pipeline succeeded, want an error")
			}
		})
	}
}
