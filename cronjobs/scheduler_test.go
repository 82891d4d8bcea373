package cronjobs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/store/redis"
	"github.com/heraldgw/herald/store/sqlite"
)

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

// backend is one store the scheduler runs on.
type backend interface {
	Cron() cronjobs.Store
	Once() lease.OnceStore
	Outbox() outbox.Store
	Close() error
}

// backends open a fresh store of each kind on clk.
var backends = map[string]func(t *testing.T, clk clock.Clock) backend{
	"sqlite": func(t *testing.T, clk clock.Clock) backend {
		db, err := sqlite.Open(filepath.Join(t.TempDir(), "cron.db"), sqlite.Options{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	},
	"redis": func(t *testing.T, clk clock.Clock) backend {
		srv := testkit.StartRedis(t)
		db, err := redis.Open(context.Background(), redis.Options{URL: srv.URL(), Prefix: srv.Prefix(), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	},
}

func eachBackend(t *testing.T, f func(t *testing.T, h *harness)) {
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			f(t, newHarness(t, open(t, clk), clk))
		})
	}
}

// harness is a scheduler on one store, with a scripted agent.
type harness struct {
	t       *testing.T
	db      backend
	clk     *clock.Fake
	mgr     cronjobs.Manager
	targets cronjobs.Targets
	home    string
	env     *proc.Env           // the scripts' environment
	scripts string              // the schedulers' cron.scripts_dir
	redact  func(string) string // the schedulers' redactor
	ran     chan cronjobs.Run
	calls   atomic.Int32

	mu    sync.Mutex
	reply func(j cronjobs.Job, prompt string) (string, error)
	// hold, when set, is called with the fire's context before the
	// agent replies.
	hold   func(ctx context.Context)
	scheds []*cronjobs.Scheduler
}

func newHarness(t *testing.T, db backend, clk *clock.Fake) *harness {
	h := &harness{
		t: t, db: db, clk: clk, home: t.TempDir(),
		ran:     make(chan cronjobs.Run, 1000),
		targets: cronjobs.Targets{Homes: map[string]string{"telegram": "-100:7"}, Platforms: []string{"api", "telegram"}},
		reply:   func(j cronjobs.Job, _ string) (string, error) { return "report of " + j.Name, nil },
	}
	h.mgr = cronjobs.Manager{Store: db.Cron(), Targets: h.targets, Timezone: "UTC", Clock: clk}
	return h
}

func (h *harness) agent(ctx context.Context, j cronjobs.Job, _ cronjobs.Run, prompt string) (string, error) {
	h.calls.Add(1)
	h.mu.Lock()
	reply, hold := h.reply, h.hold
	h.mu.Unlock()
	if hold != nil {
		hold(ctx)
	}
	return reply(j, prompt)
}

// start starts a scheduler named name on the harness's store and waits
// until it, and every other, sleeps on its timers.
func (h *harness) start(name string, targets cronjobs.Targets) *cronjobs.Scheduler {
	h.t.Helper()
	return h.startOn(h.db.Cron(), name, targets)
}

// startOn is start with the scheduler's jobs and runs in store, the
// harness's wrapped.
func (h *harness) startOn(store cronjobs.Store, name string, targets cronjobs.Targets) *cronjobs.Scheduler {
	h.t.Helper()
	s, err := cronjobs.NewScheduler(cronjobs.SchedulerOptions{
		Store: store, Once: h.db.Once(), Outbox: h.db.Outbox(),
		Agent: h.agent, Targets: targets,
		Outputs:    cronjobs.Outputs{Dir: filepath.Join(h.home, "cron", "output")},
		Name:       name,
		ClaimTTL:   30 * time.Second,
		Ran:        func(r cronjobs.Run) { h.ran <- r },
		Env:        h.env,
		ScriptsDir: h.scripts,
		Redact:     h.redact,
		Clock:      h.clk,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	h.scheds = append(h.scheds, s)
	h.idle()
	return s
}

// next waits for the next recorded fire.
func (h *harness) next() cronjobs.Run {
	h.t.Helper()
	select {
	case r := <-h.ran:
		return r
	case <-time.After(20 * time.Second):
		h.t.Fatal("no fire was recorded")
	}
	return cronjobs.Run{}
}

// quiet checks no fire is recorded once the schedulers are idle.
func (h *harness) quiet() {
	h.t.Helper()
	h.idle()
	select {
	case r := <-h.ran:
		h.t.Fatalf("an unexpected fire was recorded: %+v", r)
	default:
	}
}

// idle waits until every scheduler sleeps on its timers. A loop a fire's
// end has just woken may be counted on the timer it leaves; the clock
// moved then is seen all the same, as the loop's next sleep runs to a
// time set from its read of the store, Poll after it at most.
func (h *harness) idle() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Each scheduler waits on its loop's timer and its renewer's.
	if err := h.clk.BlockUntil(ctx, 2*len(h.scheds)); err != nil {
		h.t.Fatalf("the schedulers did not settle: %v", err)
	}
}

func (h *harness) create(spec cronjobs.Spec) cronjobs.Job {
	h.t.Helper()
	j, err := h.mgr.Create(context.Background(), spec)
	if err != nil {
		h.t.Fatalf("Create(%+v): %v", spec, err)
	}
	return j
}

func (h *harness) job(id string) cronjobs.Job {
	h.t.Helper()
	j, err := h.db.Cron().Job(context.Background(), id)
	if err != nil {
		h.t.Fatalf("Job(%s): %v", id, err)
	}
	return j
}

func (h *harness) pending() []outbox.Message {
	h.t.Helper()
	msgs, err := h.db.Outbox().Pending(context.Background(), 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	return msgs
}

func TestFireDeliversOnceAndAdvances(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		j := h.create(cronjobs.Spec{Name: "daily digest", Schedule: "every 1h", Prompt: "summarise", Deliver: "telegram, telegram:-100:7 ,local"})
		h.start("a", h.targets)
		h.clk.Advance(time.Hour)
		r := h.next()
		if r.Status != cronjobs.StatusOK || r.Delivery != cronjobs.DeliveryPending || !r.ScheduledAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("run = %+v, want ok, pending, scheduled at %s", r, t0.Add(time.Hour))
		}
		msgs := h.pending()
		if len(msgs) != 1 {
			t.Fatalf("%d messages queued, want 1 (the duplicate target collapsed): %+v", len(msgs), msgs)
		}
		m := msgs[0]
		if m.Target != (outbox.Target{Platform: "telegram", Chat: "-100", Thread: "7"}) || m.Kind != cronjobs.KindReport || m.Ref != r.ID ||
			m.Text != "**daily digest**\n\nreport of daily digest" {
			t.Fatalf("message = %+v", m)
		}
		got := h.job(j.ID)
		if !got.NextRunAt.Equal(t0.Add(2*time.Hour)) || got.LastStatus != cronjobs.StatusOK || got.Repeat.Completed != 1 {
			t.Fatalf("job after the fire = %+v", got)
		}
		body, err := os.ReadFile(r.Output)
		if err != nil || !strings.Contains(string(body), "report of daily digest") {
			t.Fatalf("output %q = %q, %v", r.Output, body, err)
		}
		h.quiet()
		if n := h.calls.Load(); n != 1 {
			t.Fatalf("the agent ran %d times, want 1", n)
		}
	})
}

func TestOutcomes(t *testing.T) {
	script := func(t *testing.T, body string) string {
		p := filepath.Join(t.TempDir(), "job.sh")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name       string
		spec       func(t *testing.T) cronjobs.Spec
		reply      func(cronjobs.Job, string) (string, error)
		wantStatus string
		wantText   string // "" wants nothing queued
		wantCalls  int32
	}{
		{
			name:       "a silent reply is saved, not sent",
			spec:       func(*testing.T) cronjobs.Spec { return cronjobs.Spec{Name: "s", Schedule: "every 1h", Prompt: "p"} },
			reply:      func(cronjobs.Job, string) (string, error) { return " [SILENT]\n", nil },
			wantStatus: cronjobs.StatusSilent, wantCalls: 1,
		},
		{
			name:       "NO_REPLY too",
			spec:       func(*testing.T) cronjobs.Spec { return cronjobs.Spec{Name: "s", Schedule: "every 1h", Prompt: "p"} },
			reply:      func(cronjobs.Job, string) (string, error) { return "NO_REPLY", nil },
			wantStatus: cronjobs.StatusSilent, wantCalls: 1,
		},
		{
			name:       "a model failure is an error with a one-line notice",
			spec:       func(*testing.T) cronjobs.Spec { return cronjobs.Spec{Name: "m", Schedule: "every 1h", Prompt: "p"} },
			reply:      func(cronjobs.Job, string) (string, error) { return "", errors.New("the model server is unavailable") },
			wantStatus: cronjobs.StatusError, wantText: "failed: the model server is unavailable", wantCalls: 1,
		},
		{
			name: "a no-agent script's stdout is the report, verbatim",
			spec: func(t *testing.T) cronjobs.Spec {
				return cronjobs.Spec{Name: "disk", Schedule: "every 1h", NoAgent: true, Script: script(t, "echo '  82% used'\n")}
			},
			wantStatus: cronjobs.StatusOK, wantText: "**disk**\n\n  82% used\n",
		},
		{
			name: "a no-agent script printing nothing sends nothing",
			spec: func(t *testing.T) cronjobs.Spec {
				return cronjobs.Spec{Name: "quiet", Schedule: "every 1h", NoAgent: true, Script: script(t, "true\n")}
			},
			wantStatus: cronjobs.StatusOK,
		},
		{
			name: "a failing script sends a notice with its stderr's tail",
			spec: func(t *testing.T) cronjobs.Spec {
				return cronjobs.Spec{Name: "bad", Schedule: "every 1h", NoAgent: true, Script: script(t, "echo partial; echo 'disk not mounted' >&2; exit 3\n")}
			},
			wantStatus: cronjobs.StatusError, wantText: "exit status 3): disk not mounted",
		},
		{
			name: "wakeAgent false skips the agent",
			spec: func(t *testing.T) cronjobs.Spec {
				return cronjobs.Spec{Name: "gate", Schedule: "every 1h", Prompt: "p", Script: script(t, "echo nothing new\necho '{\"wakeAgent\": false}'\n")}
			},
			wantStatus: cronjobs.StatusSkipped,
		},
		{
			name: "a script's output is the agent's context",
			spec: func(t *testing.T) cronjobs.Spec {
				return cronjobs.Spec{Name: "ctx", Schedule: "every 1h", Prompt: "p", Script: script(t, "echo 3 new issues\n")}
			},
			reply: func(_ cronjobs.Job, prompt string) (string, error) {
				if !strings.Contains(prompt, "3 new issues") {
					return "", fmt.Errorf("prompt without the script's output: %q", prompt)
				}
				return "triaged", nil
			},
			wantStatus: cronjobs.StatusOK, wantText: "**ctx**\n\ntriaged", wantCalls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, h *harness) {
				if tt.reply != nil {
					h.reply = tt.reply
				}
				spec := tt.spec(t)
				spec.Deliver = "telegram"
				j := h.create(spec)
				h.start("a", h.targets)
				h.clk.Advance(time.Hour)
				r := h.next()
				if r.Status != tt.wantStatus {
					t.Fatalf("status %q (error %q), want %q", r.Status, r.Error, tt.wantStatus)
				}
				msgs := h.pending()
				switch {
				case tt.wantText == "" && len(msgs) != 0:
					t.Fatalf("queued %+v, want nothing", msgs)
				case tt.wantText != "" && (len(msgs) != 1 || !strings.Contains(msgs[0].Text, tt.wantText)):
					t.Fatalf("queued %+v, want one message holding %q", msgs, tt.wantText)
				}
				if got := h.job(j.ID); got.LastStatus != tt.wantStatus {
					t.Fatalf("job's last status %q, want %q", got.LastStatus, tt.wantStatus)
				}
				if n := h.calls.Load(); n != tt.wantCalls {
					t.Fatalf("the agent ran %d times, want %d", n, tt.wantCalls)
				}
				if _, err := os.Stat(r.Output); err != nil {
					t.Fatalf("output not saved: %v", err)
				}
			})
		})
	}
}

// A script sees the base environment, its run's HERALD_CRON_* and the
// names passed through, never herald's secrets nor another variable
// named like a credential: a no-agent job running env posts none.
func TestScriptEnvironmentHoldsNoSecret(t *testing.T) {
	secrets := map[string]string{
		"HERALD_API_KEY":        "api-key-1111",
		"HERALD_MODEL_API_KEY":  "sk-model-2222",
		"SLACK_BOT_TOKEN":       "xoxb-3333",
		"REDIS_URL":             "redis://:store-pw-4444@cache:6379",
		"AWS_SECRET_ACCESS_KEY": "aws-5555",
	}
	testkit.SetEnv(t, secrets)
	t.Setenv("HERALD_TEST_PASSED", "passed-7777")
	eachBackend(t, func(t *testing.T, h *harness) {
		h.env = &proc.Env{Passthrough: []string{"HERALD_TEST_PASSED", "HERALD_MODEL_API_KEY"}, Withheld: config.SecretVariables()}
		j := h.create(cronjobs.Spec{Name: "env", Schedule: "every 1h", NoAgent: true, Script: "/usr/bin/env", Deliver: "telegram"})
		h.start("a", h.targets)
		h.clk.Advance(time.Hour)
		if r := h.next(); r.Status != cronjobs.StatusOK {
			t.Fatalf("run = %+v", r)
		}
		msgs := h.pending()
		if len(msgs) != 1 {
			t.Fatalf("queued %+v, want the report", msgs)
		}
		testkit.CheckEnv(t, "the report", msgs[0].Text, secrets, "HERALD_TEST_PASSED=passed-7777", "HERALD_CRON_JOB="+j.ID, "PATH=")
	})
}

// What a script printed of herald's secrets is masked in the report,
// the saved output and the agent's prompt.
func TestScriptOutputIsRedacted(t *testing.T) {
	const secret = "sk-live-model-key-1111"
	eachBackend(t, func(t *testing.T, h *harness) {
		h.redact = redact.New([]string{secret}).String
		var prompt string
		h.reply = func(_ cronjobs.Job, p string) (string, error) { prompt = p; return "saw " + secret, nil }
		dir := t.TempDir()
		script := filepath.Join(dir, "leak.sh")
		if err := os.WriteFile(script, []byte("echo key="+secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		h.create(cronjobs.Spec{Name: "raw", Schedule: "every 1h", NoAgent: true, Script: script, Deliver: "telegram"})
		h.create(cronjobs.Spec{Name: "agent", Schedule: "every 1h", Prompt: "p", Script: script, Deliver: "local"})
		h.start("a", h.targets)
		h.clk.Advance(time.Hour)
		for range 2 {
			r := h.next()
			body, err := os.ReadFile(r.Output)
			if err != nil || strings.Contains(string(body), secret) || !strings.Contains(string(body), redact.Mask) {
				t.Errorf("output of %s = %q, %v; want the key masked", r.Job, body, err)
			}
		}
		msgs := h.pending()
		if len(msgs) != 1 || msgs[0].Text != "**raw**\n\nkey="+redact.Mask+"\n" {
			t.Errorf("queued %+v, want the report with the key masked", msgs)
		}
		if strings.Contains(prompt, secret) || !strings.Contains(prompt, "key="+redact.Mask) {
			t.Errorf("the agent read %q, want the key masked", prompt)
		}
	})
}

// A job made in a chat runs its script only while the script still lies
// in cron.scripts_dir, its symlinks followed: a symlink swapped in later,
// pointing out of it, runs nothing and fails the run saying why. A job
// the CLI made runs its script wherever it is.
func TestChatJobsScriptIsCheckedAtEachFire(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		h.scripts = filepath.Join(h.home, "scripts")
		outside := filepath.Join(h.home, "elsewhere")
		for _, d := range []string{h.scripts, outside} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		marker := filepath.Join(h.home, "ran-outside")
		evil := filepath.Join(outside, "evil.sh")
		write := func(p, body string) {
			t.Helper()
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write(evil, "touch "+marker+"\necho evil\n")
		script := filepath.Join(h.scripts, "report.sh")
		write(script, "echo fine\n")
		origin := &cronjobs.Origin{Conv: "telegram:100", Platform: "telegram", Chat: "100", User: "telegram:42"}
		chat := h.create(cronjobs.Spec{Name: "chat", Schedule: "every 1h", NoAgent: true, Script: script, Deliver: "telegram", Origin: origin})
		h.start("a", h.targets)

		h.clk.Advance(time.Hour)
		if r := h.next(); r.Status != cronjobs.StatusOK {
			t.Fatalf("the first run = %+v, want it ok", r)
		}
		if msgs := h.pending(); len(msgs) != 1 || !strings.Contains(msgs[0].Text, "fine") {
			t.Fatalf("queued %+v, want the script's report", msgs)
		}

		// The script is swapped for a symlink out of the directory.
		if err := os.Remove(script); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(evil, script); err != nil {
			t.Fatal(err)
		}
		h.clk.Advance(time.Hour)
		r := h.next()
		if r.Status != cronjobs.StatusError || !strings.Contains(r.Error, "outside "+h.scripts) {
			t.Errorf("the run after the swap = %+v, want an error naming %s", r, h.scripts)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the script outside cron.scripts_dir ran")
		}
		if got := h.job(chat.ID); got.LastStatus != cronjobs.StatusError || !strings.Contains(got.LastError, "outside") {
			t.Errorf("the job's last status %q (%q), want the error", got.LastStatus, got.LastError)
		}

		// The CLI's job with the same script runs it, wherever it leads.
		h.create(cronjobs.Spec{Name: "cli", Schedule: "every 1h", NoAgent: true, Script: script, Deliver: "telegram", CreatedBy: "cli"})
		h.clk.Advance(time.Hour)
		for range 2 {
			if r := h.next(); r.Job != chat.ID && r.Status != cronjobs.StatusOK {
				t.Errorf("the CLI job's run = %+v, want it ok", r)
			}
		}
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("the CLI job's script did not run: %v", err)
		}
	})
}

func TestRepeatRunsNTimesThenRemoves(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		j := h.create(cronjobs.Spec{Name: "twice", Schedule: "every 1m", Prompt: "p", Repeat: 2})
		h.start("a", h.targets)
		for i := range 2 {
			h.idle()
			h.clk.Advance(time.Minute)
			if r := h.next(); r.Status != cronjobs.StatusOK {
				t.Fatalf("run %d = %+v", i, r)
			}
		}
		if _, err := h.db.Cron().Job(context.Background(), j.ID); err == nil {
			t.Fatal("the job is still there after its last repeat")
		}
		h.clk.Advance(time.Minute)
		h.quiet()
	})
}

func TestOneShotRunsOnceThenIsRemoved(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		j := h.create(cronjobs.Spec{Name: "remind", Schedule: "30m", Prompt: "p"})
		h.start("a", h.targets)
		// Late, within its grace (half of its 30 minutes).
		h.clk.Advance(40 * time.Minute)
		if r := h.next(); r.Status != cronjobs.StatusOK {
			t.Fatalf("run = %+v", r)
		}
		if _, err := h.db.Cron().Job(context.Background(), j.ID); err == nil {
			t.Fatal("a one-shot is kept after its run")
		}
	})
}

func TestMissedOneShotIsMarkedAndNoticed(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		j := h.create(cronjobs.Spec{Name: "remind", Schedule: "30m", Prompt: "p", Deliver: "telegram"})
		// The gateway was down past the fire's grace.
		h.clk.Advance(2 * time.Hour)
		h.start("a", h.targets)
		r := h.next()
		if r.Status != cronjobs.StatusMissed {
			t.Fatalf("run = %+v, want missed", r)
		}
		msgs := h.pending()
		if len(msgs) != 1 || !strings.Contains(msgs[0].Text, "was missed") {
			t.Fatalf("queued %+v, want the missed notice", msgs)
		}
		got := h.job(j.ID)
		if got.State != cronjobs.StateMissed || got.Enabled || h.calls.Load() != 0 {
			t.Fatalf("job = %+v, agent calls %d", got, h.calls.Load())
		}
	})
}

func TestRecurringFastForwardsWithoutABurst(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		j := h.create(cronjobs.Spec{Name: "hourly", Schedule: "0 * * * *", Prompt: "p"})
		h.clk.Advance(10*time.Hour + 20*time.Minute)
		h.start("a", h.targets)
		if r := h.next(); r.Status != cronjobs.StatusOK {
			t.Fatalf("run = %+v", r)
		}
		h.quiet()
		got := h.job(j.ID)
		if want := t0.Add(11 * time.Hour); !got.NextRunAt.Equal(want) {
			t.Fatalf("next run %s, want %s", got.NextRunAt, want)
		}
		if runs, _ := h.db.Cron().Runs(context.Background(), j.ID, 100); len(runs) != 1 {
			t.Fatalf("%d runs, want 1", len(runs))
		}
	})
}

func TestUnresolvableTargetAtFireIsRecorded(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		j := h.create(cronjobs.Spec{Name: "to telegram", Schedule: "every 1h", Prompt: "p", Deliver: "telegram"})
		// The gateway that fires it has no Telegram adapter any more.
		h.start("a", cronjobs.Targets{Platforms: []string{"api"}})
		h.clk.Advance(time.Hour)
		r := h.next()
		if r.Status != cronjobs.StatusOK || r.Delivery != cronjobs.DeliveryFailed || !strings.Contains(r.DeliveryError, "no adapter") {
			t.Fatalf("run = %+v", r)
		}
		got := h.job(j.ID)
		if got.LastStatus != cronjobs.StatusOK || !strings.Contains(got.LastDeliveryError, "no adapter") {
			t.Fatalf("job = %+v: the run's own status must stay ok beside the delivery error", got)
		}
		if msgs := h.pending(); len(msgs) != 0 {
			t.Fatalf("queued %+v for a target that cannot be reached", msgs)
		}
	})
}

func TestDeliveryOutcomesRecorded(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		j := h.create(cronjobs.Spec{Name: "d", Schedule: "every 1h", Prompt: "p", Deliver: "telegram"})
		s := h.start("a", h.targets)
		ctx := context.Background()
		h.clk.Advance(time.Hour)
		h.next()
		m := h.pending()[0]
		s.Delivered(ctx, m, false, "chat not found")
		if got := h.job(j.ID); got.LastDeliveryError != "telegram:-100:7: chat not found" || got.LastStatus != cronjobs.StatusOK {
			t.Fatalf("after a dead letter, job = %+v", got)
		}
		run, err := h.db.Cron().Run(ctx, m.Ref)
		if err != nil || run.Delivery != cronjobs.DeliveryFailed {
			t.Fatalf("run = %+v, %v", run, err)
		}
		// The next good delivery clears it.
		h.idle()
		h.clk.Advance(time.Hour)
		r2 := h.next()
		for _, m := range h.pending() {
			if m.Ref == r2.ID {
				s.Delivered(ctx, m, true, "")
			}
		}
		if got := h.job(j.ID); got.LastDeliveryError != "" {
			t.Fatalf("after a good delivery, job's delivery error = %q", got.LastDeliveryError)
		}
		if run, _ := h.db.Cron().Run(ctx, r2.ID); run.Delivery != cronjobs.DeliveryDelivered {
			t.Fatalf("run after its delivery = %+v", run)
		}
	})
}

func TestMalformedJobDoesNotStopOthers(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		bad := cronjobs.Job{
			ID: "job_bad", Name: "broken", Prompt: "p", Enabled: true, State: cronjobs.StateScheduled,
			Schedule:  cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "61 * * * *"},
			NextRunAt: t0.Add(time.Minute), CreatedAt: t0,
		}
		if _, err := h.db.Cron().CreateJob(ctx, bad); err != nil {
			t.Fatal(err)
		}
		good := h.create(cronjobs.Spec{Name: "fine", Schedule: "every 1h", Prompt: "p"})
		h.start("a", h.targets)
		h.clk.Advance(time.Hour)
		if r := h.next(); r.Job != good.ID {
			t.Fatalf("ran %s, want the good job", r.Job)
		}
		// The two fires run side by side: the malformed one's error is
		// recorded by its own, which may end after the good one.
		var got cronjobs.Job
		testkit.Eventually(t, "the malformed job's error to be recorded", func() bool {
			got = h.job(bad.ID)
			return got.State == cronjobs.StateError
		})
		if got.State != cronjobs.StateError || !strings.Contains(got.LastError, "cannot be scheduled") || !got.NextRunAt.IsZero() {
			t.Fatalf("the malformed job = %+v", got)
		}
	})
}

func TestRunNowFiresOnceBesidesTheSchedule(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.create(cronjobs.Spec{Name: "n", Schedule: "@daily", Prompt: "p"})
		if _, err := h.mgr.Pause(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		h.start("a", h.targets)
		if _, err := h.mgr.RunNow(ctx, j.ID[:8]); err != nil {
			t.Fatal(err)
		}
		h.clk.Advance(time.Second)
		if r := h.next(); !r.Manual || r.Status != cronjobs.StatusOK {
			t.Fatalf("run = %+v", r)
		}
		h.clk.Advance(48 * time.Hour)
		h.quiet()
		got := h.job(j.ID)
		if got.Enabled || !got.RunRequestedAt.IsZero() || got.Repeat.Completed != 0 {
			t.Fatalf("job after a run of its paused self = %+v", got)
		}
	})
}

func TestTwoSchedulersFireEachOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		const jobs, ticks = 20, 4
		for i := range jobs {
			h.create(cronjobs.Spec{Name: fmt.Sprint("j", i), Schedule: "every 1m", Prompt: "p", Deliver: "telegram"})
		}
		h.start("a", h.targets)
		h.start("b", h.targets)
		seen := map[string]string{}
		for tick := range ticks {
			h.idle()
			h.clk.Advance(time.Minute)
			for range jobs {
				r := h.next()
				if prev, ok := seen[r.Fire]; ok {
					t.Fatalf("fire %s recorded by %s and by %s", r.Fire, prev, r.Owner)
				}
				seen[r.Fire] = r.Owner
			}
			_ = tick
		}
		h.quiet()
		if n := len(h.pending()); n != jobs*ticks {
			t.Fatalf("%d reports queued, want %d", n, jobs*ticks)
		}
	})
}

func TestDeadClaimersFireIsFinishedOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.create(cronjobs.Spec{Name: "orphan", Schedule: "every 1h", Prompt: "p", Deliver: "telegram"})
		due := j.NextRunAt
		h.clk.Advance(time.Hour)
		// A process claimed the fire, moved the job on, and died.
		fire := fmt.Sprintf("cron:%s:%d", j.ID, due.Unix())
		if _, state, err := h.db.Once().ClaimOnce(ctx, fire, "dead", 30*time.Second); err != nil || state != lease.OnceClaimed {
			t.Fatalf("ClaimOnce = %s, %v", state, err)
		}
		moved := h.job(j.ID)
		moved.NextRunAt = due.Add(time.Hour)
		if _, err := h.db.Cron().UpdateJob(ctx, moved); err != nil {
			t.Fatal(err)
		}
		h.start("survivor", h.targets)
		h.quiet() // its claim is live
		h.clk.Advance(31 * time.Second)
		r := h.next()
		if r.Fire != fire || r.Owner != "survivor" {
			t.Fatalf("run = %+v, want the dead process's fire", r)
		}
		h.quiet()
		if n := len(h.pending()); n != 1 {
			t.Fatalf("%d reports, want 1", n)
		}
	})
}

func TestShutdownGivesARunningFireUntilItsDeadline(t *testing.T) {
	tests := []struct {
		desc     string
		deadline time.Duration // 0: none
		wantErr  error
		// wantRun is whether the fire is recorded: one let finish is,
		// one stopped at the deadline is left to be run again.
		wantRun bool
	}{
		{desc: "a fire that ends in time finishes", wantRun: true},
		{desc: "a fire past the deadline is stopped", deadline: 50 * time.Millisecond, wantErr: context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, h *harness) {
				started, release, stopped := make(chan struct{}), make(chan struct{}), make(chan struct{})
				h.mu.Lock()
				h.hold = func(ctx context.Context) {
					close(started)
					select {
					case <-release:
					case <-ctx.Done():
						close(stopped)
					}
				}
				h.mu.Unlock()
				h.create(cronjobs.Spec{Name: "slow", Schedule: "every 1h", Prompt: "p", Deliver: "local"})
				s := h.start("a", h.targets)
				h.clk.Advance(time.Hour)
				<-started
				ctx := context.Background()
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					defer cancel()
				}
				shut := make(chan error, 1)
				go func() { shut <- s.Shutdown(ctx) }()
				if tc.deadline == 0 {
					select {
					case err := <-shut:
						t.Fatalf("Shutdown returned %v while a fire ran", err)
					case <-time.After(50 * time.Millisecond):
					}
					close(release)
				}
				if err := <-shut; !errors.Is(err, tc.wantErr) {
					t.Fatalf("Shutdown = %v, want %v", err, tc.wantErr)
				}
				if tc.deadline > 0 {
					select {
					case <-stopped:
					default:
						t.Fatal("Shutdown returned before the fire past its deadline stopped")
					}
				}
				select {
				case r := <-h.ran:
					if !tc.wantRun {
						t.Fatalf("a fire stopped at the deadline was recorded: %+v", r)
					}
				default:
					if tc.wantRun {
						t.Fatal("the fire let finish was not recorded by the time Shutdown returned")
					}
				}
			})
		})
	}
}

// A job changed while its fire runs makes the fire's one-call end
// refuse (the job's version moved on); the fire is then recorded the
// longer way, keeping the change, and marked done all the same.
func TestJobChangedDuringItsFireIsRecordedKeepingTheChange(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		j := h.create(cronjobs.Spec{Name: "digest", Schedule: "every 1h", Prompt: "summarise", Deliver: "telegram"})
		h.mu.Lock()
		h.hold = func(context.Context) {
			edited := h.job(j.ID)
			edited.Prompt = "summarise briefly"
			if _, err := h.db.Cron().UpdateJob(ctx, edited); err != nil {
				t.Errorf("UpdateJob during the fire: %v", err)
			}
		}
		h.mu.Unlock()
		h.start("a", h.targets)
		h.clk.Advance(time.Hour)
		r := h.next()
		if r.Status != cronjobs.StatusOK || r.EndedAt.IsZero() {
			t.Fatalf("run = %+v, want ok and ended", r)
		}
		got := h.job(j.ID)
		if got.Prompt != "summarise briefly" || got.LastStatus != cronjobs.StatusOK || !got.LastRunAt.Equal(r.StartedAt) ||
			!got.NextRunAt.Equal(t0.Add(2*time.Hour)) {
			t.Fatalf("job after the fire = %+v, want the edit kept, the run recorded, next at %s", got, t0.Add(2*time.Hour))
		}
		stored, err := h.db.Cron().Run(ctx, r.ID)
		if err != nil || !stored.Ended() {
			t.Fatalf("stored run = %+v, %v; want it ended", stored, err)
		}
		// Done: not run again once its claim would have run out.
		h.mu.Lock()
		h.hold = nil
		h.mu.Unlock()
		h.clk.Advance(31 * time.Second)
		h.quiet()
		if _, state, err := h.db.Once().ClaimOnce(ctx, r.Fire, "b", time.Minute); err != nil || state != lease.OnceDone {
			t.Fatalf("ClaimOnce of the fire = %s, %v; want done", state, err)
		}
		if n := h.calls.Load(); n != 1 {
			t.Fatalf("the agent ran %d times, want 1", n)
		}
	})
}

// awayAtEnd is a store whose EndFire finds the store away (Unavailable)
// the first fails times, as during a Redis failover.
type awayAtEnd struct {
	cronjobs.Store
	fails atomic.Int32
}

func (s *awayAtEnd) EndFire(ctx context.Context, in cronjobs.FireEnd) (cronjobs.Job, error) {
	if s.fails.Add(-1) >= 0 {
		return cronjobs.Job{}, errs.E("test.EndFire", errs.Unavailable, "the store is away")
	}
	return s.Store.EndFire(ctx, in)
}

// A fire whose end finds the store away for a moment is ended once it is
// back, under its claim: it is not run again, by this instance or
// another, when the claim would have run out.
func TestAFireEndedWhileTheStoreIsAwayRunsOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		j := h.create(cronjobs.Spec{Name: "digest", Schedule: "every 1h", Prompt: "summarise", Deliver: "telegram"})
		store := &awayAtEnd{Store: h.db.Cron()}
		store.fails.Store(2)
		h.startOn(store, "a", h.targets)
		h.clk.Advance(time.Hour)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for range 2 {
			// The loop's timer, the renewer's and the wait for the store.
			if err := h.clk.BlockUntil(ctx, 3); err != nil {
				t.Fatalf("the fire did not wait for the store: %v", err)
			}
			h.clk.Advance(2 * time.Second)
		}
		if r := h.next(); r.Status != cronjobs.StatusOK || !r.ScheduledAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("run = %+v, want ok, scheduled at %s", r, t0.Add(time.Hour))
		}
		// Past the claim's TTL: nobody finishes the fire again.
		h.clk.Advance(time.Minute)
		h.quiet()
		if n := h.calls.Load(); n != 1 {
			t.Fatalf("the agent ran %d times, want 1", n)
		}
		if got := h.job(j.ID); got.LastStatus != cronjobs.StatusOK || !got.NextRunAt.Equal(t0.Add(2*time.Hour)) {
			t.Fatalf("job after the fire = %+v", got)
		}
	})
}

// movedAtRead is a store during whose read of the due jobs the clock
// moves on by move, once: a read slow under the wall clock.
type movedAtRead struct {
	cronjobs.Store
	clk  *clock.Fake
	move atomic.Int64 // nanoseconds; 0: none
}

func (s *movedAtRead) DueJobs(ctx context.Context, now time.Time, limit int) ([]cronjobs.Job, error) {
	jobs, err := s.Store.DueJobs(ctx, now, limit)
	if d := s.move.Swap(0); d > 0 {
		s.clk.Advance(time.Duration(d))
	}
	return jobs, err
}

// A job that falls due while the scheduler reads the store is fired
// then, not a wait later: the scheduler sleeps until a time set from its
// read, which the clock has passed already.
func TestJobDueDuringTheReadIsFiredThen(t *testing.T) {
	eachBackend(t, func(t *testing.T, h *harness) {
		j := h.create(cronjobs.Spec{Name: "minutely", Schedule: "every 1m", Prompt: "p"})
		store := &movedAtRead{Store: h.db.Cron(), clk: h.clk}
		s := h.startOn(store, "a", h.targets)
		// The next read, before the job is due, ends after it.
		store.move.Store(int64(time.Minute))
		s.Wake()
		if r := h.next(); r.Job != j.ID || !r.ScheduledAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("run = %+v, want the job's fire at %s", r, t0.Add(time.Minute))
		}
	})
}
