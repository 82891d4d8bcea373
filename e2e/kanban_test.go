package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/kanban"
)

// kanbanWorker is a CLI lane's worker: it holds a lock of its card for
// as long as it (and the sleep it starts) runs, so a second worker of the
// same card while the first lives writes an "overlap" line; it logs its
// start and end, sleeps $E2E_WORK seconds and exits 0 (the lane has
// exit_zero_completes).
const kanbanWorker = `
log="$E2E_KANBAN_LOG"
exec 9>"$E2E_KANBAN_LOCKS/$HERALD_KANBAN_TASK"
if ! flock -n 9; then
  echo "overlap $HERALD_KANBAN_TASK $$" >> "$log"
  exit 1
fi
echo "start $HERALD_KANBAN_TASK $E2E_GATEWAY $$" >> "$log"
sleep "${E2E_WORK:-0}"
echo "end $HERALD_KANBAN_TASK $E2E_GATEWAY $$" >> "$log"
echo "worked $HERALD_KANBAN_TASK"
`

// kanbanConfig is the kanban section of the tests' gateways: one CLI
// lane, sh, running script, and a look at the boards every second.
func kanbanConfig(script string) string { return kanbanConfigEvery(script, 1) }

func kanbanConfigEvery(script string, interval int) string {
	return fmt.Sprintf(`kanban:
  dispatch_interval_seconds: %d
  claim_ttl_seconds: 3
  max_spawn: 40
  lanes:
    sh:
      command: %s
      exit_zero_completes: true
tools:
  env_passthrough: [E2E_KANBAN_LOG, E2E_KANBAN_LOCKS, E2E_WORK, E2E_GATEWAY]
`, interval, script)
}

type kanbanRig struct {
	t      *testing.T
	place  redisPlace
	model  *testkit.ModelServer
	svc    *kanban.Service
	log    string
	script string
	homes  []string
	env    []string
}

func newKanbanRig(t *testing.T, gateways int, work string) *kanbanRig {
	t.Helper()
	return newKanbanRigAt(t, oneRedis(t), gateways, work)
}

func newKanbanRigAt(t *testing.T, place redisPlace, gateways int, work string) *kanbanRig {
	t.Helper()
	r := &kanbanRig{t: t, place: place}
	dir := t.TempDir()
	r.log = filepath.Join(dir, "runs.log")
	locks := filepath.Join(dir, "locks")
	if err := os.MkdirAll(locks, 0o755); err != nil {
		t.Fatal(err)
	}
	r.script = filepath.Join(dir, "worker.sh")
	if err := os.WriteFile(r.script, []byte(kanbanWorker), 0o600); err != nil {
		t.Fatal(err)
	}
	r.env = []string{"E2E_KANBAN_LOG=" + r.log, "E2E_KANBAN_LOCKS=" + locks, "E2E_WORK=" + work}
	r.model = testkit.NewModelServer(t)
	for range gateways {
		home := t.TempDir()
		writeConfig(t, home, sharedConfig(place, r.model)+kanbanConfig(r.script))
		r.homes = append(r.homes, home)
	}
	r.svc = &kanban.Service{Store: place.open(t).Kanban()}
	return r
}

func (r *kanbanRig) start(i int) *child {
	r.t.Helper()
	c := startChild(r.t, fmt.Sprint("gw", i), r.homes[i], append(r.env, fmt.Sprintf("E2E_GATEWAY=gw%d", i))...)
	r.t.Cleanup(func() { c.kill() })
	return c
}

func (r *kanbanRig) cards(n int) []string {
	r.t.Helper()
	var ids []string
	for i := range n {
		k, _, err := r.svc.Create(context.Background(), kanban.CreateSpec{Title: fmt.Sprint("card ", i), Assignee: "sh"})
		if err != nil {
			r.t.Fatal(err)
		}
		ids = append(ids, k.ID)
	}
	return ids
}

// runs reads the workers' log: per card its starts, and the overlaps.
func (r *kanbanRig) runs() (starts map[string][]string, overlaps []string) {
	b, _ := os.ReadFile(r.log)
	starts = map[string][]string{}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "start":
			starts[f[1]] = append(starts[f[1]], f[2])
		case len(f) >= 2 && f[0] == "overlap":
			overlaps = append(overlaps, strings.TrimSpace(line))
		}
	}
	return starts, overlaps
}

func (r *kanbanRig) done(ids []string) (int, string) {
	n := 0
	var notDone string
	for _, id := range ids {
		k, err := r.svc.Store.Card(context.Background(), id)
		if err == nil && k.Status == kanban.StatusDone {
			n++
		} else if notDone == "" && err == nil {
			notDone = fmt.Sprintf("%s is %s (%s)", id, k.Status, k.LastError)
		}
	}
	return n, notDone
}

// Three gateways on one redis-server share a board of 200 cards: each
// card is worked once, by one of them, and none is left behind.
func TestKanbanThreeGatewaysRunEachCardOnce(t *testing.T) {
	r := newKanbanRig(t, 3, "0")
	ids := r.cards(200)
	for i := range 3 {
		r.start(i)
	}
	testkit.EventuallyWithin(t, 60*time.Second, func() (bool, string) {
		n, notDone := r.done(ids)
		return n == len(ids), fmt.Sprintf("%d of %d cards done; %s", n, len(ids), notDone)
	})
	starts, overlaps := r.runs()
	if len(overlaps) > 0 {
		t.Errorf("two workers on one card at once: %v", overlaps)
	}
	by := map[string]int{}
	for _, id := range ids {
		if len(starts[id]) != 1 {
			t.Errorf("card %s worked %d times (%v), want once", id, len(starts[id]), starts[id])
		}
		for _, g := range starts[id] {
			by[g]++
		}
	}
	t.Logf("cards worked per gateway: %v", by)
}

// A gateway SIGKILLed while its CLI workers run: every card is still
// done, its workers' cards reclaimed by the survivors (or by it,
// restarted), and no card ever has two workers at once — a worker the
// dead gateway left running is killed before its card is run again.
func TestKanbanGatewayKilledWhileWorkersRun(t *testing.T) {
	kanbanGatewayKilled(t, oneRedis(t))
}

// TestKanbanOnARedisClusterWithAPrimaryKilled is the same run on a Redis
// Cluster, where the primary of some of the shards is SIGKILLed too,
// right after the gateway: still one worker a card at a time, every card
// done.
func TestKanbanOnARedisClusterWithAPrimaryKilled(t *testing.T) {
	kanbanGatewayKilled(t, aRedisCluster(t))
}

func kanbanGatewayKilled(t *testing.T, place redisPlace) {
	// The workers outlive the dead gateway's claims (3 s), so the
	// survivors find them running.
	r := newKanbanRigAt(t, place, 2, "7")
	ids := r.cards(6)
	a := r.start(0)
	// a claims everything before b starts.
	testkit.EventuallyWithin(t, 30*time.Second, func() (bool, string) {
		starts, _ := r.runs()
		return len(starts) == len(ids), fmt.Sprintf("%d of %d workers started", len(starts), len(ids))
	})
	a.kill()
	if place.isCluster() {
		t.Logf("a primary's failover took %s", place.killPrimary(t))
	}
	r.start(1)
	// a restarted, beside b.
	r.start(0)
	testkit.EventuallyWithin(t, 90*time.Second, func() (bool, string) {
		n, notDone := r.done(ids)
		return n == len(ids), fmt.Sprintf("%d of %d cards done; %s", n, len(ids), notDone)
	})
	starts, overlaps := r.runs()
	if len(overlaps) > 0 {
		t.Errorf("two workers on one card at once: %v", overlaps)
	}
	for _, id := range ids {
		runs, err := r.svc.Store.Runs(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(starts[id]) < 2 || len(runs) < 2 || runs[0].Outcome != kanban.OutcomeCrashed || runs[len(runs)-1].Outcome != kanban.OutcomeCompleted {
			t.Errorf("card %s: workers %v, runs %+v; want the dead gateway's run crashed, then a completed one", id, starts[id], runs)
		}
	}
}

// A card made ready on one instance runs at once on another, though
// neither would look at the boards for an hour: the instance that made
// it ready (a gateway, or the CLI) signals every dispatcher on the store.
func TestKanbanReadyCardWakesTheOtherInstances(t *testing.T) {
	r := newKanbanRig(t, 2, "0")
	writeConfig(t, r.homes[0], sharedConfig(r.place, r.model)+kanbanConfigEvery(r.script, 3600))
	// The second gateway has no lane for the cards: it cannot run them.
	writeConfig(t, r.homes[1], sharedConfig(r.place, r.model)+"kanban:\n  dispatch_interval_seconds: 3600\n")
	seed := r.cards(1)
	r.start(0)
	// Its first look, at start, ran the seed card.
	testkit.EventuallyWithin(t, 30*time.Second, func() (bool, string) {
		n, notDone := r.done(seed)
		return n == 1, notDone
	})
	other := r.start(1)
	body := `{"title":"made ready on the other gateway","assignee":"sh"}`
	res, err := http.Post(other.base+"/api/v1/kanban/boards/default/cards", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var viaAPI kanban.Card
	err = json.NewDecoder(res.Body).Decode(&viaAPI)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusCreated || viaAPI.ID == "" {
		t.Fatalf("create over the second gateway's API: %d, %+v, %v", res.StatusCode, viaAPI, err)
	}
	out := runCLI(t, r.homes[0], "kanban", "create", "made ready by the CLI", "--assignee", "sh", "--json")
	var viaCLI kanban.Card
	if err := json.Unmarshal([]byte(out.stdout), &viaCLI); err != nil || viaCLI.ID == "" {
		t.Fatalf("herald kanban create --json: %+v: %v", out, err)
	}
	ids := []string{viaAPI.ID, viaCLI.ID}
	testkit.EventuallyWithin(t, 20*time.Second, func() (bool, string) {
		n, notDone := r.done(ids)
		return n == len(ids), fmt.Sprintf("%d of %d cards done; %s", n, len(ids), notDone)
	})
}
