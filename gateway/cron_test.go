package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
)

// cronModel answers a job's fire with the report "report: <prompt>",
// and everything else as script says (by the last user message).
func cronModel(script func(req testkit.RecordedRequest) (testkit.Step, bool)) testkit.Responder {
	return func(req testkit.RecordedRequest) testkit.Step {
		last := req.LastUser()
		if strings.HasPrefix(last, "This is a run of the scheduled job") {
			_, prompt, _ := strings.Cut(last, "\n\n")
			return testkit.Reply("report: " + prompt)
		}
		if step, ok := script(req); ok {
			return step
		}
		return testkit.Reply("echo: " + last)
	}
}

// post sends text to the API conversation conv.
func (h *gw) post(conv, text string) {
	h.t.Helper()
	body, _ := json.Marshal(map[string]string{"text": text})
	if code, out := h.do("POST", "/api/v1/conversations/"+conv+"/messages", string(body)); code != http.StatusAccepted {
		h.t.Fatalf("post %q: %d %s", text, code, out)
	}
}

// waitItem waits for the timeline of conv to hold an item whose text
// contains want, and returns every item holding it.
func (h *gw) waitItem(conv, want string) []sessions.TimelineItem {
	h.t.Helper()
	var found []sessions.TimelineItem
	testkit.Eventually(h.t, fmt.Sprintf("%q in the timeline of %s", want, conv), func() bool {
		var page struct {
			Items []sessions.TimelineItem `json:"items"`
		}
		_, body := h.do("GET", "/api/v1/conversations/"+conv+"/timeline", "")
		if json.Unmarshal([]byte(body), &page) != nil {
			return false
		}
		found = nil
		for _, it := range page.Items {
			if strings.Contains(it.Text, want) {
				found = append(found, it)
			}
		}
		return len(found) > 0
	})
	return found
}

// cronJobs lists the jobs through the API.
func (h *gw) cronJobs() []cronjobs.Job {
	h.t.Helper()
	code, body := h.do("GET", "/api/v1/cron/jobs", "")
	var res struct {
		Jobs []cronjobs.Job `json:"jobs"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil {
		h.t.Fatalf("GET /api/v1/cron/jobs: %d %s", code, body)
	}
	return res.Jobs
}

// cronJob reads one job and its runs through the API.
func (h *gw) cronJob(id string) (cronjobs.Job, []cronjobs.Run) {
	h.t.Helper()
	code, body := h.do("GET", "/api/v1/cron/jobs/"+id, "")
	var res struct {
		cronjobs.Job
		Runs []cronjobs.Run `json:"runs"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil {
		h.t.Fatalf("GET /api/v1/cron/jobs/%s: %d %s", id, code, body)
	}
	return res.Job, res.Runs
}

// /cron in a chat makes, lists, runs and removes jobs; a run's report
// comes back to the chat it was made from, once, headed by its name;
// the API lists the job and its runs.
func TestGatewayCronCommandAndAPI(t *testing.T) {
	for _, backend := range []string{config.BackendSQLite, config.BackendRedis} {
		t.Run(backend, func(t *testing.T) {
			model := testkit.NewModelServer(t)
			model.Respond(cronModel(func(testkit.RecordedRequest) (testkit.Step, bool) { return testkit.Step{}, false }))
			cfg := testConfig(t, model)
			cfg.HTTP.APIKey = "k-cron"
			if backend == config.BackendRedis {
				cfg.Store.Backend, cfg.Store.RedisURL = backend, testkit.StartRedis(t).URL()
			}
			h := startGateway(t, cfg, Options{})

			h.post("cr", "/cron add every banana say hi")
			h.waitItem("cr", "banana")
			if jobs := h.cronJobs(); len(jobs) != 0 {
				t.Fatalf("a refused /cron add made jobs: %+v", jobs)
			}

			h.post("cr", "/cron add every 1h summarize the news")
			h.waitItem("cr", "Scheduled")
			jobs := h.cronJobs()
			if len(jobs) != 1 {
				t.Fatalf("jobs after /cron add = %+v, want one", jobs)
			}
			j := jobs[0]
			if j.Prompt != "summarize the news" || j.Origin == nil || j.Origin.Conv != "api:cr" || j.Schedule.Kind != cronjobs.KindInterval {
				t.Fatalf("job made by /cron add = %+v", j)
			}
			h.post("cr", "/cron list")
			h.waitItem("cr", j.ID)

			h.post("cr", "/cron run "+j.ID)
			reports := h.waitItem("cr", "report: summarize the news")
			if len(reports) != 1 || !strings.Contains(reports[0].Text, j.Name) {
				t.Fatalf("reports in the chat = %+v, want one headed by %q", reports, j.Name)
			}
			var runs []cronjobs.Run
			testkit.Eventually(t, "the run's delivery recorded", func() bool {
				_, runs = h.cronJob(j.ID)
				return len(runs) == 1 && runs[0].Delivery == cronjobs.DeliveryDelivered
			})
			if r := runs[0]; !r.Manual || r.Status != cronjobs.StatusOK {
				t.Errorf("run = %+v, want a manual run that went well", r)
			}

			// The API fires it too; behind the key like the rest.
			if code, _ := h.do("POST", "/api/v1/cron/jobs/"+j.ID+"/run", ""); code != http.StatusAccepted {
				t.Fatalf("POST run: %d", code)
			}
			testkit.Eventually(t, "the API's run", func() bool {
				_, runs = h.cronJob(j.ID)
				return len(runs) == 2 && runs[0].Delivery == cronjobs.DeliveryDelivered
			})
			if code, _ := h.do("POST", "/api/v1/cron/jobs/job_none/run", ""); code != http.StatusNotFound {
				t.Errorf("POST run of an unknown job: %d, want 404", code)
			}
			// A run's output, as it was saved; one of no run is 404.
			code, body := h.do("GET", "/api/v1/cron/jobs/"+j.ID+"/runs/"+runs[0].ID+"/output", "")
			var out struct {
				Output string `json:"output"`
			}
			if code != http.StatusOK || json.Unmarshal([]byte(body), &out) != nil || !strings.Contains(out.Output, "report: summarize the news") || !strings.Contains(out.Output, runs[0].ID) {
				t.Errorf("GET a run's output: %d %s", code, body)
			}
			if code, body := h.do("GET", "/api/v1/cron/jobs/"+j.ID+"/runs/run_none/output", ""); code != http.StatusNotFound || !strings.Contains(body, "run_none") {
				t.Errorf("GET the output of no run: %d %s, want 404 naming it", code, body)
			}

			// Paused and resumed through the API.
			if code, body := h.do("POST", "/api/v1/cron/jobs/"+j.ID+"/pause", ""); code != http.StatusOK || !strings.Contains(body, `"state":"paused"`) {
				t.Errorf("POST pause: %d %s", code, body)
			}
			if got, _ := h.cronJob(j.ID); got.Enabled || got.State != cronjobs.StatePaused {
				t.Errorf("job after the API's pause = %+v", got)
			}
			if code, body := h.do("POST", "/api/v1/cron/jobs/"+j.ID+"/resume", ""); code != http.StatusOK {
				t.Errorf("POST resume: %d %s", code, body)
			}
			if got, _ := h.cronJob(j.ID); !got.Enabled || got.State != cronjobs.StateScheduled {
				t.Errorf("job after the API's resume = %+v", got)
			}
			if code, _ := h.do("POST", "/api/v1/cron/jobs/job_none/pause", ""); code != http.StatusNotFound {
				t.Errorf("POST pause of an unknown job: %d, want 404", code)
			}
			h.key = ""
			for _, call := range []struct{ method, path string }{
				{"GET", "/api/v1/cron/jobs"},
				{"POST", "/api/v1/cron/jobs/" + j.ID + "/pause"},
				{"POST", "/api/v1/cron/jobs/" + j.ID + "/resume"},
				{"GET", "/api/v1/cron/jobs/" + j.ID + "/runs/" + runs[0].ID + "/output"},
			} {
				if code, _ := h.do(call.method, call.path, ""); code != http.StatusUnauthorized {
					t.Errorf("%s %s without the key: %d, want 401", call.method, call.path, code)
				}
			}
			h.key = cfg.HTTP.APIKey

			h.post("cr", "/cron pause "+j.ID)
			h.waitItem("cr", "Paused")
			if got, _ := h.cronJob(j.ID); got.Enabled || got.State != cronjobs.StatePaused {
				t.Errorf("job after /cron pause = %+v", got)
			}
			h.post("cr", "/cron remove "+j.ID)
			h.waitItem("cr", "Removed")
			if code, _ := h.do("GET", "/api/v1/cron/jobs/"+j.ID, ""); code != http.StatusNotFound {
				t.Errorf("GET a removed job: %d, want 404", code)
			}
			if reports := h.waitItem("cr", "report: summarize the news"); len(reports) != 2 {
				t.Errorf("%d reports in the chat, want 2 (one per run)", len(reports))
			}
		})
	}
}

// The agent's cronjob tool makes a job with the turn's commit,
// remembering the chat; a bad call is refused with a reason the model
// reads; another conversation neither sees nor touches the job.
func TestGatewayCronjobTool(t *testing.T) {
	model := testkit.NewModelServer(t)
	call := func(args string) testkit.Step {
		return testkit.Step{ToolCalls: []testkit.ModelToolCall{testkit.ToolCall(cronjobs.ToolName, args)}}
	}
	model.Respond(cronModel(func(req testkit.RecordedRequest) (testkit.Step, bool) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "tool" {
			return testkit.Reply("tool said: " + last.Content), true
		}
		switch req.LastUser() {
		case "every morning":
			return call(`{"action":"create","name":"standup","schedule":"0 9 * * *","prompt":"list today's meetings"}`), true
		case "badly":
			return call(`{"action":"create","name":"x","schedule":"every banana","prompt":"p"}`), true
		case "list":
			return call(`{"action":"list"}`), true
		}
		if id, ok := strings.CutPrefix(req.LastUser(), "run "); ok {
			return call(`{"action":"run","job_id":"` + id + `"}`), true
		}
		return testkit.Step{}, false
	}))
	h := startGateway(t, testConfig(t, model), Options{})

	if got := h.chat("tl", "every morning"); !strings.Contains(got, `"created"`) {
		t.Fatalf("reply to a create = %q", got)
	}
	jobs := h.cronJobs()
	if len(jobs) != 1 {
		t.Fatalf("jobs after the tool's create = %+v", jobs)
	}
	j := jobs[0]
	if j.Name != "standup" || j.Origin == nil || j.Origin.Conv != "api:tl" || j.Deliver != "" || j.Schedule.Kind != cronjobs.KindCron {
		t.Fatalf("job the tool made = %+v", j)
	}
	if got := h.chat("tl", "badly"); !strings.Contains(got, "banana") {
		t.Errorf("reply to a bad create = %q, want the reason", got)
	}
	if n := len(h.cronJobs()); n != 1 {
		t.Errorf("%d jobs after a bad create, want 1", n)
	}
	if got := h.chat("other", "list"); strings.Contains(got, j.ID) {
		t.Errorf("another conversation lists the job: %q", got)
	}
	if got := h.chat("other", "run "+j.ID); !strings.Contains(got, "not found") && !strings.Contains(got, "no cron job") {
		t.Errorf("another conversation ran the job: %q", got)
	}
	if got := h.chat("tl", "run "+j.ID); !strings.Contains(got, "run done") {
		t.Fatalf("reply to run = %q", got)
	}
	reports := h.waitItem("tl", "report: list today's meetings")
	if len(reports) != 1 {
		t.Errorf("reports = %+v, want one", reports)
	}
	// A fire runs alone, without the tools that need a conversation.
	for _, req := range model.Requests() {
		if !strings.HasPrefix(req.LastUser(), "This is a run of the scheduled job") {
			continue
		}
		for _, tool := range req.Tools {
			if tool.Name == cronjobs.ToolName || tool.Name == "delegate_task" || tool.Name == "clarify" {
				t.Errorf("a fire was offered %s", tool.Name)
			}
		}
		for _, m := range req.Messages {
			if m.Role == "user" && strings.Contains(m.Content, "every morning") {
				t.Errorf("a fire saw the origin conversation's history")
			}
		}
	}
}
