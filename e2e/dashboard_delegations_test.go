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

// Through a real gateway and a real browser: a delegation started
// through the API shows on the open Delegations page without a reload,
// its sub-agent running in its tool; a click shows the sub-agent's
// transcript, live; Stop on the page stops it, and it shows cancelled.
func TestDashboardDelegations(t *testing.T) {
	const key = "dash-key-0123456789"
	model := testkit.NewModelServer(t)
	// The sub-agent runs a command that lasts until it is stopped; the
	// parent takes the results as they come.
	sleep, _ := json.Marshal(map[string]string{"command": "sleep 300"})
	model.Respond(func(r testkit.RecordedRequest) testkit.Step {
		if !isChild(r) {
			return testkit.Reply("noted")
		}
		if last := r.Messages[len(r.Messages)-1]; last.Role == "tool" {
			return testkit.Reply("slept")
		}
		return testkit.CallTools(testkit.ToolCall("terminal", string(sleep)))
	})
	h := startUIGateway(t, model, key, &adaptertest.Adapter{Name: "chatfake"}, func(c *config.Config) {
		c.Delegation.OwnerTTL = config.MinOwnerTTL // its progress recorded every second
		c.Model.Prices = map[string]config.Price{"test-model": {Input: 3, Output: 15}}
	})

	p := openPage(t)
	p.run(chromedp.Navigate(h.base + "/ui/"))
	p.run(chromedp.WaitVisible(chromedp.CSS("#login")))
	p.run(chromedp.SendKeys(chromedp.CSS("#key"), key), chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)))
	p.run(chromedp.WaitVisible(chromedp.CSS("#nav")))
	p.show("delegations")
	p.until(`document.getElementById('page').dataset.page === 'delegations' && document.body.innerText.includes('No delegations.')`)
	p.eval(`window.notReloaded = 'yes'`) // gone if the page loads again

	code, body := h.do("POST", "/api/v1/delegations", `{"conversation": "dl", "goal": "sleep on it"}`)
	if code != http.StatusCreated {
		t.Fatalf("start a delegation: %d %s", code, body)
	}
	var d struct {
		ID       string `json:"id"`
		Children []struct {
			ID string `json:"id"`
		} `json:"children"`
	}
	if err := json.Unmarshal([]byte(body), &d); err != nil || len(d.Children) != 1 {
		t.Fatalf("start answered %s (%v)", body, err)
	}
	child := d.Children[0].ID
	row := fmt.Sprintf(`document.querySelector('#deleg-list tr.child[data-id=%q]')`, child)

	// Its sub-agent shows running in its tool, without a reload.
	p.until(fmt.Sprintf(`!!%[1]s && %[1]s.querySelector('.status').textContent === 'running' && %[1]s.querySelector('td.tool').textContent === 'terminal'`, row))
	if got := p.eval(`String(window.notReloaded)`); got != "yes" {
		t.Errorf("the page was loaded again to show the delegation")
	}
	text := p.text(fmt.Sprintf(`.deleg[data-id=%q]`, d.ID))
	p.until(fmt.Sprintf(`%s.textContent.includes('$0.')`, row)) // its cost so far, priced
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
	code, body = h.do("GET", "/api/v1/delegations/"+d.ID, "")
	if code != http.StatusOK || !strings.Contains(body, `"status":"cancelled"`) || !strings.Contains(body, "cancelled from the API") {
		t.Errorf("the delegation after the stop: %d %s, want it cancelled from the API", code, body)
	}
	testkit.EventuallyWithin(t, 30*time.Second, func() (bool, string) {
		_, body := h.do("GET", "/api/v1/conversations/dl/timeline", "")
		return strings.Contains(body, "noted"), "the cancelled result never came back to the conversation: " + body
	})
	p.clean("delegations")
}
