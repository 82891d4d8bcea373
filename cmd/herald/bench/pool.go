package bench

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/llm"
)

// Defaults for PoolOptions.
const (
	DefaultPoolRequests = 20000
	DefaultPoolKeys     = 1
	DefaultPoolClients  = 1
)

// PoolOptions says what Pool measures.
type PoolOptions struct {
	Store    string // "sqlite" or "redis"
	Requests int    // model requests made on each side; DefaultPoolRequests when 0
	Keys     int    // keys in the pool; DefaultPoolKeys when 0
	Clients  int    // requests at once; DefaultPoolClients when 0
	// Conversations the requests are of, in turn; 0: none (a request of
	// no conversation, as a cron job's).
	Conversations int
	Strategy      string // the pool's strategy; llm.RoundRobin when empty
	RedisURL      string // the Redis to measure; DefaultRedisURL when empty
	TempDir       string // where the SQLite files are made (and removed); the system's when empty
}

// PoolResult is one run's figures, as `herald bench pool --json` prints
// them.
type PoolResult struct {
	Store         string  `json:"store"`
	Strategy      string  `json:"strategy"`
	Requests      int     `json:"requests"`
	Keys          int     `json:"keys"`
	Clients       int     `json:"clients"`
	Conversations int     `json:"conversations"`
	P50Us         float64 `json:"p50_us"` // a model request through the pool over the store
	P99Us         float64 `json:"p99_us"`
	BareP50Us     float64 `json:"bare_p50_us"` // the same request with one key and no pool: the ceiling
	BareP99Us     float64 `json:"bare_p99_us"`
	// StoreCalls is the calls the pool made of the store while the
	// requests ran, on their path or beside it (the uses written every
	// llm.UseFlushEvery); PerRequest that over the requests.
	StoreCalls int64   `json:"store_calls"`
	PerRequest float64 `json:"store_calls_per_request"`
	Counted    int64   `json:"counted"` // uses the store holds at the end: one a request
}

// Pool measures what a pool of keys over herald's store adds to a model
// request, on the path the gateway's requests take: the OpenAI client
// with the pool (llm.NewOpenAI with OpenAIOptions.Pool) asking a model's
// server on loopback, which answers at once, beside the same client
// with its one key and no pool, the ceiling. The two take turns. It
// counts the calls the pool made of the store, and the uses the store
// holds at the end.
func Pool(ctx context.Context, opt PoolOptions) (PoolResult, error) {
	opt.Requests = cmp.Or(opt.Requests, DefaultPoolRequests)
	opt.Keys = cmp.Or(opt.Keys, DefaultPoolKeys)
	opt.Clients = cmp.Or(opt.Clients, DefaultPoolClients)
	opt.Strategy = cmp.Or(opt.Strategy, llm.RoundRobin)
	if opt.RedisURL == "" {
		opt.RedisURL = DefaultRedisURL
	}
	if opt.Requests < 1 || opt.Keys < 1 || opt.Clients < 1 || opt.Conversations < 0 {
		return PoolResult{}, fmt.Errorf("requests, keys and clients must be positive and conversations not negative, got %d, %d, %d and %d",
			opt.Requests, opt.Keys, opt.Clients, opt.Conversations)
	}
	return onBackend(ctx, opt.Store, opt.TempDir, redisTarget{URL: opt.RedisURL}, opt.Clients, func(b backend) (PoolResult, error) {
		return measurePool(ctx, b, opt)
	})
}

func measurePool(ctx context.Context, b backend, opt PoolOptions) (res PoolResult, err error) {
	res = PoolResult{Store: opt.Store, Strategy: opt.Strategy, Requests: opt.Requests, Keys: opt.Keys, Clients: opt.Clients, Conversations: opt.Conversations}
	db, err := b.open(ctx)
	if err != nil {
		return res, fmt.Errorf("opening the %s store: %w", opt.Store, err)
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("closing the store: %w", cerr)
		}
	}()
	ps, ok := db.(interface{ Pools() llm.PoolStore })
	if !ok {
		return res, fmt.Errorf("the %s store keeps no credential pools", opt.Store)
	}
	srv := httptest.NewServer(http.HandlerFunc(answerAtOnce))
	defer srv.Close()

	store := &countedPools{PoolStore: ps.Pools()}
	creds := make([]llm.Credential, opt.Keys)
	for i := range creds {
		creds[i] = llm.Credential{Key: fmt.Sprintf("sk-bench-key-%04d", i)}
	}
	pool, err := llm.NewPool(llm.PoolOptions{Name: "bench", Credentials: creds, Strategy: opt.Strategy, Store: store})
	if err != nil {
		return res, err
	}
	pooled, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: srv.URL, Model: "bench", MaxRetries: -1, Pool: pool})
	if err != nil {
		return res, err
	}
	bare, err := llm.NewOpenAI(llm.OpenAIOptions{BaseURL: srv.URL, Model: "bench", MaxRetries: -1, APIKey: creds[0].Key})
	if err != nil {
		return res, err
	}
	var seq atomic.Int64
	ask := func(c llm.Client) func(context.Context, int) error {
		return func(ctx context.Context, _ int) error {
			req := llm.Request{Messages: []chat.Message{{Role: "user", Content: "hi"}}}
			if opt.Conversations > 0 {
				req.User = "conv-" + strconv.FormatInt(seq.Add(1)%int64(opt.Conversations), 10)
			}
			_, err := c.Complete(ctx, req)
			return err
		}
	}
	var withPool, without run
	for r := range rounds {
		n := share(opt.Requests, rounds, r)
		br, err := driveRaw(ctx, n, opt.Clients, ask(bare))
		if err != nil {
			return res, fmt.Errorf("bare client: %w", err)
		}
		without.add(br)
		pr, err := driveRaw(ctx, n, opt.Clients, ask(pooled))
		if err != nil {
			return res, fmt.Errorf("client with the pool: %w", err)
		}
		withPool.add(pr)
	}
	res.StoreCalls = store.calls.Load()
	res.PerRequest = float64(res.StoreCalls) / float64(opt.Requests)
	st, err := pool.Status(ctx) // writes the uses still counted in memory
	if err != nil {
		return res, err
	}
	for _, k := range st {
		res.Counted += k.Uses
	}
	p50, p99 := withPool.quantiles()
	res.P50Us, res.P99Us = p50*1000, p99*1000
	p50, p99 = without.quantiles()
	res.BareP50Us, res.BareP99Us = p50*1000, p99*1000
	return res, nil
}

// answerAtOnce is a model's server that answers every chat completion
// with the same short reply, at once.
func answerAtOnce(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"id":"c","object":"chat.completion","created":1,"model":"bench",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
}

// countedPools is a pool store that counts the calls made of it.
type countedPools struct {
	llm.PoolStore
	calls atomic.Int64
}

func (c *countedPools) Now(ctx context.Context) (time.Time, error) {
	c.calls.Add(1)
	return c.PoolStore.Now(ctx)
}

func (c *countedPools) ReadPool(ctx context.Context, pool, conv string) (llm.PoolRead, error) {
	c.calls.Add(1)
	return c.PoolStore.ReadPool(ctx, pool, conv)
}

func (c *countedPools) MarkKey(ctx context.Context, pool string, s llm.KeyState) error {
	c.calls.Add(1)
	return c.PoolStore.MarkKey(ctx, pool, s)
}

func (c *countedPools) ReviveKey(ctx context.Context, pool, id string) error {
	c.calls.Add(1)
	return c.PoolStore.ReviveKey(ctx, pool, id)
}

func (c *countedPools) UseKey(ctx context.Context, pool, id, conv string) error {
	c.calls.Add(1)
	return c.PoolStore.UseKey(ctx, pool, id, conv)
}

func (c *countedPools) CountUses(ctx context.Context, pool string, uses []llm.KeyUses) error {
	c.calls.Add(1)
	return c.PoolStore.CountUses(ctx, pool, uses)
}
