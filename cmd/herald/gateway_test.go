package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
)

// runGateway starts `herald gateway` with env and returns the program,
// the address it listens on, and a stop that cancels it (what SIGINT
// does in main) and returns its exit code.
func runGateway(t *testing.T, env map[string]string, args ...string) (*herald, string, func() int) {
	t.Helper()
	h := newHerald(env)
	ctx, cancel := context.WithCancel(context.Background())
	exit := make(chan int, 1)
	go func() { exit <- h.run(ctx, append([]string{"gateway"}, args...)...) }()
	waitFor(t, h.stderr, `"msg":"gateway started"`, exit)
	m := regexp.MustCompile(`"msg":"gateway started".*?"addr":"([^"]+)"`).FindStringSubmatch(h.stderr.String())
	if m == nil {
		cancel()
		t.Fatalf("no address in %q", h.stderr)
	}
	stopped := false
	var code int
	stop := func() int {
		t.Helper()
		if stopped {
			return code
		}
		stopped = true
		cancel()
		select {
		case code = <-exit:
		case <-time.After(30 * time.Second):
			t.Fatalf("gateway did not stop within 30s of its context ending; stderr %q", h.stderr)
		}
		return code
	}
	t.Cleanup(func() { stop() })
	return h, m[1], stop
}

func TestGatewayServesAndStopsOnCancel(t *testing.T) {
	tests := []struct {
		desc  string
		env   func(t *testing.T) map[string]string
		check func(t *testing.T, env map[string]string)
	}{
		{
			desc: "sqlite under HERALD_HOME",
			env: func(t *testing.T) map[string]string {
				return map[string]string{"HERALD_HOME": filepath.Join(t.TempDir(), "home")}
			},
			check: func(t *testing.T, env map[string]string) {
				if _, err := os.Stat(filepath.Join(env["HERALD_HOME"], "herald.db")); err != nil {
					t.Errorf("no SQLite file: %v", err)
				}
			},
		},
		{
			desc: "redis",
			env: func(t *testing.T) map[string]string {
				r := testkit.StartRedis(t)
				return map[string]string{
					"HERALD_HOME": t.TempDir(), "HERALD_STORE": "redis", "REDIS_URL": r.URL(), "HERALD_REDIS_PREFIX": r.Prefix(),
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			model := testkit.NewModelServer(t)
			env := tt.env(t)
			env["HERALD_HTTP_ADDR"] = "127.0.0.1:0"
			env["HERALD_MODEL_BASE_URL"] = model.URL()
			env["HERALD_MODEL"] = "test-model"
			h, addr, stop := runGateway(t, env)

			res, err := http.Get("http://" + addr + "/healthz")
			if err != nil || res.StatusCode != 200 {
				t.Fatalf("/healthz: %v %v", res, err)
			}
			res.Body.Close()
			model.Script(testkit.Reply("pong"))
			if got := chat(t, addr, "", "c1", "ping"); got != "pong" {
				t.Errorf("reply %q", got)
			}

			if code := stop(); code != 0 {
				t.Fatalf("exit %d; stderr %q", code, h.stderr)
			}
			if !strings.Contains(h.stderr.String(), `"msg":"gateway stopped"`) {
				t.Errorf("no stop logged: %q", h.stderr)
			}
			if tt.check != nil {
				tt.check(t, env)
			}
		})
	}
}

// chat runs one turn through the OpenAI-compatible endpoint.
func chat(t *testing.T, addr, key, conv, text string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "herald", "messages": []map[string]string{{"role": "user", "content": text}}})
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Herald-Conversation", conv)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("chat: %d %s", res.StatusCode, b)
	}
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("chat: %s: %v", b, err)
	}
	return out.Choices[0].Message.Content
}

func TestGatewayReadsTheConfigFile(t *testing.T) {
	model := testkit.NewModelServer(t)
	const key = "file-api-key-8c7b6a"
	home := t.TempDir()
	file := filepath.Join(t.TempDir(), "herald.yaml")
	writeFile(t, file, "home: "+home+"\nhttp:\n  addr: 127.0.0.1:0\n  api_key: "+key+"\nmodel:\n  base_url: "+model.URL()+"\n  name: file-model\n")

	for _, how := range []struct {
		desc string
		env  map[string]string
		args []string
	}{
		{desc: "--config", env: map[string]string{}, args: []string{"--config", file}},
		{desc: "HERALD_CONFIG", env: map[string]string{"HERALD_CONFIG": file}},
	} {
		t.Run(how.desc, func(t *testing.T) {
			h, addr, stop := runGateway(t, how.env, how.args...)
			model.Script(testkit.Reply("from the file's model"))
			if got := chat(t, addr, key, "f1", "hi"); got != "from the file's model" {
				t.Errorf("reply %q", got)
			}
			if last := model.Requests()[model.Count()-1]; last.Model != "file-model" {
				t.Errorf("model %q, want the file's", last.Model)
			}
			if code := stop(); code != 0 {
				t.Fatalf("exit %d; stderr %q", code, h.stderr)
			}
			if strings.Contains(h.stderr.String(), key) {
				t.Errorf("the API key was logged: %s", h.stderr)
			}
		})
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestGatewayFailsWithOneLine(t *testing.T) {
	tests := []struct {
		desc string
		env  map[string]string
		args []string
		want []string
	}{
		{desc: "unknown backend", env: map[string]string{"HERALD_STORE": "mongo"}, want: []string{"store.backend"}},
		{desc: "bad redis url", env: map[string]string{"HERALD_STORE": "redis", "REDIS_URL": "http://nope"}, want: []string{"store.redis_url"}},
		{
			desc: "two problems at once",
			env:  map[string]string{"HERALD_STORE": "mongo", "HERALD_HTTP_ADDR": "0.0.0.0:8642"},
			want: []string{"store.backend", "http.api_key", "herald config check"},
		},
		{desc: "missing config file", args: []string{"--config", "/nonexistent/herald.yaml"}, want: []string{"/nonexistent/herald.yaml", "does not exist"}},
		{desc: "store unreachable", env: map[string]string{"HERALD_STORE": "redis", "REDIS_URL": "redis://127.0.0.1:1/0", "HERALD_HTTP_ADDR": "127.0.0.1:0"}, want: []string{"unavailable"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			env := map[string]string{"HERALD_HOME": t.TempDir()}
			for k, v := range tt.env {
				env[k] = v
			}
			h := newHerald(env)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if code := h.run(ctx, append([]string{"gateway"}, tt.args...)...); code != 1 {
				t.Fatalf("exit %d, want 1; stderr %q", code, h.stderr)
			}
			// Log lines (JSON) may come before; the error is one line.
			var lines []string
			for _, l := range strings.Split(strings.TrimSuffix(h.stderr.String(), "\n"), "\n") {
				if !strings.HasPrefix(l, "{") {
					lines = append(lines, l)
				}
			}
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "herald: ") {
				t.Fatalf("stderr %q, want one herald: line", h.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(lines[0], w) {
					t.Errorf("error line %q does not name %s", lines[0], w)
				}
			}
		})
	}
}

func waitFor(t *testing.T, buf *testkit.LogBuffer, want string, exit <-chan int) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for !strings.Contains(buf.String(), want) {
		select {
		case code := <-exit:
			t.Fatalf("herald exited %d before logging %s; stderr %q", code, want, buf)
		case <-deadline:
			t.Fatalf("no %s within 15s; stderr %q", want, buf)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
