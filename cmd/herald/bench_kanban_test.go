package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchKanban(t *testing.T) {
	tests := []struct {
		desc string
		args []string
		want []string // in the output
	}{
		{
			desc: "text",
			args: []string{"--clients", "1,2"},
			want: []string{"1 clients, 6 cycles (6 done once)", "2 clients, 6 cycles (6 done once)", "target ≥ 1240/s", "dispatch of 4 ready cards", "ratio"},
		},
		{
			desc: "json",
			args: []string{"--clients", "1", "--json"},
			want: []string{`"cycles_per_s":`, `"raw_per_s":`, `"all_started_s":`, `"reference_per_s":620`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			h := newHerald(nil)
			args := append([]string{"bench", "kanban", "--store", "sqlite", "--cycles", "6", "--cards", "4", "--temp-dir", t.TempDir()}, tt.args...)
			if code := h.run(context.Background(), args...); code != 0 {
				t.Fatalf("exit %d; stderr %q", code, h.stderr)
			}
			out := h.stdout.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.HasSuffix(tt.desc, "json") && !json.Valid([]byte(out)) {
				t.Errorf("output is not one JSON object: %s", out)
			}
		})
	}
}

func TestBenchKanbanUsage(t *testing.T) {
	for _, args := range [][]string{{"--store", "mysql"}, {"--cycles", "0"}, {"--clients", "1,0"}, {"--cards", "-1"}} {
		h := newHerald(nil)
		if code := h.run(context.Background(), append([]string{"bench", "kanban"}, args...)...); code != 2 {
			t.Errorf("bench kanban %v: exit %d, want 2; stderr %q", args, code, h.stderr)
		}
	}
}
