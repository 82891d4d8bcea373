package redis

import (
	"context"
	"errors"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// DefaultPrefix is the key prefix when Options.Prefix is empty.
const DefaultPrefix = "herald:"

// DefaultURL is the server used when Options has neither URL nor Client.
const DefaultURL = "redis://127.0.0.1:6379/0"

// Options configure Open.
type Options struct {
	// URL names the server, redis://[user:pass@]host:port/db. Commands are
	// not retried by the client unless the URL sets max_retries: a script
	// retried after a lost reply may apply twice, so a failed call returns
	// errs.Unavailable and the caller decides.
	URL string
	// Client, when set, is used instead of dialing URL, and Close leaves
	// it open.
	Client goredis.UniversalClient
	// Prefix starts every key; default "herald:". It may not contain '{'
	// or '}', which would change the keys' Cluster hash slot.
	Prefix string
	// Clock, when nil, lets the scripts read the Redis server's TIME, so
	// lease expiry is decided by one clock, the store's. A test passes a
	// clock.Fake; its time is then sent with every call.
	Clock clock.Clock
	// Limits bound entry sizes and the dedupe window.
	Limits sessions.Limits
	// Cluster dials URL as Redis Cluster seed nodes (redis://host:port
	// with ?addr=host:port for each further seed) with go-redis's cluster
	// client. A Client passed in is used as it is.
	Cluster bool
	// Shards is how many shards every cluster-wide index is cut into
	// (shards.go). 0 is the layout of one server; in cluster mode 0 means
	// DefaultClusterShards. A store keeps the count it was first opened
	// with.
	Shards int
	// WaitReplicas, when above 0, makes every call wait (WAIT) until that
	// many replicas hold its writes before its reply is used, so that a
	// failover loses nothing herald acted on. A call whose writes no
	// WaitReplicas replicas acknowledged within WaitTimeout fails
	// Unavailable (its writes may stand).
	WaitReplicas int
	// WaitTimeout bounds that wait; default 2 s.
	WaitTimeout time.Duration
}

// DefaultWaitTimeout is Options.WaitTimeout's default.
const DefaultWaitTimeout = 2 * time.Second

// DB is an open Redis store. It serves the sessions and outbox stores.
type DB struct {
	client goredis.UniversalClient
	owned  bool // Close closes client
	prefix string
	clk    clock.Clock
	lim    sessions.Limits
	closed atomic.Bool
	batch  *batcher // the script calls' way to the server
	hist   *histCache
	shards *layout
	dlgSeq atomic.Int64 // the last dispatch sequence made or read (delegation.go)

	located shardMemo // the shards ids the domains make were found in: approvals', cron runs', delegations' (everyshard.go)

	sessions *sessionStore
	outbox   *outboxStore

	fwd       *fwdSweeper             // the sharded layout's, else nil
	applyHook func(home string) error // a test's failure before a forwarded write runs
}

// Open connects, checks the server answers and loads the scripts.
// Errors: Invalid (bad URL or prefix), Unavailable.
func Open(ctx context.Context, opts Options) (*DB, error) {
	const op = "redis.Open"
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, errs.E(op, errs.Invalid, "prefix %q may not contain '{' or '}'", prefix)
	}
	shards := opts.Shards
	if shards < 0 || shards > maxShards {
		return nil, errs.E(op, errs.Invalid, "shards %d: want 0 to %d", shards, maxShards)
	}
	if opts.Cluster && shards == 0 {
		shards = DefaultClusterShards
	}
	if opts.WaitReplicas < 0 {
		return nil, errs.E(op, errs.Invalid, "wait replicas %d: want 0 or more", opts.WaitReplicas)
	}
	db := &DB{client: opts.Client, prefix: prefix, clk: opts.Clock, lim: opts.Limits.WithDefaults(),
		hist: newHistCache(historyCacheBytes), shards: newLayout(prefix, shards)}
	if db.client == nil {
		c, err := dial(opts.URL, opts.Cluster)
		if err != nil {
			return nil, errs.Wrap(op, errs.Invalid, err)
		}
		db.client, db.owned = c, true
	}
	if err := db.client.Ping(ctx).Err(); err != nil {
		db.closeClient()
		return nil, errs.Wrap(op, errs.Unavailable, err)
	}
	if err := db.loadLibrary(ctx); err != nil {
		db.closeClient()
		return nil, db.fail(op, err)
	}
	if err := db.checkShards(ctx); err != nil {
		db.closeClient()
		return nil, err
	}
	wait := opts.WaitTimeout
	if wait <= 0 {
		wait = DefaultWaitTimeout
	}
	db.batch = newBatcher(db.client, opts.WaitReplicas, wait)
	db.sessions = &sessionStore{db: db}
	db.outbox = &outboxStore{db: db}
	if db.shards.sharded() {
		db.fwd = newFwdSweeper(db)
		db.fwd.start()
	}
	return db, nil
}

// ParseURL is the client's own parse of a server URL, with an error that
// never quotes the URL: net/url's errors carry the whole of it, password
// included.
func ParseURL(rawURL string) (*goredis.Options, error) {
	opt, err := goredis.ParseURL(rawURL)
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	if err != nil {
		return nil, errs.E("redis.ParseURL", errs.Invalid, "malformed Redis URL: %v", err)
	}
	return opt, nil
}

func dial(rawURL string, cluster bool) (goredis.UniversalClient, error) {
	if rawURL == "" {
		rawURL = DefaultURL
	}
	if cluster {
		return dialCluster(rawURL)
	}
	opt, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if u, err := url.Parse(rawURL); err == nil && !u.Query().Has("max_retries") {
		opt.MaxRetries = -1
	}
	return goredis.NewClient(opt), nil
}

// Sessions returns the conversation store.
func (db *DB) Sessions() sessions.Store { return db.sessions }

// Outbox returns the outbox store.
func (db *DB) Outbox() outbox.Store { return db.outbox }

// Close closes the store; every later call returns errs.Closed. A client
// passed in Options stays open.
func (db *DB) Close() error {
	if db.closed.Swap(true) {
		return nil
	}
	if db.fwd != nil {
		db.fwd.shutdown()
	}
	db.batch.close()
	return errs.Wrap("redis.Close", errs.Internal, db.closeClient())
}

func (db *DB) closeClient() error {
	if db.owned {
		return db.client.Close()
	}
	return nil
}

func (db *DB) check(op string) error {
	if db.closed.Load() {
		return errs.E(op, errs.Closed, "store is closed")
	}
	return nil
}

// fail turns a client error into herald's codes: a closed store is Closed,
// a server that is loading, read-only or out of memory is Unavailable like
// an unreachable one, and any other Redis error is a bug (Internal). The
// server's refusals (refusedPrefixes) are marked errs.ErrNotRun: the call
// did not run, where one whose connection failed may have; so is a call
// that found no connection (the server down): it was never sent. Both
// only when the client sends each call once (sendsOnce): after a retry,
// the error is the last attempt's, and an earlier one may have run.
func (db *DB) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	if db.closed.Load() || errors.Is(err, goredis.ErrClosed) {
		return errs.Wrap(op, errs.Closed, err)
	}
	if _, ok := errors.AsType[replicationError](err); ok {
		// The call ran; its WAIT failed or fell short.
		return errs.Wrap(op, errs.Unavailable, err)
	}
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "dial" && db.sendsOnce() {
		return errs.Wrap(op, errs.Unavailable, errs.MarkNotRun(err))
	}
	var rerr goredis.Error
	if errors.As(err, &rerr) && !errors.Is(err, goredis.Nil) {
		for _, p := range refusedPrefixes {
			if strings.HasPrefix(rerr.Error(), p) {
				if db.sendsOnce() {
					err = errs.MarkNotRun(err)
				}
				return errs.Wrap(op, errs.Unavailable, err)
			}
		}
		return errs.Wrap(op, errs.Internal, err)
	}
	return errs.Wrap(op, errs.Unavailable, err)
}

// sendsOnce reports whether the client sends each call at most once, so
// that a call's error tells its only attempt: a client of one server (a
// cluster's retries a call, on another node too) that makes no retry.
// dial makes its clients so unless the URL asks for retries (the client
// keeps a MaxRetries of -1, none, as 0).
func (db *DB) sendsOnce() bool {
	c, ok := db.client.(*goredis.Client)
	return ok && c.Options().MaxRetries <= 0
}

// refusedPrefixes begin the errors with which a server refuses a call
// before running any of it: loading its data, a replica (read-only, or
// cut from its primary), a cluster down or resharding the call's slot, a
// script running, out of memory, short of the replicas
// min-replicas-to-write asks for.
var refusedPrefixes = []string{"LOADING ", "READONLY ", "MASTERDOWN ", "CLUSTERDOWN ", "TRYAGAIN ", "BUSY ", "OOM ", "NOREPLICAS "}

// loadLibrary loads the scripts' library unless the server has it: a
// library of the same name holds the same code (see scripts.go). On a
// cluster every primary gets it (replicas copy it from theirs). A server
// that refuses the load (FUNCTION LOAD is a write: out of memory, say)
// but has the library is fine: its reads still answer.
func (db *DB) loadLibrary(ctx context.Context) error {
	load := func(ctx context.Context, c goredis.Cmdable) error {
		err := c.FunctionLoad(ctx, library).Err()
		if err == nil || strings.Contains(err.Error(), "already exists") {
			return nil
		}
		libs, lerr := c.FunctionList(ctx, goredis.FunctionListQuery{LibraryNamePattern: libraryName}).Result()
		if lerr == nil && slices.ContainsFunc(libs, func(l goredis.Library) bool { return l.Name == libraryName }) {
			return nil
		}
		return err
	}
	if cc, ok := db.client.(*goredis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return load(ctx, c) })
	}
	return load(ctx, db.client)
}

// run calls a script and returns its array reply. A server that lost the
// library (FUNCTION FLUSH, or a restart without persistence) gets it
// again, and the call is made once more: the first ran nothing.
func (db *DB) run(ctx context.Context, op string, s script, keys []string, args ...any) ([]any, error) {
	if err := db.check(op); err != nil {
		return nil, err
	}
	if len(keys) == 0 && db.shards.sharded() {
		// A call with no key would go to any node of a cluster.
		return nil, errs.E(op, errs.Internal, "script %s called without a key of its shard", s.fn)
	}
	v, err := db.batch.fcall(ctx, s.fn, keys, args...)
	if err != nil && strings.Contains(err.Error(), "Function not found") {
		if err := db.loadLibrary(ctx); err != nil {
			return nil, db.fail(op, err)
		}
		v, err = db.batch.fcall(ctx, s.fn, keys, args...)
	}
	if err != nil {
		return nil, db.fail(op, err)
	}
	return v, nil
}

// status reads the status marker scripts put first in their reply.
func status(op string, v []any) error {
	if len(v) == 0 {
		return errs.E(op, errs.Internal, "empty script reply")
	}
	switch str(v[0]) {
	case "OK":
		return nil
	case "LOST":
		return errs.E(op, errs.LeaseLost, "the lease or claim was taken over or given back")
	case "NOTFOUND":
		return errs.E(op, errs.NotFound, "no such pending entry or message")
	}
	return errs.E(op, errs.Internal, "unexpected script reply %v", v[0])
}

// nowArg is the time scripts use: the injected clock's, or "" for the
// server's.
func (db *DB) nowArg() string {
	if db.clk == nil {
		return ""
	}
	return strconv.FormatInt(db.clk.Now().UnixMilli(), 10)
}

func (db *DB) windowArg() int64 { return max(db.lim.DedupeWindow.Milliseconds(), 1) }

// convTag is the conversation key as it appears between the braces of its
// keys. '}' would end the hash tag early and '%' is the escape itself, so
// both are escaped; the tag then hashes every key of a conversation to
// one Cluster slot and no two conversations share a key.
func convTag(conv string) string {
	if !strings.ContainsAny(conv, "%}") {
		return conv
	}
	return strings.NewReplacer("%", "%25", "}", "%7D").Replace(conv)
}

func convFromTag(tag string) string {
	if !strings.Contains(tag, "%") {
		return tag
	}
	return strings.NewReplacer("%7D", "}", "%25", "%").Replace(tag)
}

// convKey is a key of the conversation whose tag is tag, in its shard.
func (db *DB) convKey(tag, suffix string) string {
	return convKeyIn(db.convPfx(convFromTag(tag)), tag, suffix)
}

// convKeyOf is a conversation's key with suffix, in its shard.
func (db *DB) convKeyOf(conv, suffix string) string {
	return convKeyIn(db.convPfx(conv), convTag(conv), suffix)
}

// convKeyIn is a key of a conversation whose shard's prefix is pfx.
func convKeyIn(pfx, tag, suffix string) string { return pfx + "{" + tag + "}:" + suffix }

// readyKey and activeKey are the ready and activity indexes of the shard
// whose prefix is pfx.
func readyKey(pfx string) string  { return pfx + "ready" }
func activeKey(pfx string) string { return pfx + "active" }

func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case nil:
		return ""
	}
	return ""
}

func num(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

func msTime(v any) time.Time { return time.UnixMilli(num(v)).UTC() }

func durMS(d time.Duration) int64 { return max(d.Milliseconds(), 1) }
