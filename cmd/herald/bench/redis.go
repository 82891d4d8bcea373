package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/config"
	redisstore "github.com/heraldgw/herald/store/redis"
)

// redisBackend measures herald's Redis store against a bare Streams loop
// on the same server. Every key either makes is under a prefix of its own,
// deleted afterwards, so a run can share a server with a live gateway.
type redisBackend struct {
	url    string
	prefix string
	raw    *goredis.Client
}

// rawGroup is the consumer group of the raw loop's streams.
const rawGroup = "bench"

// benchPrefix heads the keys of every run, then a random tag of its own:
// short, like production's "herald:", because every key name is in every
// command a script makes and in the append-only file, for herald's keys
// and the raw loop's alike.
const benchPrefix = "hb:"

func newRedisBackend(ctx context.Context, url string, convs int) (*redisBackend, error) {
	opts, err := redisstore.ParseURL(url)
	if err != nil {
		return nil, err
	}
	// Producers and workers of the store run together, two per
	// conversation; a smaller pool would measure the pool's queue.
	opts.PoolSize = max(opts.PoolSize, 2*convs+2)
	var tag [6]byte
	if _, err := rand.Read(tag[:]); err != nil {
		return nil, err
	}
	b := &redisBackend{
		url:    url,
		prefix: benchPrefix + hex.EncodeToString(tag[:]) + ":",
		raw:    goredis.NewClient(opts),
	}
	if err := b.raw.Ping(ctx).Err(); err != nil {
		b.raw.Close()
		return nil, fmt.Errorf("redis at %s: %w", redacted(opts), err)
	}
	return b, nil
}

func (b *redisBackend) open(ctx context.Context) (sessionStore, error) {
	// The store shares the raw loop's client, which cleanup closes: the
	// raw loop is done by now, and both then run on the same pool. No
	// Clock, so lease expiry reads the server's time, as in production.
	return redisstore.Open(ctx, redisstore.Options{Client: b.raw, Prefix: b.storePrefix()})
}

// gatewayStore: the server at the run's URL, under the store's prefix,
// on a client of the gateway's own, with its pool and retries.
func (b *redisBackend) gatewayStore(cfg *config.Store) {
	cfg.Backend, cfg.RedisURL, cfg.RedisPrefix = config.BackendRedis, b.url, b.storePrefix()
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

// cleanup deletes every key under the run's prefix.
func (b *redisBackend) cleanup(ctx context.Context) error {
	defer b.raw.Close()
	iter := b.raw.Scan(ctx, 0, b.prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := b.raw.Unlink(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return b.raw.Unlink(ctx, batch...).Err()
	}
	return nil
}

// serverCPU is the server's CPU time, user and system, of all its
// threads, from INFO cpu.
func (b *redisBackend) serverCPU(ctx context.Context) (time.Duration, bool) {
	info, err := b.raw.Info(ctx, "cpu").Result()
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
