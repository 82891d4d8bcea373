package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/heraldgw/herald/config"
)

// flyConfig is the part of fly.toml herald's deployment relies on.
type flyConfig struct {
	App         string            `toml:"app"`
	KillSignal  string            `toml:"kill_signal"`
	KillTimeout string            `toml:"kill_timeout"`
	Env         map[string]string `toml:"env"`
	HTTPService struct {
		InternalPort int `toml:"internal_port"`
		Checks       []struct {
			Method string `toml:"method"`
			Path   string `toml:"path"`
		} `toml:"checks"`
	} `toml:"http_service"`
	Metrics struct {
		Port int    `toml:"port"`
		Path string `toml:"path"`
	} `toml:"metrics"`
}

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFlyToml(t *testing.T) {
	text := readRepoFile(t, "fly.toml")
	var fly flyConfig
	if _, err := toml.Decode(text, &fly); err != nil {
		t.Fatalf("fly.toml: %v", err)
	}
	if fly.Env["HERALD_STORE"] != "redis" {
		t.Errorf("HERALD_STORE = %q, want redis", fly.Env["HERALD_STORE"])
	}
	addr := fly.Env["HERALD_HTTP_ADDR"]
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("HERALD_HTTP_ADDR %q: %v", addr, err)
	}
	if host != "0.0.0.0" {
		t.Errorf("HERALD_HTTP_ADDR host %q: Fly's proxy reaches the machine on its private address, so listen on 0.0.0.0", host)
	}
	if strconv.Itoa(fly.HTTPService.InternalPort) != port {
		t.Errorf("http_service.internal_port %d is not HERALD_HTTP_ADDR's port %s", fly.HTTPService.InternalPort, port)
	}
	healthz := false
	for _, c := range fly.HTTPService.Checks {
		healthz = healthz || (c.Path == "/healthz" && (c.Method == "" || strings.EqualFold(c.Method, "GET")))
	}
	if !healthz {
		t.Errorf("no GET /healthz check in %+v", fly.HTTPService.Checks)
	}
	// The scraper has no API key: it reads the metrics on their own
	// address, which the http_service does not expose.
	_, metricsPort, err := net.SplitHostPort(fly.Env["HERALD_METRICS_ADDR"])
	if err != nil {
		t.Fatalf("HERALD_METRICS_ADDR %q: %v", fly.Env["HERALD_METRICS_ADDR"], err)
	}
	if strconv.Itoa(fly.Metrics.Port) != metricsPort || metricsPort == port || fly.Metrics.Path != "/metrics" {
		t.Errorf("metrics at %d%s, want HERALD_METRICS_ADDR's port %s (not the API's, %s) and /metrics", fly.Metrics.Port, fly.Metrics.Path, metricsPort, port)
	}
	if fly.KillSignal != "SIGTERM" {
		t.Errorf("kill_signal %q, want SIGTERM (the graceful stop)", fly.KillSignal)
	}

	// Secrets come from `fly secrets`, never the file; the comment says
	// which.
	for _, secret := range []string{"REDIS_URL", "HERALD_API_KEY", "HERALD_MODEL_API_KEY", "TELEGRAM_BOT_TOKEN"} {
		if _, ok := fly.Env[secret]; ok {
			t.Errorf("%s is in [env]; it belongs in fly secrets", secret)
		}
	}
	if !regexp.MustCompile(`fly secrets set REDIS_URL=`).MatchString(text) || !strings.Contains(text, "HERALD_API_KEY=") {
		t.Error("fly.toml does not say that REDIS_URL and HERALD_API_KEY come from fly secrets")
	}

	// With the secrets set, the environment makes a valid config.
	env := map[string]string{"REDIS_URL": "redis://default:pw@herald-redis.internal:6379/0", "HERALD_API_KEY": "k", "HOME": t.TempDir()}
	for k, v := range fly.Env {
		env[k] = v
	}
	cfg, err := config.Load("", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("the fly environment does not load: %v", err)
	}
	if cfg.Store.Backend != config.BackendRedis || cfg.HTTP.Addr != addr || cfg.HTTP.MetricsAddr != fly.Env["HERALD_METRICS_ADDR"] {
		t.Errorf("loaded store %q, addr %q, metrics addr %q", cfg.Store.Backend, cfg.HTTP.Addr, cfg.HTTP.MetricsAddr)
	}
	// Without the API key it must not start: the address is public.
	delete(env, "HERALD_API_KEY")
	if _, err := config.Load("", func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err == nil || !strings.Contains(err.Error(), "http.api_key") {
		t.Errorf("without HERALD_API_KEY: %v, want a problem naming http.api_key", err)
	}
}

func TestDockerfile(t *testing.T) {
	text := readRepoFile(t, "Dockerfile")
	if n := len(regexp.MustCompile(`(?m)^FROM `).FindAllString(text, -1)); n < 2 {
		t.Errorf("%d FROM lines; want a multi-stage build", n)
	}
	build := regexp.MustCompile(`(?s)RUN[^\n]*CGO_ENABLED=0[^\n]*go build.*?\./cmd/herald`)
	if !build.MatchString(text) {
		t.Error("no RUN that builds ./cmd/herald with CGO_ENABLED=0")
	}
	final := text[strings.LastIndex(text, "\nFROM "):]
	if !strings.Contains(final, "COPY --from=") || !strings.Contains(final, "herald") {
		t.Errorf("the final stage does not copy the binary from the build stage:\n%s", final)
	}
	if !regexp.MustCompile(`(?m)^USER `).MatchString(final) || strings.Contains(final, "USER root") {
		t.Error("the final stage runs as root")
	}
	if !strings.Contains(final, `ENTRYPOINT ["/usr/local/bin/herald"]`) || !strings.Contains(final, `CMD ["gateway"]`) {
		t.Error("the image does not run herald gateway")
	}
	var fly flyConfig
	if _, err := toml.Decode(readRepoFile(t, "fly.toml"), &fly); err != nil {
		t.Fatal(err)
	}
	if want := "EXPOSE " + strconv.Itoa(fly.HTTPService.InternalPort); !strings.Contains(final, want) {
		t.Errorf("the image does not %s, the port fly.toml serves", want)
	}
}
