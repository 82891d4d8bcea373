package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/heraldgw/herald/internal/testkit"
)

// Two `herald gateway` processes on one redis-server: the turn that
// waits for an approval on gw-a runs once the approval is answered
// through gw-b's API, woken by the decision's signal.
func TestApprovalAnsweredOnAnotherGateway(t *testing.T) {
	redis := testkit.StartRedis(t)
	model := testkit.NewModelServer(t)
	model.Respond(commandModel("echo mkfs.ext4"))
	homes := []string{t.TempDir(), t.TempDir()}
	workspace := t.TempDir()
	for _, h := range homes {
		writeConfig(t, h, fmt.Sprintf(`
store:
  backend: redis
  redis_url: %s
  redis_prefix: %q
http:
  addr: 127.0.0.1:0
model:
  base_url: %s
  name: %s
tools:
  workspace: %s
`, redis.URL(), redis.Prefix(), model.URL(), modelName, workspace))
	}
	a := startChild(t, "gw-a", homes[0])
	b := startChild(t, "gw-b", homes[1])

	a.api().mustPost(t, "ap", "format the disk")
	var id string
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		var res struct {
			Approvals []struct{ ID, Action string }
		}
		body := get(t, b.base+"/api/v1/approvals?conversation=ap")
		if json.Unmarshal([]byte(body), &res) != nil || len(res.Approvals) != 1 {
			return false, "gw-b lists " + body
		}
		id = res.Approvals[0].ID
		return res.Approvals[0].Action == "echo mkfs.ext4", "gw-b lists " + body
	})
	res, err := http.Post(b.base+"/api/v1/approvals/"+id, "application/json", strings.NewReader(`{"decision":"once"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST the decision on gw-b: %d", res.StatusCode)
	}
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		items, err := a.api().timeline("ap")
		if err != nil {
			return false, err.Error()
		}
		for _, it := range ofKind(items, kindReply) {
			if strings.Contains(it.Text, `"output":"mkfs.ext4\n"`) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("timeline %v", items)
	})
	if !strings.Contains(a.stderr.String(), "asking approval") || strings.Contains(b.stderr.String(), "asking approval") {
		t.Error("the turn did not wait on gw-a")
	}
}

// get reads url's body, failing the test on a transport error.
func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}
