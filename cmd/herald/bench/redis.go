package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/config"
	redisstore "github.com/heraldgw/herald/store/redis"
)

// redisBackend measures herald's Redis store against a bare Streams loop
// on the same server. Every key either makes is under a prefix of its own,
// deleted afterwards, so a run can share a server with a live gateway.
type redisBackend struct {
	target redisTarget
	prefix string
	raw    goredis.UniversalClient
}

// redisTarget is the Redis a run measures: one server, or the seeds of a
// cluster, and how many replicas the store waits for.
type redisTarget struct {
	URL          string
	Cluster      bool
	WaitReplicas int
}

// rawGroup is the consumer group of the raw loop's streams.
const rawGroup = "bench"

// benchPrefix heads the keys of every run, then a random tag of its own:
// short, like production's "herald:", because every key name is in every
// command a script makes and in the append-only file, for herald's keys
// and the raw loop's alike.
const benchPrefix = "hb:"

func newRedisBackend(ctx context.Context, target redisTarget, convs int) (*redisBackend, error) {
	var tag [6]byte
	if _, err := rand.Read(tag[:]); err != nil {
		return nil, err
	}
	b := &redisBackend{target: target, prefix: benchPrefix + hex.EncodeToString(tag[:]) + ":"}
	// Producers and workers of the store run together, two per
	// conversation; a smaller pool would measure the pool's queue.
	var where string
	if target.Cluster {
		opts, err := goredis.ParseClusterURL(target.URL)
		if err != nil {
			return nil, fmt.Errorf("malformed Redis Cluster URL")
		}
		opts.PoolSize = max(opts.PoolSize, 2*convs+2)
		opts.MaxRetries = -1
		b.raw, where = goredis.NewClusterClient(opts), fmt.Sprintf("the cluster of %d seeds", len(opts.Addrs))
	} else {
		opts, err := redisstore.ParseURL(target.URL)
		if err != nil {
			return nil, err
		}
		opts.PoolSize = max(opts.PoolSize, 2*convs+2)
		b.raw, where = goredis.NewClient(opts), redacted(opts)
	}
	if err := b.raw.Ping(ctx).Err(); err != nil {
		b.raw.Close()
		return nil, fmt.Errorf("redis at %s: %w", where, err)
	}
	return b, nil
}

// eachPrimary calls fn with the server, or with every primary of a
// cluster.
func (b *redisBackend) eachPrimary(ctx context.Context, fn func(context.Context, *goredis.Client) error) error {
	switch c := b.raw.(type) {
	case *goredis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *goredis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("unexpected Redis client %T", b.raw)
}

func (b *redisBackend) open(ctx context.Context) (sessionStore, error) {
	// The store shares the raw loop's client, which cleanup closes: the
	// raw loop is done by now, and both then run on the same pool. No
	// Clock, so lease expiry reads the server's time, as in production.
	return redisstore.Open(ctx, redisstore.Options{Client: b.raw, Prefix: b.storePrefix(),
		Cluster: b.target.Cluster, WaitReplicas: b.target.WaitReplicas})
}

// gatewayStore: the server at the run's URL, under the store's prefix,
// on a client of the gateway's own, with its pool and retries.
func (b *redisBackend) gatewayStore(cfg *config.Store) {
	cfg.Backend, cfg.RedisURL, cfg.RedisPrefix = config.BackendRedis, b.target.URL, b.storePrefix()
	cfg.RedisWaitReplicas = b.target.WaitReplicas
	if b.target.Cluster {
		cfg.RedisMode = config.RedisCluster
	}
}

// storePrefix heads the keys of herald's store in a run, whichever
// client opens it.
func (b *redisBackend) storePrefix() string { return b.prefix + "s:" }

func (b *redisBackend) stream(conv int) string {
	return b.prefix + "r:{" + strconv.Itoa(conv) + "}"
}

func (b *redisBackend) rawPrepare(ctx context.Context, convs int) error {
	for c := range convs {
		if err := b.raw.XGroupCreateMkStream(ctx, b.stream(c), rawGroup, "$").Err(); err != nil {
			return err
		}
	}
	return nil
}

func (b *redisBackend) rawStep(ctx context.Context, conv int) error {
	stream := b.stream(conv)
	id, err := b.raw.XAdd(ctx, &goredis.XAddArgs{Stream: stream, Values: []any{"text", payload}}).Result()
	if err != nil {
		return err
	}
	got, err := b.raw.XReadGroup(ctx, &goredis.XReadGroupArgs{
		Group:    rawGroup,
		Consumer: "c" + strconv.Itoa(conv),
		Streams:  []string{stream, ">"},
		Count:    1,
		Block:    -1, // the entry is there; never wait
	}).Result()
	if err != nil {
		return err
	}
	if len(got) != 1 || len(got[0].Messages) != 1 || got[0].Messages[0].ID != id {
		return fmt.Errorf("raw loop read %v, want entry %s", got, id)
	}
	return b.raw.XAck(ctx, stream, rawGroup, id).Err()
}

// cleanup deletes every key under the run's prefix, on every primary of
// a cluster; each key alone, since a cluster refuses a command naming
// keys of several slots.
func (b *redisBackend) cleanup(ctx context.Context) error {
	defer b.raw.Close()
	return b.eachPrimary(ctx, func(ctx context.Context, c *goredis.Client) error {
		iter := c.Scan(ctx, 0, b.prefix+"*", 1000).Iterator()
		pipe := c.Pipeline()
		for iter.Next(ctx) {
			pipe.Unlink(ctx, iter.Val())
			if pipe.Len() == 500 {
				if _, err := pipe.Exec(ctx); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		_, err := pipe.Exec(ctx)
		return err
	})
}

// serverCPU is the server's CPU time, user and system, of all its
// threads, from INFO cpu.
func (b *redisBackend) serverCPU(ctx context.Context) (time.Duration, bool) {
	var mu sync.Mutex
	var total time.Duration
	err := b.eachPrimary(ctx, func(ctx context.Context, c *goredis.Client) error {
		d, ok := nodeCPU(ctx, c)
		if !ok {
			return fmt.Errorf("no CPU figures from %s", c.Options().Addr)
		}
		mu.Lock()
		total += d
		mu.Unlock()
		return nil
	})
	return total, err == nil
}

// nodeCPU is one server's CPU time, user and system, from INFO cpu.
func nodeCPU(ctx context.Context, c *goredis.Client) (time.Duration, bool) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, false
	}
	var total float64
	found := 0
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, false
			}
			total += f
			found++
		}
	}
	return time.Duration(total * float64(time.Second)), found == 2
}

// redacted names the server without its password.
func redacted(o *goredis.Options) string {
	return fmt.Sprintf("%s db %d", o.Addr, o.DB)
}
