package bench

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"github.com/heraldgw/herald/llm"
)

// Defaults for PoolOptions.
const (
	DefaultPoolRequests = 20000
	DefaultPoolKeys     = 4
	DefaultPoolClients  = 1
)

// PoolOptions says what Pool measures.
type PoolOptions struct {
	Store    string // "sqlite" or "redis"
	Requests int    // requests the pool chooses a key for; DefaultPoolRequests when 0
	Keys     int    // keys in the pool; DefaultPoolKeys when 0
	Clients  int    // requests at once; DefaultPoolClients when 0
	Strategy string // the pool's strategy; llm.RoundRobin when empty
	RedisURL string // the Redis to measure; DefaultRedisURL when empty
	TempDir  string // where the SQLite files are made (and removed); the system's when empty
}

// PoolResult is one run's figures, as `herald bench pool --json` prints
// them.
type PoolResult struct {
	Store    string  `json:"store"`
	Strategy string  `json:"strategy"`
	Requests int     `json:"requests"`
	Keys     int     `json:"keys"`
	Clients  int     `json:"clients"`
	P50Us    float64 `json:"p50_us"` // the pool's choice, per request
	P99Us    float64 `json:"p99_us"`
	RawP50Us float64 `json:"raw_p50_us"` // the bare read and count of the raw ceiling
	RawP99Us float64 `json:"raw_p99_us"`
	Counted  int64   `json:"counted"` // uses the store holds at the end: one a request
}

// Pool measures what choosing a request's key costs: llm.Pool.Choose
// over herald's store (the keys' states read with the store's clock, the
// choice, the use counted), beside the raw ceiling, the bare round trips
// any shared pool makes at least: the pool's row read and one use
// counted (SELECT and an upsert without fsync on SQLite, as herald's
// bookkeeping writes; HGETALL and HINCRBY on Redis). The two take turns.
func Pool(ctx context.Context, opt PoolOptions) (PoolResult, error) {
	opt.Requests = cmp.Or(opt.Requests, DefaultPoolRequests)
	opt.Keys = cmp.Or(opt.Keys, DefaultPoolKeys)
	opt.Clients = cmp.Or(opt.Clients, DefaultPoolClients)
	opt.Strategy = cmp.Or(opt.Strategy, llm.RoundRobin)
	if opt.RedisURL == "" {
		opt.RedisURL = DefaultRedisURL
	}
	if opt.Requests < 1 || opt.Keys < 1 || opt.Clients < 1 {
		return PoolResult{}, fmt.Errorf("requests, keys and clients must be positive, got %d, %d and %d", opt.Requests, opt.Keys, opt.Clients)
	}
	return onBackend(ctx, opt.Store, opt.TempDir, opt.RedisURL, opt.Clients, func(b backend) (PoolResult, error) {
		return measurePool(ctx, b, opt)
	})
}

func measurePool(ctx context.Context, b backend, opt PoolOptions) (res PoolResult, err error) {
	res = PoolResult{Store: opt.Store, Strategy: opt.Strategy, Requests: opt.Requests, Keys: opt.Keys, Clients: opt.Clients}
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
	creds := make([]llm.Credential, opt.Keys)
	for i := range creds {
		creds[i] = llm.Credential{Key: fmt.Sprintf("sk-bench-key-%04d", i)}
	}
	pool, err := llm.NewPool(llm.PoolOptions{Name: "bench", Credentials: creds, Strategy: opt.Strategy, Store: ps.Pools()})
	if err != nil {
		return res, err
	}
	rawStep, err := rawPoolStep(ctx, b, opt.Keys)
	if err != nil {
		return res, fmt.Errorf("preparing the raw loop: %w", err)
	}
	var raw, herald run
	for r := range rounds {
		n := share(opt.Requests, rounds, r)
		rr, err := driveRaw(ctx, n, opt.Clients, rawStep)
		if err != nil {
			return res, fmt.Errorf("raw loop: %w", err)
		}
		raw.add(rr)
		hr, err := driveRaw(ctx, n, opt.Clients, func(ctx context.Context, c int) error {
			_, err := pool.Choose(ctx, "")
			return err
		})
		if err != nil {
			return res, fmt.Errorf("pool: %w", err)
		}
		herald.add(hr)
	}
	st, err := pool.Status(ctx)
	if err != nil {
		return res, err
	}
	for _, k := range st {
		res.Counted += k.Uses
	}
	p50, p99 := herald.quantiles()
	res.P50Us, res.P99Us = p50*1000, p99*1000
	p50, p99 = raw.quantiles()
	res.RawP50Us, res.RawP99Us = p50*1000, p99*1000
	return res, nil
}

// rawPoolStep is the raw ceiling's request on b: read a pool of keys
// rows, count a use of one, round robin.
func rawPoolStep(ctx context.Context, b backend, keys int) (func(context.Context, int) error, error) {
	var next atomic.Int64
	pick := func() string { return "k" + strconv.Itoa(int(next.Add(1))%keys) }
	switch b := b.(type) {
	case *sqliteBackend:
		dsn := "file:" + filepath.Join(b.dir, "rawpool.db") +
			"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(5000)&_txlock=immediate"
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		b.rawPool = db
		if _, err := db.ExecContext(ctx, `CREATE TABLE keys (pool TEXT, id TEXT, uses INTEGER, PRIMARY KEY (pool, id)) WITHOUT ROWID`); err != nil {
			return nil, err
		}
		return func(ctx context.Context, _ int) error {
			rows, err := db.QueryContext(ctx, `SELECT id, uses FROM keys WHERE pool = 'bench'`)
			if err != nil {
				return err
			}
			for rows.Next() {
				var id string
				var uses int64
				if err := rows.Scan(&id, &uses); err != nil {
					rows.Close()
					return err
				}
			}
			if err := rows.Close(); err != nil {
				return err
			}
			_, err = db.ExecContext(ctx, `INSERT INTO keys (pool, id, uses) VALUES ('bench', ?, 1)
				ON CONFLICT (pool, id) DO UPDATE SET uses = uses + 1`, pick())
			return err
		}, nil
	case *redisBackend:
		key := b.prefix + "rawpool"
		return func(ctx context.Context, _ int) error {
			if err := b.raw.HGetAll(ctx, key).Err(); err != nil {
				return err
			}
			return b.raw.HIncrBy(ctx, key, pick(), 1).Err()
		}, nil
	}
	return nil, fmt.Errorf("no raw pool loop for %T", b)
}
