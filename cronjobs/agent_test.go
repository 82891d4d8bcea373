package cronjobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/sessions/agent"
	"github.com/heraldgw/herald/tools"
)

// A fire runs with its job's toolsets, the live MCP one among them: a
// job naming mcp is offered the MCP servers' tools, one naming other
// toolsets is not, and one naming none has the gateway's.
func TestFireRunsWithTheJobsToolsets(t *testing.T) {
	model := testkit.NewModelServer(t)
	client, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: model.URL(), Model: "m", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	live, err := reg.RegisterLive("mcp")
	if err != nil {
		t.Fatal(err)
	}
	// A fire's model here only reads the tools it is offered.
	never := func(context.Context, *tools.Turn, json.RawMessage) (tools.Result, error) {
		return tools.Result{}, errors.New("not called")
	}
	look := tools.Tool{Name: "look", Description: "a fixed tool", Handler: never}
	lookup := tools.Tool{Name: "mcp_lookup", Description: "an MCP server's", Handler: never}
	if err := errors.Join(reg.Register("files", look), live.Replace(lookup)); err != nil {
		t.Fatal(err)
	}
	fire := cronjobs.TurnAgent(&agent.Agent{Client: client, Model: "m", HistoryBudget: -1, Logger: slog.New(slog.DiscardHandler)}, reg, []string{"files", "mcp"})
	tests := []struct {
		desc     string
		toolsets []string
		want     []string
	}{
		{"a job naming mcp", []string{"mcp"}, []string{"mcp_lookup"}},
		{"a job naming other toolsets", []string{"files"}, []string{"look"}},
		{"a job naming none", nil, []string{"look", "mcp_lookup"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			before := model.Count()
			if _, err := fire(context.Background(), cronjobs.Job{ID: "job_1", Toolsets: tc.toolsets}, cronjobs.Run{ID: "run_1"}, "check"); err != nil {
				t.Fatal(err)
			}
			reqs := model.Requests()[before:]
			if len(reqs) != 1 {
				t.Fatalf("%d model requests, want 1", len(reqs))
			}
			var got []string
			for _, tl := range reqs[0].Tools {
				got = append(got, tl.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("offered %v, want %v", got, tc.want)
			}
		})
	}
}

// A job may name mcp (the MCP servers' live toolset, always there, so a
// server a reload adds serves it), and not a toolset no part registers:
// that is said when the job is made.
func TestJobToolsetsAreCheckedWhenMade(t *testing.T) {
	cfg := config.Default()
	cfg.Home = t.TempDir()
	spec := cronjobs.Spec{Name: "mcp", Schedule: "@daily", Prompt: "p", Toolsets: []string{"core", "mcp"}}
	j, err := cronjobs.ManagerFor(cfg, nil, nil).New(spec)
	if err != nil || !slices.Equal(j.Toolsets, spec.Toolsets) {
		t.Errorf("naming mcp: %+v, %v; want the job with its toolsets", j.Toolsets, err)
	}
	spec.Toolsets = []string{"core", "web"}
	_, err = cronjobs.ManagerFor(cfg, nil, nil).New(spec)
	if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), `unknown toolset "web"`) {
		t.Errorf("naming web: %v, want Invalid naming web unknown", err)
	}
}
