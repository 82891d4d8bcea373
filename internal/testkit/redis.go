package testkit

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/proc"
	goredis "github.com/redis/go-redis/v9"
)

// RedisURLEnv names a Redis server the tests may use instead of launching
// their own. Each test then works under a key prefix of its own and
// deletes its keys when it ends.
const RedisURLEnv = "HERALD_TEST_REDIS_URL"

// redisStartTimeout bounds how long a launched server may take to answer
// PING, and how long a stopping one may take to exit.
const redisStartTimeout = 15 * time.Second

// Redis is a redis-server for one test: launched on a free loopback port
// with its own data directory, or the external server named by
// HERALD_TEST_REDIS_URL.
type Redis struct {
	addr   string
	url    string
	prefix string

	// Set only for a launched server.
	bin  string
	dir  string
	port int
	args []string // more of redis-server's options (a cluster node's)
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// StartRedis returns a Redis server for t, stopped (or, when external, rid
// of t's keys) when t ends. A launched server keeps its data in an
// append-only file fsynced on every write, so Restart loses nothing that
// was acknowledged.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	r := &Redis{prefix: testPrefix(t)}
	if u := os.Getenv(RedisURLEnv); u != "" {
		opt, err := goredis.ParseURL(u)
		if err != nil {
			t.Fatalf("testkit: %s=%q is not a Redis URL: %v", RedisURLEnv, u, err)
		}
		r.url, r.addr = u, opt.Addr
		t.Cleanup(func() { r.dropPrefix(t, opt) })
		return r
	}
	return launchRedis(t, r)
}

// LaunchRedis returns a redis-server launched for t alone, even when
// HERALD_TEST_REDIS_URL names a server: for a test that changes the
// server's configuration (its memory limit, say).
func LaunchRedis(t testing.TB) *Redis {
	t.Helper()
	return launchRedis(t, &Redis{prefix: testPrefix(t)})
}

func launchRedis(t testing.TB, r *Redis) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("testkit: redis-server is not on PATH; install it (apt-get install redis-server) "+
			"or set %s to a Redis server the tests may use", RedisURLEnv)
	}
	r.bin = bin
	r.dir = t.TempDir()

	if err := r.launch(); err != nil {
		t.Fatalf("testkit: starting redis-server: %v", err)
	}
	r.url += "/0"
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("testkit: stopping redis-server: %v", err)
		}
	})
	return r
}

// Addr is the server's host:port.
func (r *Redis) Addr() string { return r.addr }

// URL is the server's redis:// URL.
func (r *Redis) URL() string { return r.url }

// Prefix is a key prefix no other test uses.
func (r *Redis) Prefix() string { return r.prefix }

// External reports whether the server is the one HERALD_TEST_REDIS_URL
// names rather than one launched for the test.
func (r *Redis) External() bool { return r.cmd == nil }

// Stop stops a launched server, as a crash of its host would; Restart
// starts it again. An external server cannot be stopped: Stop fails t.
func (r *Redis) Stop(t testing.TB) {
	t.Helper()
	if r.External() {
		t.Fatalf("testkit: %s names an external server; it cannot be stopped", RedisURLEnv)
	}
	if err := r.stop(); err != nil {
		t.Fatalf("testkit: stopping redis-server: %v", err)
	}
}

// Restart stops the server and starts it again on the same port and data
// directory, so what it had written to its append-only file is kept. An
// external server cannot be restarted; Restart then only logs.
func (r *Redis) Restart(t testing.TB) {
	t.Helper()
	if r.External() {
		t.Logf("testkit: %s names an external server; it cannot be restarted, continuing without", RedisURLEnv)
		return
	}
	if err := r.stop(); err != nil {
		t.Fatalf("testkit: stopping redis-server for a restart: %v", err)
	}
	// The old server released the port only a moment ago; give the bind a
	// few tries rather than moving to another port, which would change
	// the URL under the test.
	var err error
	for range 20 {
		if err = r.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("testkit: restarting redis-server: %v", err)
}

// launch starts the server on a free loopback port and sets its
// address and URL. Another process may take the port between the probe
// and the server's bind, so a failed start is tried again on a new port.
func (r *Redis) launch() error {
	var err error
	for range 5 {
		if r.port, err = freePort(); err != nil {
			return fmt.Errorf("finding a free port: %w", err)
		}
		if err = r.start(); err == nil {
			r.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
			r.url = "redis://" + r.addr
			return nil
		}
	}
	return err
}

func (r *Redis) start() error {
	logPath := filepath.Join(r.dir, "redis.log")
	cmd := exec.Command(r.bin, append([]string{
		"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1",
		"--dir", r.dir,
		"--appendonly", "yes",
		"--appendfsync", "always",
		"--save", "",
		"--daemonize", "no",
		"--logfile", logPath,
	}, r.args...)...)
	cmd.Dir = r.dir
	// The base set only: the test's environment may hold keys.
	cmd.Env = (*proc.Env)(nil).Build()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	r.cmd, r.done = cmd, done

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
	deadline := time.Now().Add(redisStartTimeout)
	for {
		select {
		case <-done:
			return fmt.Errorf("redis-server exited on start: %s", tail(logPath))
		default:
		}
		if ping(addr) == nil {
			return nil
		}
		if time.Now().After(deadline) {
			_ = r.stop()
			return fmt.Errorf("redis-server did not answer PING on %s within %s: %s", addr, redisStartTimeout, tail(logPath))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop asks the server to shut down (it flushes its append-only file on
// SIGTERM) and waits for it; a server that hangs is killed.
func (r *Redis) stop() error {
	if r.cmd == nil || r.done == nil {
		return nil
	}
	select {
	case <-r.done:
		return nil
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
		return nil
	case <-time.After(redisStartTimeout):
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	return fmt.Errorf("redis-server on port %d did not exit on SIGTERM and was killed", r.port)
}

// dropPrefix deletes the keys a test left on an external server.
func (r *Redis) dropPrefix(t testing.TB, opt *goredis.Options) {
	c := goredis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, r.prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 1000 {
			c.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		c.Unlink(ctx, batch...)
	}
	if err := iter.Err(); err != nil {
		t.Logf("testkit: deleting keys under %q: %v", r.prefix, err)
	}
}

// testPrefix makes a prefix from the test's name (readable in a shared
// server's keyspace) and random bytes (unique across runs). Glob and
// hash-tag characters are left out so the prefix can be SCANned and never
// decides a key's Cluster slot.
func testPrefix(t testing.TB) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, t.Name())
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "heraldtest:" + name + ":" + hex.EncodeToString(b[:]) + ":"
}

// freePort asks the kernel for a free loopback port. It never hands out
// 6379, so a machine's own Redis is never touched by accident.
func freePort() (int, error) {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port != 6379 {
			return port, nil
		}
	}
}

// ping speaks just enough RESP to learn whether the server is serving;
// a server still loading its append-only file answers -LOADING instead.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// tail returns the end of the server's log, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	if s == "" {
		return "(empty log)"
	}
	return "log: " + s
}
