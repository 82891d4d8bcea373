package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/store/sqlite"
)

// delegationFixture is an API serving the delegation routes over a real
// SQLite store, as a gateway does; reads counts the service's Gets so a
// test knows a waiting request has read the store.
type delegationFixture struct {
	*fixture
	db    *sqlite.DB
	store delegation.Store
	reads chan string
	// transcripts are the service's, in a directory of the test's.
	transcripts *delegation.Transcripts
}

func newDelegationFixture(t *testing.T, edit func(*api.Options)) *delegationFixture {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "herald.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &delegationFixture{db: db, store: db.Delegations(), reads: make(chan string, 100),
		transcripts: &delegation.Transcripts{Dir: t.TempDir()}}
	svc := &delegation.Service{Store: f.store, Signals: db.Signals(), Meta: db.Sessions().Meta, MaxChildren: 3,
		Prices: testPrices, Transcripts: f.transcripts}
	f.fixture = newFixture(t, func(o *api.Options) {
		o.Routes = append(o.Routes, api.DelegationRoutes(observed{Delegations: svc, reads: f.reads}))
		if edit != nil {
			edit(o)
		}
	})
	return f
}

// testPrices price the model "priced": $2 a million tokens in, $10 out.
func testPrices(model string) (in, out float64, ok bool) { return 2, 10, model == "priced" }

// observed tells of each Get.
type observed struct {
	api.Delegations
	reads chan string
}

func (o observed) Get(ctx context.Context, id string) (delegation.Delegation, error) {
	d, err := o.Delegations.Get(ctx, id)
	select {
	case o.reads <- id:
	default:
	}
	return d, err
}

// delegationJSON is the part of a delegation answer the tests read.
type delegationJSON struct {
	ID       string             `json:"id"`
	Status   delegation.Status  `json:"status"`
	Conv     string             `json:"conv"`
	Source   string             `json:"source"`
	Done     int                `json:"done"`
	Total    int                `json:"total"`
	Created  time.Time          `json:"created_at"`
	Children []delegation.Child `json:"children"`
	Stopping []string           `json:"stopping"`
}

func decodeDelegation(t *testing.T, b []byte) delegationJSON {
	t.Helper()
	var d delegationJSON
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("answer %s: %v", b, err)
	}
	return d
}

// start posts body and returns the delegation it made.
func (f *delegationFixture) start(t *testing.T, body string) delegationJSON {
	t.Helper()
	code, b := f.do(t, "POST", "/api/v1/delegations", body)
	if code != http.StatusCreated {
		t.Fatalf("start: %d %s, want 201", code, b)
	}
	return decodeDelegation(t, b)
}

// claim takes every pending child as another instance would: they run.
func (f *delegationFixture) claim(t *testing.T) []delegation.Claim {
	t.Helper()
	_, claims, err := f.store.Claim(context.Background(), "elsewhere", 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return claims
}

func (f *delegationFixture) end(t *testing.T, c delegation.Claim, summary string) {
	t.Helper()
	if _, err := f.store.End(context.Background(), c, delegation.Result{Status: delegation.StatusCompleted, Summary: summary}); err != nil {
		t.Fatal(err)
	}
}

func TestDelegationStart(t *testing.T) {
	f := newDelegationFixture(t, nil)
	got := f.start(t, `{"conversation": "demo", "tasks": [{"goal": "read the logs", "group": "a"}, {"goal": "count the lines", "context": "in /tmp", "output_schema": {"type": "object"}, "role": "orchestrator"}]}`)
	if !strings.HasPrefix(got.ID, "deleg_") || got.Status != delegation.StatusRunning || got.Conv != "api:demo" || got.Source != "api" ||
		got.Total != 2 || got.Done != 0 || got.Created.IsZero() || len(got.Children) != 2 {
		t.Fatalf("answer %+v, want a running delegation of two children for api:demo", got)
	}

	d, err := f.store.Delegation(context.Background(), got.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Origin.String() != "api:demo" || d.User != "api:api" || d.Source != "api" {
		t.Errorf("stored delegation: origin %s, user %q, source %q; want its results sent back to api:demo", d.Origin, d.User, d.Source)
	}
	var tasks []delegation.Task
	for _, c := range d.Children {
		if c.Status != delegation.StatusPending || !strings.HasPrefix(c.ID, "sub_") {
			t.Errorf("child %s is %s, want a pending sub_…", c.ID, c.Status)
		}
		tasks = append(tasks, c.Task)
	}
	want := []delegation.Task{
		{Goal: "read the logs", Group: "a", Role: delegation.RoleLeaf},
		{Goal: "count the lines", Context: "in /tmp", OutputSchema: json.RawMessage(`{"type":"object"}`), Role: delegation.RoleOrchestrator},
	}
	if diff := cmp.Diff(want, tasks); diff != "" {
		t.Errorf("stored tasks (-want +got):\n%s", diff)
	}

	one := f.start(t, `{"conversation": "demo", "goal": "one thing", "context": "all of it"}`)
	if one.Total != 1 || one.Children[0].Goal != "one thing" || one.Children[0].Context != "all of it" {
		t.Errorf("a goal made %+v, want one child with its goal and context", one)
	}
}

func TestDelegationStartIdempotent(t *testing.T) {
	f := newDelegationFixture(t, nil)
	body := `{"conversation": "demo", "goal": "once only"}`
	var ids []string
	for range 2 {
		code, b := f.do(t, "POST", "/api/v1/delegations", body, "Idempotency-Key", "k-1")
		if code != http.StatusCreated {
			t.Fatalf("start: %d %s", code, b)
		}
		ids = append(ids, decodeDelegation(t, b).ID)
	}
	if ids[0] != ids[1] {
		t.Errorf("a retry with the same key made %s after %s, want the same delegation", ids[1], ids[0])
	}
	ds, err := f.store.List(context.Background(), delegation.Query{Conv: "api:demo"})
	if err != nil || len(ds) != 1 {
		t.Errorf("the store holds %d delegations (%v), want 1", len(ds), err)
	}
}

func TestDelegationBadInput(t *testing.T) {
	tests := []struct {
		desc string
		body string
		want string // in the message
	}{
		{desc: "not JSON", body: `{`, want: "not valid JSON"},
		{desc: "no conversation", body: `{"goal": "x"}`, want: "conversation"},
		{desc: "a conversation with a colon", body: `{"conversation": "a:b", "goal": "x"}`, want: "colons"},
		{desc: "nothing to do", body: `{"conversation": "demo"}`, want: "nothing to delegate"},
		{desc: "goal and tasks", body: `{"conversation": "demo", "goal": "x", "tasks": [{"goal": "y"}]}`, want: "either goal or tasks"},
		{desc: "context beside tasks", body: `{"conversation": "demo", "context": "c", "tasks": [{"goal": "y"}]}`, want: "each task its own"},
		{desc: "a task without a goal", body: `{"conversation": "demo", "tasks": [{"goal": "y"}, {"context": "c"}]}`, want: "task 1 has no goal"},
		{desc: "over the cap", body: `{"conversation": "demo", "tasks": [{"goal": "a"}, {"goal": "b"}, {"goal": "c"}, {"goal": "d"}]}`, want: "more than delegation.max_concurrent_children (3)"},
		{desc: "a bad output schema", body: `{"conversation": "demo", "goal": "x", "output_schema": {"type": 5}}`, want: "not a valid JSON Schema"},
	}
	f := newDelegationFixture(t, nil)
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			code, b := f.do(t, "POST", "/api/v1/delegations", tt.body)
			var e errorBody
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("answer %s: %v", b, err)
			}
			if code != http.StatusBadRequest || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tt.want) {
				t.Errorf("got %d %s, want 400 invalid_request_error saying %q", code, b, tt.want)
			}
		})
	}
	ds, err := f.store.List(context.Background(), delegation.Query{})
	if err != nil || len(ds) != 0 {
		t.Errorf("bad requests left %d delegations (%v), want none", len(ds), err)
	}
}

func TestDelegationFullConversation(t *testing.T) {
	f := newDelegationFixture(t, nil)
	f.start(t, `{"conversation": "demo", "tasks": [{"goal": "a"}, {"goal": "b"}]}`)
	code, b := f.do(t, "POST", "/api/v1/delegations", `{"conversation": "demo", "tasks": [{"goal": "c"}, {"goal": "d"}]}`)
	var e errorBody
	_ = json.Unmarshal(b, &e)
	if code != http.StatusConflict || e.Error.Type != "conflict_error" || !strings.Contains(e.Error.Message, "1 free") {
		t.Errorf("a third and fourth child with a limit of 3: %d %s, want 409 saying 1 is free", code, b)
	}
	// Another conversation has its own places.
	f.start(t, `{"conversation": "other", "tasks": [{"goal": "c"}, {"goal": "d"}]}`)
}

func TestDelegationGet(t *testing.T) {
	f := newDelegationFixture(t, nil)
	started := f.start(t, `{"conversation": "demo", "tasks": [{"goal": "a"}, {"goal": "b"}]}`)
	claims := f.claim(t)
	f.end(t, claims[0], "found it")

	code, b := f.do(t, "GET", "/api/v1/delegations/"+started.ID, "")
	if code != http.StatusOK {
		t.Fatalf("get: %d %s", code, b)
	}
	got := decodeDelegation(t, b)
	if got.ID != started.ID || got.Status != delegation.StatusRunning || got.Done != 1 || got.Total != 2 {
		t.Fatalf("get answered %+v, want 1 of 2 done, running", got)
	}
	var ended, running *delegation.Child
	for i, c := range got.Children {
		switch c.ID {
		case claims[0].Name:
			ended = &got.Children[i]
		case claims[1].Name:
			running = &got.Children[i]
		}
	}
	if ended == nil || ended.Status != delegation.StatusCompleted || ended.Result == nil || ended.Result.Summary != "found it" {
		t.Errorf("the ended child reads %+v, want completed with its result", ended)
	}
	if running == nil || running.Status != delegation.StatusRunning || running.Result != nil {
		t.Errorf("the other child reads %+v, want running without a result", running)
	}

	for _, path := range []string{"/api/v1/delegations/deleg_nope", "/api/v1/delegations/deleg_nope?wait=1s"} {
		code, b = f.do(t, "GET", path, "")
		var e errorBody
		_ = json.Unmarshal(b, &e)
		if code != http.StatusNotFound || e.Error.Type != "not_found_error" || !strings.Contains(e.Error.Message, "deleg_nope") {
			t.Errorf("GET %s: %d %s, want a JSON 404 naming it", path, code, b)
		}
	}
	for _, wait := range []string{"soon", "-1s"} {
		code, b = f.do(t, "GET", "/api/v1/delegations/"+started.ID+"?wait="+wait, "")
		if code != http.StatusBadRequest || !strings.Contains(string(b), "invalid_request_error") {
			t.Errorf("wait=%s: %d %s, want 400", wait, code, b)
		}
	}
}

// TestDelegationWait long-polls a delegation and ends its last child
// once the request has read it running: the answer is the ended
// delegation, well within the request's own wait.
func TestDelegationWait(t *testing.T) {
	f := newDelegationFixture(t, nil)
	started := f.start(t, `{"conversation": "demo", "goal": "a"}`)
	claims := f.claim(t)

	type answer struct {
		code int
		body []byte
	}
	done := make(chan answer, 1)
	go func() {
		// f.do calls t.Fatal, which belongs on the test's goroutine.
		req, _ := http.NewRequest("GET", f.srv.URL+"/api/v1/delegations/"+started.ID+"?wait=30s", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{code: -1, body: []byte(err.Error())}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			b = []byte(err.Error())
		}
		done <- answer{res.StatusCode, b}
	}()
	<-f.reads // the request read it running
	f.end(t, claims[0], "all done")
	a := <-done
	if a.code != http.StatusOK {
		t.Fatalf("wait: %d %s", a.code, a.body)
	}
	got := decodeDelegation(t, a.body)
	if got.Status != delegation.StatusCompleted || got.Done != 1 || got.Children[0].Result == nil || got.Children[0].Result.Summary != "all done" {
		t.Errorf("wait answered %+v, want the completed delegation with its result", got)
	}
}

// TestDelegationWaitPasses: a wait that passes answers the delegation
// as it stands, still running.
func TestDelegationWaitPasses(t *testing.T) {
	f := newDelegationFixture(t, nil)
	started := f.start(t, `{"conversation": "demo", "goal": "a"}`)
	f.claim(t)
	code, b := f.do(t, "GET", "/api/v1/delegations/"+started.ID+"?wait=600ms", "")
	if got := decodeDelegation(t, b); code != http.StatusOK || got.Status != delegation.StatusRunning {
		t.Errorf("a wait that passed: %d %s, want 200 running", code, b)
	}
}

// TestDelegationWaitClientGone: a waiting request ends when its client
// goes; the server's Close waits for every handler, so a wait that did
// not end would hold the test for its five minutes.
func TestDelegationWaitClientGone(t *testing.T) {
	f := newDelegationFixture(t, nil)
	started := f.start(t, `{"conversation": "demo", "goal": "a"}`)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+"/api/v1/delegations/"+started.ID+"?wait=5m", nil)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		errc <- err
	}()
	<-f.reads
	cancel()
	if err := <-errc; err == nil {
		t.Error("the request answered, want it cancelled")
	}
	closed := make(chan struct{})
	go func() { f.srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting handler did not end when its client went")
	}
}

func TestDelegationCancel(t *testing.T) {
	f := newDelegationFixture(t, nil)
	ctx := context.Background()
	started := f.start(t, `{"conversation": "demo", "tasks": [{"goal": "a"}, {"goal": "b"}, {"goal": "c"}]}`)
	claims := f.claim(t) // all three run elsewhere
	f.end(t, claims[2], "early")
	_, from, err := f.db.Signals().SignalsAfter(ctx, "", 1)
	if err != nil {
		t.Fatal(err)
	}

	code, b := f.do(t, "POST", "/api/v1/delegations/"+started.ID+"/cancel", "")
	if code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, b)
	}
	got := decodeDelegation(t, b)
	want := []string{claims[0].Name, claims[1].Name}
	if got.ID != started.ID || !cmp.Equal(sorted(got.Stopping), sorted(want)) {
		t.Errorf("cancel answered %s stopping %v, want %v", got.ID, got.Stopping, want)
	}
	sigs, _, err := f.db.Signals().SignalsAfter(ctx, from, 100)
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, s := range sigs {
		if s.Kind != delegation.SignalCancel || s.Conv != "api:demo" {
			t.Errorf("signal %+v, want delegation.cancel for api:demo", s)
		}
		targets = append(targets, s.Target)
	}
	if !cmp.Equal(sorted(targets), sorted(want)) {
		t.Errorf("stop signals went to %v, want the running children %v", targets, want)
	}

	// Ended, it answers as it is and signals nothing.
	f.end(t, claims[0], "stopped")
	f.end(t, claims[1], "stopped")
	_, from, _ = f.db.Signals().SignalsAfter(ctx, "", 1)
	code, b = f.do(t, "POST", "/api/v1/delegations/"+started.ID+"/cancel", "")
	if got := decodeDelegation(t, b); code != http.StatusOK || got.Status != delegation.StatusCompleted || len(got.Stopping) != 0 {
		t.Errorf("cancel of an ended delegation: %d %s, want 200 as it is", code, b)
	}
	if sigs, _, _ := f.db.Signals().SignalsAfter(ctx, from, 100); len(sigs) != 0 {
		t.Errorf("cancel of an ended delegation sent %v", sigs)
	}

	code, b = f.do(t, "POST", "/api/v1/delegations/deleg_nope/cancel", "")
	if code != http.StatusNotFound || !strings.Contains(string(b), "not_found_error") {
		t.Errorf("cancel of an unknown delegation: %d %s, want 404", code, b)
	}
	code, _ = f.do(t, "GET", "/api/v1/delegations/"+started.ID+"/cancel", "")
	if code != http.StatusMethodNotAllowed {
		t.Errorf("GET …/cancel: %d, want 405", code)
	}
}

func TestDelegationRoutesNeedTheKey(t *testing.T) {
	f := newDelegationFixture(t, func(o *api.Options) { o.APIKey = testKey })
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/api/v1/delegations", `{"conversation": "demo", "goal": "a"}`},
		{"GET", "/api/v1/delegations/deleg_x", ""},
		{"POST", "/api/v1/delegations/deleg_x/cancel", ""},
		{"GET", "/api/v1/delegations", ""},
		{"GET", "/api/v1/delegations/deleg_x/children/sub_x/transcript", ""},
		{"POST", "/api/v1/delegations/deleg_x/children/sub_x/stop", ""},
	} {
		if code, b := f.do(t, r.method, r.path, r.body); code != http.StatusUnauthorized || !strings.Contains(string(b), "authentication_error") {
			t.Errorf("%s %s without the key: %d %s, want 401", r.method, r.path, code, b)
		}
	}
	if code, b := f.do(t, "POST", "/api/v1/delegations", `{"conversation": "demo", "goal": "a"}`, "Authorization", "Bearer "+testKey); code != http.StatusCreated {
		t.Errorf("with the key: %d %s, want 201", code, b)
	}
	if ds, _ := f.store.List(context.Background(), delegation.Query{}); len(ds) != 1 {
		t.Errorf("the store holds %d delegations, want the one started with the key", len(ds))
	}
}

func TestDelegationRoutesOnlyWithAService(t *testing.T) {
	f := newFixture(t, nil)
	if code, _ := f.do(t, "POST", "/api/v1/delegations", `{"conversation": "demo", "goal": "a"}`); code != http.StatusNotFound {
		t.Errorf("without a delegation service: %d, want 404", code)
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// TestDelegationScopedToAConversation: a read or cancel that names a
// conversation (?conversation=) answers 404 for another conversation's
// delegation, as for an unknown one, and cancels nothing of it.
func TestDelegationScopedToAConversation(t *testing.T) {
	f := newDelegationFixture(t, nil)
	started := f.start(t, `{"conversation": "demo", "goal": "a"}`)
	claims := f.claim(t)

	code, b := f.do(t, "GET", "/api/v1/delegations/"+started.ID+"?conversation=demo&wait=0s", "")
	if got := decodeDelegation(t, b); code != http.StatusOK || got.ID != started.ID {
		t.Errorf("GET scoped to its own conversation: %d %s, want 200", code, b)
	}
	for _, path := range []string{
		"/api/v1/delegations/" + started.ID + "?conversation=other",
		"/api/v1/delegations/" + started.ID + "?conversation=other&wait=1s",
	} {
		code, b = f.do(t, "GET", path, "")
		if code != http.StatusNotFound || !strings.Contains(string(b), "not_found_error") {
			t.Errorf("GET %s: %d %s, want 404", path, code, b)
		}
	}
	code, b = f.do(t, "POST", "/api/v1/delegations/"+started.ID+"/cancel?conversation=other", "")
	if code != http.StatusNotFound {
		t.Errorf("cancel scoped to another conversation: %d %s, want 404", code, b)
	}
	if c, err := f.store.Child(context.Background(), claims[0].Name); err != nil || c.Status != delegation.StatusRunning {
		t.Errorf("after another conversation's cancel the child is %s (%v), want running", c.Status, err)
	}
	code, b = f.do(t, "GET", "/api/v1/delegations/"+started.ID+"?conversation=a:b", "")
	if code != http.StatusBadRequest || !strings.Contains(string(b), "conversation") {
		t.Errorf("a malformed conversation: %d %s, want 400 naming it", code, b)
	}
	code, b = f.do(t, "POST", "/api/v1/delegations/"+started.ID+"/cancel?conversation=demo", "")
	if got := decodeDelegation(t, b); code != http.StatusOK || len(got.Stopping) != 1 {
		t.Errorf("cancel scoped to its own conversation: %d %s, want the child stopping", code, b)
	}
}
