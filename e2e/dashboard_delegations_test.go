package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
)

// Through a real gateway and a real browser: delegations started
// through the API show on the open Delegations page without a reload,
// a sub-agent running in its tool with its cost, an orchestrator's
// worker under it; a click shows a sub-agent's transcript, live; Stop
// on the page stops one, and it shows cancelled; Stop all ends an
// orchestrator and its worker.
func TestDashboardDelegations(t *testing.T) {
	const (
		key         = "dash-key-0123456789"
		orchestrate = "orchestrate the digging"
	)
	model := testkit.NewModelServer(t)
	// A sub-agent runs a command that lasts until it is stopped; an
	// orchestrator has a worker do so; the parent takes the results as
	// they come.
	sleep, _ := json.Marshal(map[string]string{"command": "sleep 300"})
	model.Respond(func(r testkit.RecordedRequest) testkit.Step {
		if !isChild(r) {
			return testkit.Reply("noted")
		}
		goal := strings.TrimPrefix(strings.SplitN(r.LastUser(), "\n", 2)[0], "Goal: ")
		switch {
		case r.Messages[len(r.Messages)-1].Role == "tool":
			return testkit.Reply("done: " + goal)
		case goal == orchestrate:
			return testkit.CallTools(testkit.ToolCall("delegate_task", `{"tasks":[{"goal":"dig deeper"}]}`))
		}
		return testkit.CallTools(testkit.ToolCall("terminal", string(sleep)))
	})
	h := startUIGateway(t, model, key, &adaptertest.Adapter{Name: "chatfake"}, func(c *config.Config) {
		c.Delegation.OwnerTTL = config.MinOwnerTTL // its progress recorded every second
		c.Model.Prices = map[string]config.Price{"test-model": {Input: 3, Output: 15}}
		c.Delegation.MaxSpawnDepth = 2 // an orchestrator's workers
	})

	p := openPage(t)
	p.signIn(h.base, key, "")
	p.show("delegations")
	p.until(`document.getElementById('page').dataset.page === 'delegations' && document.body.innerText.includes('No delegations.')`)
	p.eval(`window.notReloaded = 'yes'`) // gone if the page loads again

	d := startDelegation(t, h, `{"conversation": "dl", "goal": "sleep on it"}`)
	child := d.Children[0].ID
	row := fmt.Sprintf(`document.querySelector('#deleg-list tr.child[data-id=%q]')`, child)
	orch := startDelegation(t, h, `{"conversation": "orch", "goal": "`+orchestrate+`", "role": "orchestrator"}`)
	worker := fmt.Sprintf(`document.querySelector('.deleg[data-id=%q] tr.child td.depth1')`, orch.ID)

	// Its sub-agent shows running in its tool, without a reload.
	p.until(fmt.Sprintf(`!!%[1]s && %[1]s.querySelector('.status').textContent === 'running' && %[1]s.querySelector('td.tool').textContent === 'terminal'`, row))
	if got := p.eval(`String(window.notReloaded)`); got != "yes" {
		t.Errorf("the page was loaded again to show the delegation")
	}
	text := p.text(fmt.Sprintf(`.deleg[data-id=%q]`, d.ID))
	p.until(fmt.Sprintf(`%s.textContent.includes('$0.')`, row)) // its cost so far, priced
	// The orchestrator's worker under it, in its own tool.
	p.until(fmt.Sprintf(`!!%[1]s && %[1]s.parentElement.querySelector('.status').textContent === 'running' && %[1]s.parentElement.querySelector('td.tool').textContent === 'terminal'`, worker))
	if got := p.text(fmt.Sprintf(`.deleg[data-id=%q]`, orch.ID)); !strings.Contains(got, orchestrate) || !strings.Contains(got, "dig deeper") {
		t.Errorf("the orchestrator's delegation on the page %q, want it and its worker", got)
	}
	for _, want := range []string{d.ID, "api:dl", "sleep on it", "0 of 1 done", "Stop all"} {
		if !strings.Contains(text, want) {
			t.Errorf("the delegation on the page %q has no %q", text, want)
		}
	}
	p.shot("delegations")

	// A click on the sub-agent opens its transcript, which follows it.
	p.run(chromedp.Click(chromedp.CSS(fmt.Sprintf(`#deleg-list tr.child[data-id=%q] td.agent`, child))))
	p.until(`!document.getElementById('deleg-drawer').hidden && document.getElementById('deleg-transcript').textContent.includes('-> terminal(')`)
	if got := p.text("#deleg-transcript"); !strings.Contains(got, "started "+child) || !strings.Contains(got, "sleep 300") {
		t.Errorf("the transcript %q, want the sub-agent's start and its command", got)
	}
	p.shot("delegations-transcript")

	// Stop on the page: the sub-agent ends cancelled, its command with it.
	p.run(chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-action="stop"][data-id=%q]`, child))))
	p.until(`document.getElementById('deleg-msg').textContent !== ''`)
	if got := p.text("#deleg-msg"); got != "Stopping: "+child {
		t.Errorf("after Stop the page says %q, want Stopping: %s", got, child)
	}
	p.until(fmt.Sprintf(`!!%[1]s && %[1]s.querySelector('.status').textContent === 'cancelled'`, row))
	p.until(`document.getElementById('deleg-transcript').textContent.includes('ended cancelled')`)
	if p.eval(fmt.Sprintf(`String(!!document.querySelector('button[data-action="stop"][data-id=%q]'))`, child)) != "false" {
		t.Errorf("the stopped sub-agent still has a Stop button")
	}
	code, body := h.do("GET", "/api/v1/delegations/"+d.ID, "")
	if code != http.StatusOK || !strings.Contains(body, `"status":"cancelled"`) || !strings.Contains(body, "cancelled from the API") {
		t.Errorf("the delegation after the stop: %d %s, want it cancelled from the API", code, body)
	}
	testkit.EventuallyWithin(t, 30*time.Second, func() (bool, string) {
		_, body := h.do("GET", "/api/v1/conversations/dl/timeline", "")
		return strings.Contains(body, "noted"), "the cancelled result never came back to the conversation: " + body
	})

	// Stop all: the orchestrator ends, and its worker with it.
	p.run(chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-action="stop-all"][data-id=%q]`, orch.ID))))
	p.until(fmt.Sprintf(`!document.querySelector('button[data-action="stop-all"][data-id=%q]')`, orch.ID))
	p.until(fmt.Sprintf(`%s.parentElement.querySelector('.status').textContent !== 'running'`, worker))
	if got := p.text(fmt.Sprintf(`.deleg[data-id=%q] h3`, orch.ID)); !strings.Contains(got, "cancelled") {
		t.Errorf("the orchestrator's delegation after Stop all: %q, want cancelled", got)
	}
	p.clean("delegations")
}

// startedDelegation is what a start of a delegation answers, in part.
type startedDelegation struct {
	ID       string `json:"id"`
	Children []struct {
		ID string `json:"id"`
	} `json:"children"`
}

// startDelegation starts a delegation of one task through the API.
func startDelegation(t *testing.T, h *uiGateway, body string) startedDelegation {
	t.Helper()
	code, answer := h.do("POST", "/api/v1/delegations", body)
	var d startedDelegation
	if err := json.Unmarshal([]byte(answer), &d); code != http.StatusCreated || err != nil || len(d.Children) != 1 {
		t.Fatalf("start a delegation: %d %s (%v)", code, answer, err)
	}
	return d
}
