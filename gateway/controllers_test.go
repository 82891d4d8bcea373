package gateway

import (
	"strings"
	"testing"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
)

// goalModel answers the goal's judge as verdict says, by the number of
// the judgement, and every other request with a reply naming its turn.
func goalModel(verdict func(n int) string) testkit.Responder {
	judged := 0
	return func(req testkit.RecordedRequest) testkit.Step {
		if len(req.Messages) > 0 && strings.HasPrefix(req.Messages[0].Content, "You judge whether an agent has reached a goal") {
			judged++
			return testkit.Reply(verdict(judged))
		}
		return testkit.Reply("worked on: " + req.LastUser())
	}
}

// The goal runs through the gateway: /goal starts it, the scheduler
// queues its continuations, the judge runs on the main model (no
// auxiliary.goal) after each turn, and its end is told in the chat and
// shown by /status.
func TestGatewayGoal(t *testing.T) {
	for _, backend := range []string{config.BackendSQLite, config.BackendRedis} {
		t.Run(backend, func(t *testing.T) {
			model := testkit.NewModelServer(t)
			model.Respond(goalModel(func(n int) string {
				if n < 2 {
					return `{"verdict":"continue"}`
				}
				return `{"verdict":"done","reason":"the haiku has three lines"}`
			}))
			cfg := testConfig(t, model)
			if backend == config.BackendRedis {
				cfg.Store.Backend, cfg.Store.RedisURL = backend, testkit.StartRedis(t).URL()
			}
			h := startGateway(t, cfg, Options{})
			h.post("g", "/goal write a haiku --contract three lines")
			h.waitItem("g", "Goal (active): write a haiku")
			h.waitItem("g", "worked on: Work toward this goal: write a haiku")
			h.waitItem("g", "worked on: Continue working toward the goal: write a haiku")
			h.waitItem("g", "Goal reached: write a haiku\nthe haiku has three lines")
			h.post("g", "/status")
			h.waitItem("g", "Goal (done): write a haiku")
			if n := len(h.waitItem("g", "worked on: Continue working")); n != 1 {
				t.Errorf("continuation turns = %d, want 1", n)
			}
			if n := testkit.MetricValue(t, h.g.metrics.Registry(), "herald_controller_fires_total", "kind=goal", "outcome=queued"); n != 2 {
				t.Errorf("goal fires queued = %v, want 2 (its start and one continuation)", n)
			}
		})
	}
}
