package testkit

import (
	"context"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

func TestStartRedisRestartKeepsData(t *testing.T) {
	r := StartRedis(t)
	if strings.HasSuffix(r.Addr(), ":6379") && !r.External() {
		t.Fatalf("launched server on the default Redis port: %s", r.Addr())
	}
	if !strings.HasPrefix(r.URL(), "redis://") {
		t.Fatalf("URL() = %q, want a redis:// URL", r.URL())
	}
	ctx := context.Background()
	open := func() *goredis.Client {
		opt, err := goredis.ParseURL(r.URL())
		if err != nil {
			t.Fatal(err)
		}
		c := goredis.NewClient(opt)
		t.Cleanup(func() { c.Close() })
		return c
	}

	c := open()
	key := r.Prefix() + "k"
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	c.Close()

	r.Restart(t)

	got, err := open().Get(ctx, key).Result()
	if err != nil {
		t.Fatalf("GET after restart: %v", err)
	}
	if got != "v" {
		t.Fatalf("GET after restart = %q, want %q", got, "v")
	}
}

func TestStartRedisPrefixesDiffer(t *testing.T) {
	a, b := StartRedis(t), StartRedis(t)
	if a.Prefix() == b.Prefix() {
		t.Fatalf("two servers of one test share prefix %q", a.Prefix())
	}
	if a.Addr() == b.Addr() && !a.External() {
		t.Fatalf("two launched servers share %s", a.Addr())
	}
	if strings.ContainsAny(a.Prefix(), "{}*?[]") {
		t.Fatalf("prefix %q has hash-tag or glob characters", a.Prefix())
	}
}
