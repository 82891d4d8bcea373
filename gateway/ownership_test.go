package gateway

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// ownershipTTL is store.lease_ttl in the ownership tests: short, so that
// a takeover is quick to see.
const ownershipTTL = time.Second

// sharedStores point cfg at one store every gateway of the test shares,
// on each backend.
var sharedStores = []struct {
	backend string
	point   func(t *testing.T) func(cfg *config.Config)
}{
	{config.BackendSQLite, func(t *testing.T) func(*config.Config) {
		path := filepath.Join(t.TempDir(), "shared.db")
		return func(cfg *config.Config) { cfg.Store.SQLitePath = path }
	}},
	{config.BackendRedis, func(t *testing.T) func(*config.Config) {
		r := testkit.StartRedis(t)
		return func(cfg *config.Config) {
			cfg.Store.Backend, cfg.Store.RedisURL, cfg.Store.RedisPrefix = config.BackendRedis, r.URL(), r.Prefix()
		}
	}},
}

// runs records the Runs of one exclusive adapter across the gateways of a
// test.
type runs struct {
	mu      sync.Mutex
	running int
	most    int           // the most Runs at once
	started chan string   // the gateway of each Run, as it starts
	ended   chan struct{} // a token as each Run ends
}

func newRuns() *runs { return &runs{started: make(chan string, 16), ended: make(chan struct{}, 16)} }

// adapter is the exclusive adapter of gateway name.
func (r *runs) adapter(name string) *exclusiveAdapter {
	return &exclusiveAdapter{name: "poll", Adapter: adaptertest.Adapter{Name: "poll", OnRun: func(ctx context.Context, _ adapters.Inbox) error {
		r.mu.Lock()
		r.running++
		r.most = max(r.most, r.running)
		r.mu.Unlock()
		r.started <- name
		<-ctx.Done()
		r.mu.Lock()
		r.running--
		r.mu.Unlock()
		r.ended <- struct{}{}
		return nil
	}}}
}

func (r *runs) mostAtOnce() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.most
}

// next waits up to within for the next Run to start and returns its
// gateway, or "" when none started.
func (r *runs) next(within time.Duration) string {
	select {
	case name := <-r.started:
		return name
	case <-time.After(within):
		return ""
	}
}

// ownershipGateway starts gateway name on the shared store with the
// exclusive adapter a.
func ownershipGateway(t *testing.T, model *testkit.ModelServer, point func(*config.Config), name string, a adapters.Adapter) *gw {
	t.Helper()
	cfg := testConfig(t, model)
	point(&cfg)
	cfg.Store.LeaseTTL = ownershipTTL
	return startGateway(t, cfg, Options{Name: name, Adapters: []adapters.Adapter{a}})
}

func TestExclusiveAdapterRunsInOneGatewayAtATime(t *testing.T) {
	for _, st := range sharedStores {
		t.Run(st.backend, func(t *testing.T) {
			model := testkit.NewModelServer(t)
			point := st.point(t)
			r := newRuns()
			a := ownershipGateway(t, model, point, "gw-a", r.adapter("gw-a"))
			if got := r.next(10 * time.Second); got != "gw-a" {
				t.Fatalf("first Run in %q, want gw-a", got)
			}
			b := ownershipGateway(t, model, point, "gw-b", r.adapter("gw-b"))
			testkit.Eventually(t, "gw-b to say it waits", func() bool {
				return strings.Contains(b.logs.String(), "another process runs the adapter; waiting for its lease")
			})
			// Renewals every third of the TTL keep it with gw-a.
			if got := r.next(2 * ownershipTTL); got != "" {
				t.Fatalf("a Run started in %s while gw-a holds the lease", got)
			}
			if _, ok := b.g.routes.Get("poll"); !ok {
				t.Error("gw-b has no route for the adapter while it waits: sending needs no lease")
			}
			if v := testkit.MetricValue(t, a.g.Metrics().Registry(), "herald_adapter_owned", "platform=poll"); v != 1 {
				t.Errorf("gw-a herald_adapter_owned = %v, want 1", v)
			}
			if v := testkit.MetricValue(t, b.g.Metrics().Registry(), "herald_adapter_owned", "platform=poll"); v != 0 {
				t.Errorf("gw-b herald_adapter_owned = %v, want 0", v)
			}

			// Stopping gw-a ends its Run and releases the lease: gw-b
			// takes over at its next try, well within the TTL.
			a.stop()
			stopped := time.Now()
			if got := r.next(10 * time.Second); got != "gw-b" {
				t.Fatalf("after gw-a stopped the next Run is in %q, want gw-b", got)
			}
			if took := time.Since(stopped); took > ownershipTTL {
				t.Errorf("gw-b took over %v after gw-a stopped, want within the TTL %v", took, ownershipTTL)
			}
			testkit.Eventually(t, "gw-b to log the takeover", func() bool {
				return strings.Contains(b.logs.String(), "took the adapter's lease over")
			})
			if n := r.mostAtOnce(); n != 1 {
				t.Errorf("%d Runs at once, want 1", n)
			}
		})
	}
}

// A process that died holding the lease never releases it: the next one
// takes over once it expires by the store's clock, or, on a SQLite store
// that no other gateway has open, at once (sole_unix.go).
func TestExclusiveAdapterTakenOverFromADeadOwner(t *testing.T) {
	for _, st := range sharedStores {
		t.Run(st.backend, func(t *testing.T) {
			model := testkit.NewModelServer(t)
			point := st.point(t)
			cfg := testConfig(t, model)
			point(&cfg)
			db, err := OpenStore(context.Background(), cfg.Store, cfg.SQLitePath(), nil)
			if err != nil {
				t.Fatalf("OpenStore: %v", err)
			}
			defer db.Close()
			dead := db.Leases()
			if token, err := dead.Acquire(context.Background(), "adapter:poll", "dead-process", ownershipTTL); err != nil || token == 0 {
				t.Fatalf("Acquire as the dead process = %v, %v", token, err)
			}
			died := time.Now()

			r := newRuns()
			ownershipGateway(t, model, point, "gw-b", r.adapter("gw-b"))
			if got := r.next(10 * time.Second); got != "gw-b" {
				t.Fatalf("Run in %q, want gw-b", got)
			}
			took := time.Since(died)
			switch {
			case st.backend == config.BackendSQLite && took > ownershipTTL/2:
				t.Errorf("gw-b took over %v after the owner died, want at once: no other gateway had the file open", took)
			case st.backend != config.BackendSQLite && (took < ownershipTTL-50*time.Millisecond || took > 2*ownershipTTL):
				t.Errorf("gw-b took over %v after the owner died, want once its TTL %v ran out", took, ownershipTTL)
			}
		})
	}
}

// A renewal that finds another holder ends Run, and the gateway waits
// for the lease again instead of counting a failure.
func TestExclusiveAdapterStopsWhenItsLeaseIsTaken(t *testing.T) {
	model := testkit.NewModelServer(t)
	r := newRuns()
	a := ownershipGateway(t, model, sharedStores[0].point(t), "gw-a", r.adapter("gw-a"))
	if got := r.next(10 * time.Second); got != "gw-a" {
		t.Fatalf("Run in %q, want gw-a", got)
	}
	ls := a.g.Store().Leases()
	ctx := context.Background()
	if err := ls.Release(ctx, "adapter:poll", "gw-a"); err != nil {
		t.Fatal(err)
	}
	if token, err := ls.Acquire(ctx, "adapter:poll", "other", ownershipTTL); err != nil || token == 0 {
		t.Fatalf("Acquire as another process = %v, %v", token, err)
	}
	taken := time.Now()
	select {
	case <-r.ended:
	case <-time.After(ownershipTTL):
		t.Fatal("Run went on after another process took the lease")
	}
	// It runs again once the other's lease expires.
	if got := r.next(10 * time.Second); got != "gw-a" {
		t.Fatalf("Run in %q, want gw-a again", got)
	}
	if took := time.Since(taken); took < ownershipTTL-50*time.Millisecond {
		t.Errorf("gw-a ran again %v after losing the lease, before the other's expired", took)
	}
	logs := a.logs.String()
	for _, want := range []string{"another process took the adapter's lease; stopping it here", "took the adapter's lease over"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no log line %q", want)
		}
	}
	if strings.Contains(logs, "the adapter stopped; restarting it") {
		t.Error("losing the lease was logged as the adapter failing")
	}
}

// A Mounter's routes are served beside the API, outside its key: the
// adapter checks its own requests.
func TestMounterRoutesAreServed(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.HTTP.APIKey = "the-api-key"
	sent := make(chan outbox.Message, 1)
	hook := &mountAdapter{
		Adapter: adaptertest.Adapter{Name: "hook", OnSend: func(_ context.Context, m outbox.Message) adapters.SendResult {
			sent <- m
			return adapters.SendResult{Outcome: adapters.Accepted}
		}},
		mount: func(mux *http.ServeMux, inbox adapters.Inbox) {
			mux.HandleFunc("POST /hook/events", func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				in := sessions.Inbound{Conv: "hook:1", Sender: "u1", MessageID: "e1", Text: string(body)}
				if err := inbox.Deliver(r.Context(), in); err != nil {
					http.Error(w, err.Error(), http.StatusServiceUnavailable)
					return
				}
				w.WriteHeader(http.StatusAccepted)
			})
		},
	}
	h := startGateway(t, cfg, Options{Adapters: []adapters.Adapter{hook}})

	post := func(path string) int {
		res, err := http.Post("http://"+h.g.Addr()+path, "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := post("/api/v1/conversations/c1/messages"); code != http.StatusUnauthorized {
		t.Errorf("the API without its key: %d, want 401", code)
	}
	model.Script(testkit.Reply("hi back"))
	if code := post("/hook/events"); code != http.StatusAccepted {
		t.Fatalf("the adapter's route: %d, want 202", code)
	}
	select {
	case m := <-sent:
		if m.Text != "hi back" || m.Target.Chat != "1" {
			t.Errorf("sent %q to %+v", m.Text, m.Target)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the webhook's message got no reply")
	}
}

// Two parts claiming one route is a configuration mistake New reports.
func TestMounterRouteConflictFailsNew(t *testing.T) {
	model := testkit.NewModelServer(t)
	dup := func(platform string) *mountAdapter {
		return &mountAdapter{Adapter: adaptertest.Adapter{Name: platform}, mount: func(mux *http.ServeMux, _ adapters.Inbox) {
			mux.HandleFunc("POST /hook", func(http.ResponseWriter, *http.Request) {})
		}}
	}
	g, err := New(testConfig(t, model), Options{Logger: quietLogger(), Adapters: []adapters.Adapter{dup("one"), dup("two")}})
	if err == nil {
		_ = g.Shutdown(context.Background())
		t.Fatal("New with two adapters on one route succeeded")
	}
	if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "the two adapter") {
		t.Errorf("New = %v, want Invalid naming the adapter", err)
	}
}
