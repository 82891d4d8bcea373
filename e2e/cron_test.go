package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
)

// cronChat is the Telegram chat the tests' jobs deliver to.
const cronChat = 4242

// cronScript is a no-agent job's script: its report names the job and
// the time its fire was scheduled for. With E2E_CRON_LOG set in the
// gateway's environment, each run is logged there as a line "gateway
// job time" (E2E_GATEWAY), so a test sees what ran where, besides what
// was delivered. A gateway started with E2E_CRON_HOLD, a directory,
// holds the fires of each job named by a file in it until the file is
// removed, noting each held fire as a file job@time in the directory
// E2E_CRON_HOLD.held: a test can kill the gateway with fires it claimed
// still running.
const cronScript = `
if [ -n "$E2E_CRON_LOG" ]; then
  echo "$E2E_GATEWAY $HERALD_CRON_JOB $HERALD_CRON_SCHEDULED_AT" >> "$E2E_CRON_LOG"
fi
hold="$E2E_CRON_HOLD/$HERALD_CRON_JOB"
if [ -n "$E2E_CRON_HOLD" ] && [ -e "$hold" ]; then
  touch "$E2E_CRON_HOLD.held/$HERALD_CRON_JOB@$HERALD_CRON_SCHEDULED_AT"
  while [ -e "$hold" ]; do sleep 0.05; done
fi
echo "fired $HERALD_CRON_JOB $HERALD_CRON_SCHEDULED_AT"
`

// firedRE reads a report of cronScript back: the job and the scheduled
// time, in the format the scheduler gives the script.
var firedRE = regexp.MustCompile(`fired (job_[0-9a-f]+) (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)`)

// writeCronScript writes cronScript as a .sh file (run with bash) in a
// directory of its own and returns its path.
func writeCronScript(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fired.sh")
	if err := os.WriteFile(path, []byte(cronScript), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// telegramConfig is the platforms section of a gateway that serves the
// bot of tg, with cronChat as its home channel.
func telegramConfig(tg *telegramfake.Server) string {
	return fmt.Sprintf(`platforms:
  telegram:
    token: %q
    api_url: %s
    home_channel: "%d"
`, tg.Token(), tg.URL(), cronChat)
}

// fireKey is one fire: a job and the time it was scheduled for, as the
// script was told it (RFC 3339, UTC, whole seconds).
type fireKey struct{ job, at string }

func (k fireKey) String() string { return k.job + "@" + k.at }

// firesIn counts the fires reported in chat, and returns the messages
// that are no fire's report (a failure notice).
func firesIn(tg *telegramfake.Server, chat int64) (map[fireKey]int, []string) {
	fires := map[fireKey]int{}
	var other []string
	for _, m := range tg.Sent(chat) {
		sub := firedRE.FindStringSubmatch(m.Text)
		if sub == nil {
			other = append(other, m.Text)
			continue
		}
		fires[fireKey{sub[1], sub[2]}]++
	}
	return fires, other
}

// The cron cluster run: cronJobs jobs firing every cronjobs.MinEvery on
// three gateways sharing one redis-server, one of them killed mid-run.
const (
	cronJobs       = 50
	cronEvery      = 5 * time.Second  // every job's interval
	cronBeforeKill = 10 * time.Second // load: every job fires on the three
	cronAfterKill  = 12 * time.Second // load: past the killed one's claims running out
	// cronHeldFires is how many fires the killed gateway is running when
	// it is killed.
	cronHeldFires = 3
	// cronSettle bounds the wait, once every job is paused, for every fire
	// to be delivered: a killed gateway's fire claims run out within the
	// lease TTL and its outbox claims within 10 s.
	cronSettle = time.Minute
)

// TestCronFiresOnceAcrossThreeGatewaysOneKilled runs cronJobs no-agent
// jobs, added with the CLI, on three gateway processes sharing one
// redis-server, and SIGKILLs one of them while it runs fires it claimed
// and holds a report at its platform, unsent. Every fire of every job,
// from its first to the last before it was paused, reaches the chat
// exactly once: none runs twice among the three, and none is lost with
// the killed one, whose fires a survivor finishes once their claims run
// out.
//
// Sends are at least once (a process killed after the platform took a
// message and before it recorded that sends it again), so the killed
// gateway's platform takes none of its sends: they wait there, unsent,
// and are dropped when it dies. Its reports go out through the others.
func TestCronFiresOnceAcrossThreeGatewaysOneKilled(t *testing.T) {
	t.Parallel()
	cronFiresOnce(t, oneRedis(t))
}

// TestCronFiresOnceOnARedisClusterWithAPrimaryKilled is the same run on a
// Redis Cluster, where, right after gateway A, the primary of some of the
// shards is SIGKILLed too and its replica takes over: still every fire
// once.
func TestCronFiresOnceOnARedisClusterWithAPrimaryKilled(t *testing.T) {
	t.Parallel()
	// The fires' claims outlast the store's outage (the failover, then
	// the dead node's return as a replica): a claim renewed through it
	// keeps its fire, which then runs once.
	place := aRedisCluster(t)
	place.lease = 10 * time.Second
	cronFiresOnce(t, place)
}

func cronFiresOnce(t *testing.T, place redisPlace) {
	model := testkit.NewModelServer(t)
	tg := telegramfake.New(t, "")     // the chat's platform, for B and C
	doomed := telegramfake.New(t, "") // A's: it takes none of A's sends
	doomed.Hold("sendMessage")

	// A holds the fires of the jobs named in hold (cronScript).
	hold := filepath.Join(t.TempDir(), "hold")
	for _, dir := range []string{hold, hold + ".held"} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The scripts A leaves running when it is killed end once the hold
	// is gone.
	t.Cleanup(func() { os.RemoveAll(hold) })
	ranLog := filepath.Join(t.TempDir(), "ran.log")

	var gws [3]*child
	var homes [3]string
	for k, name := range []string{"gateway A", "gateway B", "gateway C"} {
		platform, env := tg, []string{"E2E_CRON_LOG=" + ranLog, "E2E_GATEWAY=" + name[len("gateway "):]}
		if k == 0 {
			platform, env = doomed, append(env, "E2E_CRON_HOLD="+hold)
		}
		homes[k] = t.TempDir()
		writeConfig(t, homes[k], sharedConfig(place, model)+telegramConfig(platform)+
			"tools:\n  env_passthrough: [E2E_CRON_LOG, E2E_GATEWAY, E2E_CRON_HOLD]\n")
		gws[k] = startChild(t, name, homes[k], env...)
	}
	cli := homes[1] // the CLI runs from B's config: the same store

	script := writeCronScript(t)
	started := time.Now()
	ids := make([]string, cronJobs)
	for i := range ids {
		var j cronjobs.Job
		cliJSON(t, cli, &j, "cron", "add", "--name", fmt.Sprintf("j%02d", i), "--schedule", "every "+cronEvery.String(),
			"--script", script, "--no-agent", "--deliver", fmt.Sprintf("telegram:%d", cronChat))
		ids[i] = j.ID
	}
	added := time.Since(started)
	time.Sleep(cronBeforeKill)

	// From now on A holds the fires it claims of every other job; the
	// others' reports it queues and takes to send wait at its platform.
	// Once it holds a few of each, it is killed.
	for i := 0; i < len(ids); i += 2 {
		if err := os.WriteFile(filepath.Join(hold, ids[i]), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var held []string
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		held = heldFires(t, hold)
		sending := doomed.Holding("sendMessage")
		return len(held) >= cronHeldFires && sending > 0,
			fmt.Sprintf("gateway A holds %d fires (want %d) and %d sends (want one)", len(held), cronHeldFires, sending)
	})
	gws[0].kill()
	killedAt := time.Since(started)
	// On a cluster a primary dies too. A fire due while its shard has no
	// primary with a replica (the failover, then the dead node's return
	// as the new primary's replica, which every commit waits for) runs
	// late; one later than its job's interval gives way to the job's next
	// fire, as after any downtime: such a fire may be missing, never
	// doubled.
	var failover time.Duration
	var outageFrom, outageTo time.Time
	if place.isCluster() {
		outageFrom = time.Now()
		failover = place.killPrimary(t)
		outageTo = time.Now()
	}
	skipped := map[fireKey]bool{}
	excused := func(k fireKey) bool {
		at, err := time.Parse(time.RFC3339, k.at)
		if err != nil || outageFrom.IsZero() || !at.After(outageFrom.Add(-cronEvery)) || !at.Before(outageTo.Add(cronEvery)) {
			return false
		}
		return len(ranFires(t, ranLog)[k]) == 0 // a fire that ran must be delivered
	}
	held = heldFires(t, hold)
	if err := os.RemoveAll(hold); err != nil {
		t.Fatal(err)
	}
	time.Sleep(cronAfterKill)

	// The schedules stop, so that what must have arrived is fixed: every
	// fire of a job from its first to the one before its next run.
	for _, id := range ids {
		var j cronjobs.Job
		if cliJSON(t, cli, &j, "cron", "pause", id); j.State != cronjobs.StatePaused {
			t.Fatalf("cron pause %s printed %+v", id, j)
		}
	}
	paused := time.Since(started)

	// Every fire delivered, nothing left in the outbox. A fire that read
	// its job just before the pause may move the job on once more, so the
	// wait is made again after a pause of its own; that pause also lets
	// a second copy of a report come, which would within a delivery's
	// round trip.
	var want map[fireKey]bool
	var got map[fireKey]int
	var other []string
	settled := func() (bool, string) {
		var jobs []cronjobs.Job
		cliJSON(t, cli, &jobs, "cron", "list")
		want = wantFires(jobs)
		got, other = firesIn(tg, cronChat)
		for k := range want {
			if got[k] == 0 && excused(k) {
				delete(want, k)
				skipped[k] = true
			}
		}
		var pending []map[string]any
		cliJSON(t, cli, &pending, "outbox", "pending")
		var missing []string
		for k := range want {
			if got[k] == 0 {
				missing = append(missing, k.String())
			}
		}
		slices.Sort(missing)
		return len(jobs) == cronJobs && len(missing) == 0 && len(pending) == 0,
			fmt.Sprintf("%d jobs listed, %d messages pending in the outbox, %d of %d fires not delivered: %s",
				len(jobs), len(pending), len(missing), len(want), strings.Join(upTo(missing, 10), ", "))
	}
	testkit.EventuallyWithin(t, cronSettle, settled)
	time.Sleep(2 * time.Second)
	testkit.EventuallyWithin(t, cronSettle, settled)

	for k, n := range got {
		switch {
		case !want[k]:
			t.Errorf("%s was delivered %d times; it is no fire of its job's schedule before it was paused", k, n)
		case n != 1:
			t.Errorf("%s was delivered %d times, want once", k, n)
		}
	}
	for k := range want {
		if got[k] == 0 {
			t.Errorf("%s was never delivered", k)
		}
	}
	if len(other) > 0 {
		t.Errorf("the chat got %d messages that are no report: %q", len(other), upTo(other, 5))
	}
	if sent := doomed.Sent(cronChat); len(sent) > 0 {
		t.Errorf("gateway A's platform took %d sends, want none", len(sent))
	}
	var dead []map[string]any
	if cliJSON(t, cli, &dead, "outbox", "dead"); len(dead) > 0 {
		t.Errorf("the outbox has %d dead letters: %v", len(dead), dead)
	}

	// Each fire ran once, on one gateway; one A was running when it was
	// killed ran again, once, on a survivor.
	ran := ranFires(t, ranLog)
	for k := range want {
		on := ran[k]
		switch {
		case len(on) == 1:
		case len(on) == 2 && on[0] == "A" && on[1] != "A":
		default:
			t.Errorf("%s ran on %q; want one gateway, or A (killed) and then a survivor", k, on)
		}
	}
	for _, name := range held {
		job, at, _ := strings.Cut(name, "@")
		if on := ran[fireKey{job, at}]; len(on) != 2 {
			t.Errorf("%s, which gateway A held when it was killed, ran on %q; want A and a survivor", fireKey{job, at}, on)
		}
	}

	// The fires A held when it died were finished by a survivor, once,
	// and their runs say so.
	finished := strings.Count(gws[1].stderr.String()+gws[2].stderr.String(), "finishing a cron fire whose instance died")
	if finished < len(held) {
		t.Errorf("the survivors finished %d fires of a dead instance; gateway A held %d", finished, len(held))
	}
	for _, name := range held {
		job, at, _ := strings.Cut(name, "@")
		k := fireKey{job, at}
		if got[k] != 1 {
			t.Errorf("%s, which gateway A held when it was killed, was delivered %d times, want once", k, got[k])
		}
		var runs []cronjobs.Run
		cliJSON(t, cli, &runs, "cron", "runs", job)
		i := slices.IndexFunc(runs, func(r cronjobs.Run) bool { return r.ScheduledAt.UTC().Format(time.RFC3339) == at })
		if i < 0 {
			t.Errorf("cron runs %s has no run scheduled at %s: %+v", job, at, runs)
			continue
		}
		if r := runs[i]; r.Status != cronjobs.StatusOK || r.Delivery != cronjobs.DeliveryDelivered {
			t.Errorf("the run of %s is %+v; want ok and delivered", k, r)
		}
	}
	t.Logf("%s: %d jobs added in %s; %d fires delivered once each; gateway A killed at %s holding %d fires (%d finished by a survivor); a primary's failover %s, %d fires due in its outage of %s gave way to their next; paused at %s, settled at %s",
		place, cronJobs, added.Round(time.Millisecond), len(got), killedAt.Round(time.Millisecond), len(held), finished,
		failover.Round(time.Millisecond), len(skipped), outageTo.Sub(outageFrom).Round(time.Millisecond), paused.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
	for _, g := range gws[1:] {
		g.stop()
	}
}

// wantFires is every fire jobs (interval jobs) had to run: from the
// first, an interval after it was created, to the one before its next
// run.
func wantFires(jobs []cronjobs.Job) map[fireKey]bool {
	want := map[fireKey]bool{}
	for _, j := range jobs {
		for at := j.CreatedAt.Add(j.Schedule.Every); at.Before(j.NextRunAt); at = at.Add(j.Schedule.Every) {
			want[fireKey{j.ID, at.UTC().Format(time.RFC3339)}] = true
		}
	}
	return want
}

// heldFires lists the fires cronScript holds (or held) for hold, as
// job@time.
func heldFires(t *testing.T, hold string) []string {
	t.Helper()
	entries, err := os.ReadDir(hold + ".held")
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, e := range entries {
		held = append(held, e.Name())
	}
	return held
}

// ranFires reads cronScript's log: the gateways each fire ran on, in
// order.
func ranFires(t *testing.T, path string) map[fireKey][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the scripts' log: %v", err)
	}
	ran := map[fireKey][]string{}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("the scripts' log has the line %q", line)
		}
		k := fireKey{f[1], f[2]}
		ran[k] = append(ran[k], f[0])
	}
	return ran
}

// upTo is the first n of s, or s when it is shorter.
func upTo[T any](s []T, n int) []T { return s[:min(n, len(s))] }

// TestCronCLIAddAndRunWhileGatewayRuns adds a job with the CLI while a
// gateway runs, fires it with `herald cron run` and follows its report
// to the Telegram chat, once, and its run to "delivered"; a bad
// schedule is refused with its reason and adds nothing.
func TestCronCLIAddAndRunWhileGatewayRuns(t *testing.T) {
	t.Parallel()
	tg := telegramfake.New(t, "")
	home := t.TempDir()
	writeConfig(t, home, fmt.Sprintf(`
store:
  lease_ttl: %s
http:
  addr: 127.0.0.1:0
`, leaseTTL)+telegramConfig(tg))
	startChild(t, "gateway", home)
	script := writeCronScript(t)

	// A bad schedule: refused, naming what is wrong, and nothing added.
	for _, tt := range []struct{ schedule, want string }{
		{"every 2s", "at least 5s"},
		{"sometimes", "sometimes"},
	} {
		res := runCLI(t, home, "cron", "add", "--name", "bad", "--schedule", tt.schedule, "--script", script, "--no-agent",
			"--deliver", fmt.Sprintf("telegram:%d", cronChat), "--json")
		if res.code == 0 || !strings.Contains(res.stderr, tt.want) {
			t.Errorf("cron add --schedule %q: exit %d, stderr %q; want a failure naming %q", tt.schedule, res.code, res.stderr, tt.want)
		}
	}
	var jobs []cronjobs.Job
	if cliJSON(t, home, &jobs, "cron", "list"); len(jobs) != 0 {
		t.Fatalf("after the refused adds, cron list shows %+v; want no job", jobs)
	}

	var job cronjobs.Job
	cliJSON(t, home, &job, "cron", "add", "--name", "nightly", "--schedule", "@daily", "--script", script, "--no-agent",
		"--deliver", fmt.Sprintf("telegram:%d", cronChat))
	if job.ID == "" || job.Name != "nightly" || !job.NoAgent || job.Schedule.Kind != cronjobs.KindCron || job.NextRunAt.IsZero() {
		t.Fatalf("cron add printed %+v", job)
	}
	if until := time.Until(job.NextRunAt); until <= 0 || until > 24*time.Hour {
		t.Errorf("@daily's next run is %s, %s from now", job.NextRunAt, until)
	}

	var requested cronjobs.Job
	if cliJSON(t, home, &requested, "cron", "run", job.ID); requested.RunRequestedAt.IsZero() {
		t.Errorf("cron run printed %+v, with no run requested", requested)
	}
	sent := tg.WaitSent(cronChat, 1)
	if !strings.Contains(sent[0].Text, "nightly") || !strings.Contains(sent[0].Text, "fired "+job.ID+" ") {
		t.Errorf("the report is %q; want it headed by the job's name and holding the script's output", sent[0].Text)
	}
	// A second copy (a second fire of the one request, a resend) would
	// come within the scheduler's poll and a delivery's round trip.
	time.Sleep(3 * time.Second)
	if sent := tg.Sent(cronChat); len(sent) != 1 {
		t.Errorf("the chat got %d messages, want the one report: %+v", len(sent), sent)
	}

	var runs []cronjobs.Run
	testkit.EventuallyWithin(t, waitReply, func() (bool, string) {
		cliJSON(t, home, &runs, "cron", "runs", job.ID)
		return len(runs) == 1 && runs[0].Delivery == cronjobs.DeliveryDelivered,
			fmt.Sprintf("cron runs shows %+v; want one run, delivered", runs)
	})
	r := runs[0]
	if !r.Manual || r.Status != cronjobs.StatusOK || !slices.Equal(r.Sent, []string{fmt.Sprintf("telegram:%d", cronChat)}) || r.Output == "" {
		t.Errorf("the run is %+v; want a manual run, ok, sent to telegram:%d, its output saved", r, cronChat)
	}
	if calls := tg.Calls("sendMessage"); len(calls) != 1 {
		t.Errorf("the bot was asked to send %d times, want once", len(calls))
	}
}
