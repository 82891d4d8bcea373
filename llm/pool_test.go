package llm_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
)

// Keys of the pool tests: long enough to look real, told apart by their
// first letter.
const (
	keyA = "sk-aaaa-pool-test-0001"
	keyB = "sk-bbbb-pool-test-0002"
	keyC = "sk-cccc-pool-test-0003"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// keyScript answers each request by the key it came with: the next step
// scripted for that key, else a reply naming the key.
type keyScript struct {
	mu    sync.Mutex
	steps map[string][]testkit.Step
}

func (s *keyScript) add(key string, steps ...testkit.Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps[key] = append(s.steps[key], steps...)
}

func (s *keyScript) respond(r testkit.RecordedRequest) testkit.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := r.APIKey()
	if q := s.steps[k]; len(q) > 0 {
		s.steps[k] = q[1:]
		return q[0]
	}
	return testkit.Reply("from " + k[:7])
}

// poolRig is a pool of keys on a scripted server, with a fake clock and
// recorded waits.
type poolRig struct {
	t      *testing.T
	ms     *testkit.ModelServer
	script *keyScript
	clk    *clock.Fake
	store  *llm.MemoryPoolStore
	pool   *llm.Pool
	client llm.Client
	sleep  *sleeper
}

type rigOpts struct {
	observer   llm.Observer
	strategy   string
	maxRetries int // 0: three
	creds      []llm.Credential
	rand       func(int) int
	anthropic  bool
	store      *llm.MemoryPoolStore
	fallback   bool // a model comes after the pool's (PoolOptions.Fallback)
	setting    string
}

func newPoolRig(t *testing.T, o rigOpts) *poolRig {
	t.Helper()
	r := &poolRig{t: t, ms: testkit.NewModelServer(t), script: &keyScript{steps: map[string][]testkit.Step{}}, clk: clock.NewFake(t0), sleep: &sleeper{}}
	r.ms.Respond(r.script.respond)
	r.store = o.store
	if r.store == nil {
		r.store = llm.NewMemoryPoolStore(r.clk)
	}
	if o.creds == nil {
		o.creds = []llm.Credential{{Key: keyA}, {Key: keyB}, {Key: keyC}}
	}
	pool, err := llm.NewPool(llm.PoolOptions{Name: "test", Credentials: o.creds, Strategy: o.strategy, Store: r.store, Rand: o.rand, Observer: o.observer,
		Fallback: o.fallback, Setting: o.setting})
	if err != nil {
		t.Fatal(err)
	}
	r.pool = pool
	opts := llm.OpenAIOptions{
		BaseURL:    r.ms.URL(),
		Model:      "test-model",
		Timeout:    10 * time.Second,
		MaxRetries: o.maxRetries,
		Backoff:    func(attempt int) time.Duration { return time.Duration(attempt) * time.Second },
		Sleep:      r.sleep.Sleep,
		Clock:      r.clk,
		Pool:       pool,
	}
	if o.anthropic {
		opts.BaseURL = r.ms.AnthropicURL()
		r.client, err = llm.NewAnthropic(opts)
	} else {
		r.client, err = llm.NewOpenAI(opts)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ask makes one request of conversation conv and returns the reply's
// text and the error.
func (r *poolRig) ask(conv string) (string, error) {
	req := ask("hi")
	req.User = conv
	resp, err := r.client.Complete(context.Background(), req)
	if err != nil {
		return "", err
	}
	return resp.Message.Content, nil
}

// askAfter asks once after each wait on the fake clock, each ask
// answered.
func (r *poolRig) askAfter(waits ...time.Duration) {
	r.t.Helper()
	for _, d := range waits {
		r.clk.Advance(d)
		if _, err := r.ask(""); err != nil {
			r.t.Fatal(err)
		}
	}
}

// keysSince is the first letters of the keys requests from seq on came with.
func (r *poolRig) keysSince(seq int) string {
	var b strings.Builder
	for _, req := range r.ms.Requests() {
		if req.Seq > seq {
			b.WriteString(req.APIKey()[3:4])
		}
	}
	return b.String()
}

// status is each key's status, by the key's first letter: "ok", "dead",
// or "cooling until <time since t0>".
func (r *poolRig) status() map[string]string {
	r.t.Helper()
	st, err := r.pool.Status(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[string]string{}
	for i, s := range st {
		name := string("abc"[i])
		out[name] = s.Status
		if s.Status == "cooling" {
			out[name] += " " + s.CoolingUntil.Sub(t0).String() + " " + string(s.Reason)
		}
	}
	return out
}

// openAIRateLimit is OpenAI's ordinary per-minute 429, whose text
// points at the billing page.
var openAIRateLimit = testkit.Step{Status: 429, RetryAfter: "20", ErrorType: "requests", ErrorCode: "rate_limit_exceeded",
	Error: "Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. " +
		"Visit https://platform.openai.com/account/rate-limits to learn more. You can increase your rate limit by adding a payment method to your account at https://platform.openai.com/account/billing."}

func TestPoolActsByClass(t *testing.T) {
	usageLimit := testkit.Step{Status: 429, Error: "The usage limit has been reached", ErrorType: "usage_limit_reached", ResetsIn: 5400}
	tests := []struct {
		desc      string
		steps     []testkit.Step // for key a
		wantKeys  string
		wantErr   llm.Class
		wantWaits []time.Duration
		wantA     string
	}{
		{desc: "a 429 retries the same key after its retry-after", steps: []testkit.Step{testkit.RateLimited("2")},
			wantKeys: "aa", wantWaits: []time.Duration{2 * time.Second}, wantA: "ok"},
		{desc: "a second 429 cools the key and rotates", steps: []testkit.Step{testkit.RateLimited("2"), testkit.RateLimited("30")},
			wantKeys: "aab", wantWaits: []time.Duration{2 * time.Second}, wantA: "cooling 30s rate_limited"},
		{desc: "a 429 with no retry-after cools for model.cooldowns.rate_limit", steps: []testkit.Step{testkit.RateLimited(""), testkit.RateLimited("")},
			wantKeys: "aab", wantWaits: []time.Duration{time.Second}, wantA: "cooling 1m0s rate_limited"},
		{desc: "a spent usage limit rotates at once and cools until its reset", steps: []testkit.Step{usageLimit},
			wantKeys: "ab", wantA: "cooling 1h30m0s rate_limited"},
		{desc: "402 cools for the billing cooldown and rotates at once", steps: []testkit.Step{testkit.Fail(402, "Payment required")},
			wantKeys: "ab", wantA: "cooling 1h0m0s payment"},
		{desc: "a billing 403 is billing", steps: []testkit.Step{testkit.Fail(403, "Your billing hard limit was reached")},
			wantKeys: "ab", wantA: "cooling 1h0m0s payment"},
		{desc: "a quota 429 is billing", steps: []testkit.Step{{Status: 429, Error: "You exceeded your current quota, please check your plan and billing details.", ErrorCode: "insufficient_quota"}},
			wantKeys: "ab", wantA: "cooling 1h0m0s payment"},
		{desc: "OpenAI's rate limit, pointing at the billing page, retries the same key after its retry-after", steps: []testkit.Step{openAIRateLimit},
			wantKeys: "aa", wantWaits: []time.Duration{20 * time.Second}, wantA: "ok"},
		{desc: "a 403 denying the model fails without cooling", steps: []testkit.Step{testkit.Fail(403, "Project proj_x does not have access to model gpt-5")},
			wantKeys: "a", wantErr: llm.ClassModelNotFound, wantA: "ok"},
		{desc: "a 403 refusing the caller's region fails without cooling", steps: []testkit.Step{{Status: 403, Error: "Country, region, or territory not supported", ErrorCode: "unsupported_country_region_territory"}},
			wantKeys: "a", wantErr: llm.ClassBadRequest, wantA: "ok"},
		{desc: "a 403 permission error fails without cooling", steps: []testkit.Step{{Status: 403, Error: "This organization has been disabled for this feature.", ErrorType: "permission_error"}},
			wantKeys: "a", wantErr: llm.ClassBadRequest, wantA: "ok"},
		{desc: "a 403 refusing the key cools five minutes and rotates", steps: []testkit.Step{testkit.Fail(403, "Forbidden")},
			wantKeys: "ab", wantA: "cooling 5m0s auth"},
		{desc: "a plain 401 cools five minutes and rotates", steps: []testkit.Step{{Status: 401, Error: "Session expired", ErrorCode: "expired"}},
			wantKeys: "ab", wantA: "cooling 5m0s auth"},
		{desc: "an invalid key is dead", steps: []testkit.Step{testkit.Fail(401, "Incorrect API key provided")},
			wantKeys: "ab", wantA: "dead"},
		{desc: "a 5xx retries the same key with backoff", steps: []testkit.Step{testkit.Fail(500, "oops"), testkit.Fail(503, "busy")},
			wantKeys: "aaa", wantWaits: []time.Duration{time.Second, 2 * time.Second}, wantA: "ok"},
		{desc: "a 5xx asking a longer wait than the client waits fails on its key", steps: []testkit.Step{{Status: 503, Error: "down for maintenance", RetryAfter: "3600"}},
			wantKeys: "a", wantErr: llm.ClassUnavailable, wantA: "ok"},
		{desc: "529 retries the same key", steps: []testkit.Step{testkit.Fail(529, "Overloaded")},
			wantKeys: "aa", wantWaits: []time.Duration{time.Second}, wantA: "ok"},
		{desc: "404 model not found fails without rotating", steps: []testkit.Step{testkit.Fail(404, "The model `x` does not exist")},
			wantKeys: "a", wantErr: llm.ClassModelNotFound, wantA: "ok"},
		{desc: "400 fails without rotating", steps: []testkit.Step{testkit.Fail(400, "messages: bad")},
			wantKeys: "a", wantErr: llm.ClassBadRequest, wantA: "ok"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := newPoolRig(t, rigOpts{})
			r.script.add(keyA, tc.steps...)
			_, err := r.ask("")
			if got := llm.ClassOf(err); got != tc.wantErr {
				t.Fatalf("class = %q (%v), want %q", got, err, tc.wantErr)
			}
			if got := r.keysSince(0); got != tc.wantKeys {
				t.Errorf("keys tried = %q, want %q", got, tc.wantKeys)
			}
			if diff := cmp.Diff(tc.wantWaits, r.sleep.Waits()); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			if got := r.status()["a"]; got != tc.wantA {
				t.Errorf("key a = %q, want %q", got, tc.wantA)
			}
		})
	}
}

func TestPoolStrategies(t *testing.T) {
	tests := []struct {
		desc     string
		strategy string
		creds    []llm.Credential
		rand     func(int) int
		want     string
	}{
		{desc: "fill_first takes the lowest priority", strategy: llm.FillFirst,
			creds: []llm.Credential{{Key: keyA, Priority: 2}, {Key: keyB, Priority: 1}, {Key: keyC, Priority: 3}}, want: "bbbb"},
		{desc: "fill_first is the default", creds: []llm.Credential{{Key: keyA, Priority: 5}, {Key: keyB, Priority: 5}, {Key: keyC}}, want: "cccc"},
		// a was used 5 times, then c twice, before the requests.
		{desc: "round_robin takes the oldest last use", strategy: llm.RoundRobin, want: "bacb"},
		{desc: "least_used takes the fewest uses", strategy: llm.LeastUsed, want: "bbcb"},
		{desc: "random takes what Rand says", strategy: llm.Random, rand: func(n int) int { return n - 1 }, want: "cccc"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := newPoolRig(t, rigOpts{strategy: tc.strategy, creds: tc.creds, rand: tc.rand})
			if tc.creds == nil {
				for _, k := range []string{keyA, keyA, keyA, keyA, keyA, keyC, keyC} {
					if err := r.store.UseKey(context.Background(), "test", llm.KeyID(k), ""); err != nil {
						t.Fatal(err)
					}
				}
			}
			for range 4 {
				if _, err := r.ask(""); err != nil {
					t.Fatal(err)
				}
			}
			if got := r.keysSince(0); got != tc.want {
				t.Errorf("keys = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPoolCoolingEndsOnTheClock(t *testing.T) {
	r := newPoolRig(t, rigOpts{})
	r.script.add(keyA, testkit.Fail(402, "Payment required"))
	r.askAfter(0, 59*time.Minute, time.Minute)
	if got := r.keysSince(0); got != "abba" {
		t.Errorf("keys = %q, want a, then b while a cools for an hour, then a again", got)
	}
}

func TestPoolHonoursResetTimes(t *testing.T) {
	tokensReset := http.Header{"Anthropic-Ratelimit-Tokens-Reset": {t0.Add(3 * time.Hour).Format(time.RFC3339)}, "X-Ratelimit-Reset-Requests": {"20s"}}
	tests := []struct {
		desc  string
		steps []testkit.Step // for key a
		wantA string
	}{
		{desc: "a rate limit cools until its windows' reset headers",
			steps: []testkit.Step{testkit.RateLimited(""), {Status: 429, Error: "Rate limit reached", Headers: http.Header{"X-Ratelimit-Reset-Tokens": {"6m0s"}}}},
			wantA: "cooling 6m0s rate_limited"},
		{desc: "billing ignores the rate limit reset headers every answer carries",
			steps: []testkit.Step{{Status: 402, Error: "credit balance too low", Headers: tokensReset}},
			wantA: "cooling 1h0m0s payment"},
		{desc: "a spent OpenAI quota ignores the requests window's reset",
			steps: []testkit.Step{{Status: 429, Error: "You exceeded your current quota, please check your plan and billing details.", ErrorCode: "insufficient_quota", Headers: tokensReset}},
			wantA: "cooling 1h0m0s payment"},
		{desc: "billing cools for the Retry-After it names",
			steps: []testkit.Step{{Status: 402, Error: "Payment required", RetryAfter: "600", Headers: tokensReset}},
			wantA: "cooling 10m0s payment"},
		{desc: "billing cools until the reset its body names",
			steps: []testkit.Step{{Status: 402, Error: "Payment required", ResetsIn: 7200, Headers: tokensReset}},
			wantA: "cooling 2h0m0s payment"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := newPoolRig(t, rigOpts{})
			r.script.add(keyA, tc.steps...)
			if _, err := r.ask(""); err != nil {
				t.Fatal(err)
			}
			if got := r.status()["a"]; got != tc.wantA {
				t.Errorf("key a = %q, want %q", got, tc.wantA)
			}
		})
	}
	t.Run("a reset in the body", func(t *testing.T) {
		r := newPoolRig(t, rigOpts{})
		r.script.add(keyA, testkit.Step{Status: 429, Error: "usage limit reached", ResetsIn: 600})
		r.askAfter(0, 9*time.Minute, time.Minute)
		if got := r.keysSince(0); got != "abba" {
			t.Errorf("keys = %q, want a back after the 10 minutes the body named", got)
		}
	})
}

// TestPoolCoolsByTheStoresClock: the waits a server names count from the
// store's clock, which every process reads the cooling by, however far
// the client's clock is from it.
func TestPoolCoolsByTheStoresClock(t *testing.T) {
	tests := []struct {
		desc  string
		steps []testkit.Step // for key a
		wantA string         // the store's clock is an hour ahead of the client's
	}{
		{desc: "billing's Retry-After", steps: []testkit.Step{{Status: 402, Error: "Payment required", RetryAfter: "600"}},
			wantA: "cooling 1h10m0s payment"},
		{desc: "a spent quota's reset in the body", steps: []testkit.Step{{Status: 429, Error: "usage limit reached", ResetsIn: 900}},
			wantA: "cooling 1h15m0s rate_limited"},
		{desc: "a rate limit's reset header as a wait",
			steps: []testkit.Step{testkit.RateLimited(""), {Status: 429, Error: "Rate limit reached", Headers: http.Header{"X-Ratelimit-Reset-Requests": {"45s"}}}},
			wantA: "cooling 1h0m45s rate_limited"},
		{desc: "a rate limit's Retry-After", steps: []testkit.Step{testkit.RateLimited("2"), testkit.RateLimited("30")},
			wantA: "cooling 1h0m30s rate_limited"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := newPoolRig(t, rigOpts{store: llm.NewMemoryPoolStore(clock.NewFake(t0.Add(time.Hour)))})
			r.script.add(keyA, tc.steps...)
			if _, err := r.ask(""); err != nil {
				t.Fatal(err)
			}
			if got := r.status()["a"]; got != tc.wantA {
				t.Errorf("key a = %q, want %q", got, tc.wantA)
			}
		})
	}
}

func TestPoolDeadKeyNeverChosen(t *testing.T) {
	store := llm.NewMemoryPoolStore(clock.NewFake(t0))
	r := newPoolRig(t, rigOpts{store: store})
	r.script.add(keyA, testkit.Fail(401, "This API key has been revoked"))
	for range 3 {
		if _, err := r.ask(""); err != nil {
			t.Fatal(err)
		}
		r.clk.Advance(24 * time.Hour)
	}
	if got := r.keysSince(0); got != "abbb" {
		t.Errorf("keys = %q, want a once, then never again", got)
	}
	// Another process with the same keys finds it dead too, and so does a
	// pool on the same host with other keys holding it (a delegation key
	// list, a gateway of the next config mid-rollout): dead is the key's,
	// not its key set's. A revival brings it back for both.
	same := newPoolRig(t, rigOpts{store: store})
	if _, err := same.ask(""); err != nil {
		t.Fatal(err)
	}
	other := newPoolRig(t, rigOpts{store: store, creds: []llm.Credential{{Key: keyA}, {Key: keyC}}})
	if _, err := other.ask(""); err != nil {
		t.Fatal(err)
	}
	if got := same.keysSince(0) + other.keysSince(0); got != "bc" {
		t.Errorf("keys = %q, want b from the same keys, c from the other pool", got)
	}
	if got := other.status()["a"]; got != "dead" {
		t.Errorf("key a in the other pool = %q, want dead", got)
	}
	if err := other.pool.Revive(context.Background(), "k_nope"); errs.CodeOf(err) != errs.NotFound {
		t.Errorf("reviving a key the pool has not = %v, want not found", err)
	}
	if err := other.pool.Revive(context.Background(), llm.KeyID(keyA)); err != nil {
		t.Fatal(err)
	}
	if _, err := same.ask(""); err != nil {
		t.Fatal(err)
	}
	if got := same.keysSince(1); got != "a" {
		t.Errorf("keys after reviving = %q, want a", got)
	}
}

// Revive clears a key's marks once a pool name, in the pools that hold
// it: a pool of the same name stands for its twin, and one without the
// key is passed over. No pool with the key is not found.
func TestReviveClearsTheKeyInEveryPoolHoldingIt(t *testing.T) {
	store := llm.NewMemoryPoolStore(clock.NewFake(t0))
	newPool := func(name string, keys ...string) *llm.Pool {
		t.Helper()
		creds := make([]llm.Credential, len(keys))
		for i, k := range keys {
			creds[i] = llm.Credential{Key: k}
		}
		p, err := llm.NewPool(llm.PoolOptions{Name: name, Credentials: creds, Store: store})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	main, twin, other, without := newPool("main", keyA, keyB), newPool("main", keyA), newPool("other", keyC, keyA), newPool("third", keyB)
	ctx := context.Background()
	for _, p := range []*llm.Pool{main, other} {
		if err := store.MarkKey(ctx, p.Name(), llm.KeyState{ID: llm.KeyID(keyA), Reason: llm.ClassAuth, DeadFor: p.Generation()}); err != nil {
			t.Fatal(err)
		}
	}
	keyState := func(p *llm.Pool) string {
		t.Helper()
		st, err := p.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range st {
			if k.ID == llm.KeyID(keyA) {
				return k.Status
			}
		}
		return ""
	}
	if got := keyState(twin); got != "dead" {
		t.Fatalf("key a in main's twin is %q before the revival, want dead", got)
	}
	revived, err := llm.Revive(ctx, []*llm.Pool{main, twin, without, other}, llm.KeyID(keyA))
	if err != nil || len(revived) != 2 || revived[0] != main || revived[1] != other {
		t.Fatalf("Revive = %v, %v; want main and other", revived, err)
	}
	for _, p := range []*llm.Pool{main, twin, other} {
		if got := keyState(p); got != "ok" {
			t.Errorf("key a in %s is %q after the revival, want ok", p.Name(), got)
		}
	}
	if _, err := llm.Revive(ctx, []*llm.Pool{main, without}, "k_nope"); errs.CodeOf(err) != errs.NotFound {
		t.Errorf("reviving a key no pool has = %v, want not found", err)
	}
}

// TestPoolMarkOnlyLengthens: requests in flight on one key fail after
// another declared it dead or cooled it long; their later, shorter
// coolings leave it as it was.
func TestPoolMarkOnlyLengthens(t *testing.T) {
	r := newPoolRig(t, rigOpts{})
	r.script.add(keyA, testkit.Fail(401, "This API key has been revoked"))
	r.script.add(keyB, testkit.Fail(402, "Payment required"))
	if _, err := r.ask(""); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []string{keyA, keyB} {
		if err := r.store.MarkKey(ctx, "test", llm.KeyState{ID: llm.KeyID(k), CoolingUntil: t0.Add(30 * time.Second), Reason: llm.ClassRateLimited}); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(map[string]string{"a": "dead", "b": "cooling 1h0m0s payment", "c": "ok"}, r.status()); diff != "" {
		t.Errorf("keys after the late marks (-want +got):\n%s", diff)
	}
}

// TestPoolOfOneKey: with one key and no fallback there is nothing to
// move to, so a refusal of the key (401, 402, a revoked key) marks
// nothing: the request fails saying what it is and which setting holds
// the key, and the next request tries the key again at once. A mark
// another pool left on the key does not keep it from the requests
// either; a rate limit still cools it until the server's reset.
func TestPoolOfOneKey(t *testing.T) {
	const setting = "HERALD_MODEL_API_KEY / model.api_key"
	tests := []struct {
		desc  string
		step  testkit.Step
		class llm.Class
		words string // in the user message
	}{
		{"a revoked key", testkit.Fail(401, "Incorrect API key provided"), llm.ClassAuth, "the model API key was rejected (check " + setting + ")"},
		{"a plain 401", testkit.Step{Status: 401, Error: "Session expired", ErrorCode: "expired"}, llm.ClassAuth, "(check " + setting + ")"},
		{"a 403 refusing the key", testkit.Fail(403, "Forbidden"), llm.ClassAuth, "(HTTP 403; check " + setting + ")"},
		{"billing", testkit.Fail(402, "Payment required"), llm.ClassPayment, "billing reasons: add credit or check the plan of the account behind the key in " + setting},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := newPoolRig(t, rigOpts{creds: []llm.Credential{{Key: keyA}}, setting: setting})
			r.script.add(keyA, tc.step)
			_, err := r.ask("c")
			if llm.ClassOf(err) != tc.class || !strings.Contains(llm.UserMessage(err), tc.words) {
				t.Fatalf("ask = %v (%q), want %s saying %q", err, llm.UserMessage(err), tc.class, tc.words)
			}
			if strings.Contains(llm.UserMessage(err), "all 1 keys") {
				t.Errorf("user message %q speaks of a pool", llm.UserMessage(err))
			}
			if got := r.status()["a"]; got != "ok" {
				t.Errorf("key a = %q, want ok: one key is not set aside", got)
			}
			// The next request, with no time passed, tries the key again.
			text, err := r.ask("c")
			if err != nil || text != "from sk-aaaa" {
				t.Errorf("next ask = %q, %v; want the key's reply", text, err)
			}
			if got := r.keysSince(0); got != "aa" {
				t.Errorf("keys = %q, want a, then a again", got)
			}
		})
	}

	t.Run("a mark left by another pool", func(t *testing.T) {
		store := llm.NewMemoryPoolStore(clock.NewFake(t0))
		ctx := context.Background()
		if err := store.MarkKey(ctx, "test", llm.KeyState{ID: llm.KeyID(keyA), Reason: llm.ClassAuth, DeadFor: "other"}); err != nil {
			t.Fatal(err)
		}
		r := newPoolRig(t, rigOpts{creds: []llm.Credential{{Key: keyA}}, store: store})
		if text, err := r.ask(""); err != nil || text != "from sk-aaaa" {
			t.Errorf("ask = %q, %v; want the key tried despite its dead mark", text, err)
		}
		// With a fallback to go to, the mark holds.
		fb := newPoolRig(t, rigOpts{creds: []llm.Credential{{Key: keyA}}, store: store, fallback: true})
		if _, err := fb.ask(""); llm.ClassOf(err) != llm.ClassAuth || fb.ms.Count() != 0 {
			t.Errorf("ask with a fallback = %v after %d calls, want the dead key refused without a call", err, fb.ms.Count())
		}
	})

	t.Run("a rate limit still cools", func(t *testing.T) {
		r := newPoolRig(t, rigOpts{creds: []llm.Credential{{Key: keyA}}})
		r.script.add(keyA, testkit.RateLimited("2"), testkit.RateLimited("30"))
		_, err := r.ask("")
		if llm.ClassOf(err) != llm.ClassRateLimited || llm.RetryAfterOf(err) != 30*time.Second {
			t.Fatalf("ask = %v (retry after %s), want rate limited for 30s", err, llm.RetryAfterOf(err))
		}
		if msg, want := llm.UserMessage(err), "refused the API key for now: the only key cooling until 12:00 UTC (rate limit)"; !strings.Contains(msg, want) {
			t.Errorf("user message %q, want %q", msg, want)
		}
		if got := r.status()["a"]; got != "cooling 30s rate_limited" {
			t.Errorf("key a = %q, want cooling for its Retry-After", got)
		}
	})

	t.Run("with a fallback, a refusal marks the key", func(t *testing.T) {
		r := newPoolRig(t, rigOpts{creds: []llm.Credential{{Key: keyA}}, fallback: true})
		r.script.add(keyA, testkit.Fail(402, "Payment required"))
		if _, err := r.ask(""); llm.ClassOf(err) != llm.ClassRateLimited {
			t.Errorf("ask = %v, want the pool out of keys, for the chain to fall back", err)
		}
		if got := r.status()["a"]; got != "cooling 1h0m0s payment" {
			t.Errorf("key a = %q, want cooling for billing", got)
		}
	})
}

func TestPoolRotationIsNotARetry(t *testing.T) {
	r := newPoolRig(t, rigOpts{maxRetries: -1})
	r.script.add(keyA, testkit.Fail(402, "Payment required"))
	r.script.add(keyB, testkit.Step{Status: 401, Error: "expired", ErrorCode: "expired"})
	text, err := r.ask("")
	if err != nil {
		t.Fatalf("ask: %v, want c to answer: two rotations spend no retries", err)
	}
	if text != "from sk-cccc" || r.keysSince(0) != "abc" {
		t.Errorf("reply %q by keys %q, want c's after a and b", text, r.keysSince(0))
	}
	// With no retries, a 5xx ends the request on its key.
	r.script.add(keyC, testkit.Fail(500, "oops"))
	if _, err := r.ask(""); llm.ClassOf(err) != llm.ClassUnavailable {
		t.Errorf("ask = %v, want unavailable", err)
	}
	if got := r.keysSince(3); got != "c" {
		t.Errorf("keys = %q, want c alone", got)
	}
}

func TestPoolExhausted(t *testing.T) {
	r := newPoolRig(t, rigOpts{creds: []llm.Credential{{Key: keyA}, {Key: keyB}}})
	r.script.add(keyA, testkit.Fail(402, "Payment required"))
	r.script.add(keyB, testkit.RateLimited("120"))
	_, err := r.ask("")
	if llm.ClassOf(err) != llm.ClassRateLimited || errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("ask = %v (%s), want rate_limited", err, errs.CodeOf(err))
	}
	if got := llm.RetryAfterOf(err); got != 2*time.Minute {
		t.Errorf("RetryAfterOf = %s, want the 2m until the first key is back", got)
	}
	if want := "all 2 keys cooling until 12:02 UTC"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if msg := llm.UserMessage(err); !strings.Contains(msg, "all 2 keys cooling until 12:02 UTC (billing, rate limit)") || strings.Contains(msg, "rejected") {
		t.Errorf("user message %q", msg)
	}
	// The next request makes no call at all.
	n := r.ms.Count()
	if _, err := r.ask(""); llm.ClassOf(err) != llm.ClassRateLimited {
		t.Errorf("second ask = %v", err)
	}
	if r.ms.Count() != n {
		t.Errorf("an exhausted pool still called the server")
	}

	// A dead key is not said to be cooling.
	mixed := newPoolRig(t, rigOpts{creds: []llm.Credential{{Key: keyA}, {Key: keyB}}})
	mixed.script.add(keyA, testkit.Fail(401, "Incorrect API key provided"))
	mixed.script.add(keyB, testkit.Fail(402, "Payment required"))
	_, err = mixed.ask("")
	if want := "all 2 keys out: 1 cooling until 13:00 UTC, 1 rejected as invalid or revoked"; llm.ClassOf(err) != llm.ClassRateLimited || !strings.Contains(llm.UserMessage(err), want) {
		t.Errorf("ask with a key dead and one cooling = %v (%s), want it to say %q", err, llm.UserMessage(err), want)
	}

	// One key is a pool to mark only with a fallback to move to.
	dead := newPoolRig(t, rigOpts{creds: []llm.Credential{{Key: keyA}}, fallback: true})
	dead.script.add(keyA, testkit.Fail(401, "Incorrect API key provided"))
	_, err = dead.ask("")
	var e *llm.Error
	if !errors.As(err, &e) || e.Class != llm.ClassAuth || !strings.Contains(err.Error(), "the only key rejected as invalid or revoked") {
		t.Errorf("ask with every key dead = %v", err)
	}
}

func TestPoolStickyByConversation(t *testing.T) {
	r := newPoolRig(t, rigOpts{strategy: llm.RoundRobin})
	for _, conv := range []string{"x", "y", "x", "z", "y", "x"} {
		if _, err := r.ask(conv); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.keysSince(0); got != "abacba" {
		t.Errorf("keys = %q, want each conversation on its first key", got)
	}
	// x's key cools: x moves, and stays where it moved.
	r.script.add(keyA, testkit.Fail(402, "Payment required"))
	for range 2 {
		if _, err := r.ask("x"); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.keysSince(6); got != "acc" {
		t.Errorf("keys = %q, want a, then c (the oldest last use) for good", got)
	}
}

// events records what an llm.Observer is told, one line an event.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(s string)                  { e.mu.Lock(); e.got = append(e.got, s); e.mu.Unlock() }
func (e *events) KeyCooled(pool, reason string) { e.add("cooled " + pool + " " + reason) }
func (e *events) KeyRotated(pool string, reason llm.Class) {
	e.add("rotated " + pool + " " + string(reason))
}
func (e *events) FellBack(from, to string, reason llm.Class) {
	e.add("fell back " + from + " " + to + " " + string(reason))
}

func TestPoolObserver(t *testing.T) {
	ev := &events{}
	r := newPoolRig(t, rigOpts{observer: ev})
	r.script.add(keyA, testkit.Fail(401, "Incorrect API key provided"))
	r.script.add(keyB, testkit.RateLimited("1"), testkit.RateLimited("1"))
	r.script.add(keyC, testkit.Fail(500, "oops"))
	if _, err := r.ask(""); err != nil {
		t.Fatal(err)
	}
	// The 5xx and the first 429 are retries on the key: neither cools it.
	want := []string{"cooled test revoked", "rotated test auth", "cooled test rate_limited", "rotated test rate_limited"}
	if diff := cmp.Diff(want, ev.got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestPoolAnthropicOutOfCredit: Anthropic answers a spent credit balance
// with a 400 invalid_request_error; the key cools for billing and the
// request rotates.
func TestPoolAnthropicOutOfCredit(t *testing.T) {
	r := newPoolRig(t, rigOpts{anthropic: true})
	r.script.add(keyA, testkit.Fail(400, "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."))
	text, err := r.ask("")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.status()["a"]; text != "from sk-bbbb" || got != "cooling 1h0m0s payment" {
		t.Errorf("reply %q, key a %q: want b's reply, a cooling for billing", text, got)
	}
	r.script.add(keyB, testkit.Step{Status: 403, Error: "Your API key does not have permission to use the specified resource."})
	if _, err := r.ask(""); llm.ClassOf(err) != llm.ClassBadRequest || r.status()["b"] != "ok" {
		t.Errorf("a permission_error: %v, key b %q; want a bad request, b not cooled", err, r.status()["b"])
	}
}

func TestPoolAnthropic(t *testing.T) {
	r := newPoolRig(t, rigOpts{anthropic: true})
	r.script.add(keyA, testkit.Step{Status: 401, Error: "invalid x-api-key"})
	text, err := r.ask("")
	if err != nil {
		t.Fatal(err)
	}
	if text != "from sk-bbbb" || r.status()["a"] != "dead" {
		t.Errorf("reply %q, key a %q: want b's reply, a dead", text, r.status()["a"])
	}
	for _, req := range r.ms.Requests() {
		if req.API != testkit.APIAnthropic || req.Header.Get("X-Api-Key") == "" {
			t.Errorf("request %d by %s with x-api-key %q", req.Seq, req.API, req.Header.Get("X-Api-Key"))
		}
	}
}

func TestChainFallsBackInOrder(t *testing.T) {
	main := newPoolRig(t, rigOpts{creds: []llm.Credential{{Key: keyA}}, fallback: true})
	fb1 := testkit.NewModelServer(t)
	fb2 := testkit.NewModelServer(t)
	client := func(url, model string) llm.Client {
		c, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: url, Model: model, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// The last is on Anthropic's Messages API.
	fb2Client, err := llm.NewAnthropic(llm.OpenAIOptions{BaseURL: fb2.AnthropicURL(), Model: "fb2-model", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	chain := llm.NewChain(main.clk, nil,
		llm.Provider{Name: "main", Client: main.client},
		llm.Provider{Name: "fb1", Client: client(fb1.URL(), "fb1-model")},
		llm.Provider{Name: "fb2", Client: fb2Client},
	)
	ev := &events{}
	chain.Observe(ev)
	main.script.add(keyA, testkit.Fail(402, "Payment required"))
	fb1.Script(testkit.Fail(404, "The model `fb1-model` does not exist"))
	fb2.Script(testkit.Reply("from fb2"))
	req := ask("hi")
	req.Model = "lane-model"
	resp, err := chain.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "from fb2" {
		t.Errorf("reply %q, want fb2's", resp.Message.Content)
	}
	if got := main.ms.Requests()[0].Model; got != "lane-model" {
		t.Errorf("main asked for %q, want the request's model", got)
	}
	if got := fb1.Requests()[0].Model; got != "fb1-model" {
		t.Errorf("fb1 asked for %q, want its own model", got)
	}
	if got := fb2.Requests()[0]; got.API != testkit.APIAnthropic || got.Model != "fb2-model" {
		t.Errorf("fb2 asked by %s for %q, want Anthropic's API and its own model", got.API, got.Model)
	}
	if diff := cmp.Diff([]string{"fell back main fb1 rate_limited", "fell back fb1 fb2 model_not_found"}, ev.got); diff != "" {
		t.Errorf("fallbacks observed (-want +got):\n%s", diff)
	}
	last := chain.Last()
	if last.Provider != "fb2" || !last.Fallback || !strings.Contains(last.Reason, "refused the API key for now: the only key cooling until 13:00 UTC") {
		t.Errorf("Last = %+v", last)
	}

	// A request too long does not fall back: the caller trims it.
	fb1.Script(testkit.Reply("from fb1"))
	main.clk.Advance(2 * time.Hour)
	main.script.add(keyA, testkit.Fail(413, "too long"))
	if _, err := chain.Complete(context.Background(), ask("hi")); llm.ClassOf(err) != llm.ClassContextOverflow {
		t.Errorf("overflow = %v, want it returned as is", err)
	}
	if fb1.Count() != 1 {
		t.Errorf("fb1 was asked after an overflow")
	}
	// The main model answers again once its key is back.
	resp, err = chain.Complete(context.Background(), ask("hi"))
	if err != nil || resp.Message.Content != "from sk-aaaa" || chain.Last().Fallback {
		t.Errorf("after the cooling: %v, %+v, last %+v", err, resp, chain.Last())
	}
}
