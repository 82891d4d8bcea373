package mcp_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/mcpserver"
	"github.com/heraldgw/herald/mcp"
	"github.com/heraldgw/herald/tools"
)

func TestMain(m *testing.M) {
	mcpserver.MaybeServe()
	os.Exit(m.Run())
}

// stdio is a server config that runs this test binary as the server.
func stdio(t *testing.T) config.MCPServer {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return config.MCPServer{Command: exe, Env: map[string]string{mcpserver.RoleVariable: "server"}}
}

// httpServer is a server config for the SDK's streamable HTTP handler
// on an httptest server.
func httpServer(t *testing.T) config.MCPServer {
	t.Helper()
	srv := httptest.NewServer(mcpserver.Handler())
	t.Cleanup(srv.Close)
	return config.MCPServer{URL: srv.URL}
}

// started starts a Manager of servers whose tools go to a live toolset,
// and returns it with the set an agent would run with.
func started(t *testing.T, o mcp.Options) (*mcp.Manager, *tools.Set) {
	t.Helper()
	reg := tools.NewRegistry()
	live, err := reg.RegisterLive("mcp")
	if err != nil {
		t.Fatal(err)
	}
	set, err := reg.Set([]string{"mcp"})
	if err != nil {
		t.Fatal(err)
	}
	o.Live = live
	if o.Env == nil {
		o.Env = config.Default().SubprocessEnv()
	}
	if o.Clock == nil {
		o.Clock = clock.NewFake(time.Unix(0, 0))
	}
	m := mcp.New(o)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return m, set
}

func ready(t *testing.T, m *mcp.Manager, name string) mcp.Status {
	t.Helper()
	var st mcp.Status
	testkit.Eventually(t, name+" ready", func() bool {
		for _, s := range m.Statuses() {
			if s.Name == name {
				st = s
			}
		}
		return st.State == mcp.StateReady
	})
	return st
}

func call(set *tools.Set, name, args string) tools.Result {
	return set.Call(context.Background(), &tools.Turn{Conv: "c"}, chat.ToolCall{ID: "1", Name: name, Arguments: args})
}

func TestBothTransports(t *testing.T) {
	for _, tc := range []struct {
		transport string
		server    func(*testing.T) config.MCPServer
	}{{mcp.TransportStdio, stdio}, {mcp.TransportHTTP, httpServer}} {
		t.Run(tc.transport, func(t *testing.T) {
			m, set := started(t, mcp.Options{Servers: map[string]config.MCPServer{"test-srv": tc.server(t)}, OutputMaxChars: 1000})
			st := ready(t, m, "test-srv")
			want := []string{"mcp_test_srv_echo", "mcp_test_srv_environ", "mcp_test_srv_fail", "mcp_test_srv_grow", "mcp_test_srv_media", "mcp_test_srv_slow"}
			got := slices.DeleteFunc(slices.Sorted(slices.Values(st.Tools)), func(n string) bool { return n == "mcp_test_srv_crash" })
			if !slices.Equal(got, want) || st.Transport != tc.transport {
				t.Fatalf("status %+v, want tools %v", st, want)
			}
			var schema map[string]any
			for _, spec := range set.Specs() {
				if spec.Name == "mcp_test_srv_echo" {
					if err := json.Unmarshal(spec.Parameters, &schema); err != nil {
						t.Fatal(err)
					}
				}
			}
			if props, _ := schema["properties"].(map[string]any); props["text"] == nil {
				t.Errorf("echo's schema = %v, want its text property", schema)
			}
			if res := call(set, "mcp_test_srv_echo", `{"text":"hello"}`); res.IsError || res.Content != "hello" {
				t.Errorf("echo = %+v", res)
			}
			if res := call(set, "mcp_test_srv_media", `{}`); res.IsError || res.Content != "here\n[image image/png, 4 bytes, not shown]\n[resource file:///tmp/report.txt report]" {
				t.Errorf("media = %q", res.Content)
			}
			if res := call(set, "mcp_test_srv_fail", `{}`); !res.IsError || !strings.Contains(res.Content, "the disk is full") {
				t.Errorf("fail = %+v, want a tool error with the server's text", res)
			}
		})
	}
}

func TestFilterIncludeWins(t *testing.T) {
	srv := httpServer(t)
	srv.Tools = config.MCPTools{Include: []string{"echo", "env*", "media"}, Exclude: []string{"e*"}}
	none := httpServer(t)
	none.Tools.Exclude = []string{"*"}
	m, _ := started(t, mcp.Options{Servers: map[string]config.MCPServer{"f": srv, "none": none}})
	if got := ready(t, m, "f").Tools; !slices.Equal(got, []string{"mcp_f_echo", "mcp_f_environ", "mcp_f_media"}) {
		t.Errorf("tools = %v", got)
	}
	if got := ready(t, m, "none").Tools; len(got) != 0 {
		t.Errorf("excluding * left %v", got)
	}
}

func TestCallPastItsTimeoutIsAToolError(t *testing.T) {
	srv := httpServer(t)
	srv.Timeout = 200 * time.Millisecond
	m, set := started(t, mcp.Options{Servers: map[string]config.MCPServer{"s": srv}})
	ready(t, m, "s")
	res := call(set, "mcp_s_slow", `{"seconds":30}`)
	if !res.IsError || !strings.Contains(res.Content, "within its timeout of 200ms") {
		t.Errorf("slow = %+v", res)
	}
	if res := call(set, "mcp_s_echo", `{"text":"still here"}`); res.Content != "still here" {
		t.Errorf("after the timeout echo = %+v", res)
	}
}

func TestDownServerIsRetriedAndBecomesReady(t *testing.T) {
	var up atomic.Bool
	h := mcpserver.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	fake := clock.NewFake(time.Unix(0, 0))
	m, set := started(t, mcp.Options{Clock: fake, Servers: map[string]config.MCPServer{"late": {URL: srv.URL}}})
	var st mcp.Status
	testkit.Eventually(t, "the first connect failed", func() bool {
		st = m.Statuses()[0]
		return st.State == mcp.StateFailed && fake.Waiters() == 1
	})
	if st.LastError == "" {
		t.Error("a failed server has no last error")
	}
	if res := call(set, "mcp_late_echo", `{"text":"x"}`); !res.IsError {
		t.Errorf("a call before the server is up = %+v, want a tool error", res)
	}
	up.Store(true)
	fake.Advance(time.Second)
	ready(t, m, "late")
	if res := call(set, "mcp_late_echo", `{"text":"x"}`); res.IsError || res.Content != "x" {
		t.Errorf("echo once ready = %+v", res)
	}
}

func TestNotConnectedIsAToolError(t *testing.T) {
	m, set := started(t, mcp.Options{Servers: map[string]config.MCPServer{"off": {URL: "http://127.0.0.1:1/mcp", Enabled: new(bool)}}})
	if st := m.Statuses()[0]; st.State != mcp.StateDisabled {
		t.Errorf("state = %s, want disabled", st.State)
	}
	if len(set.Names()) != 0 {
		t.Errorf("a disabled server offers %v", set.Names())
	}
}

func TestStdioServerEnvironmentHasNoSecret(t *testing.T) {
	const secret = "sk-test-secret-4242"
	t.Setenv("HERALD_MODEL_API_KEY", secret)
	t.Setenv("SOMETHING_ELSE", secret)
	t.Setenv("MY_TOKEN_FOR_SERVER", "given-on-purpose")
	cfg := config.Default()
	cfg.Model.APIKey = secret
	srv := stdio(t)
	srv.Env["SERVER_TOKEN"] = "${MY_TOKEN_FOR_SERVER}"
	srv.Env["SERVER_MODE"] = "plain-${MY_TOKEN_FOR_SERVER}"
	m, set := started(t, mcp.Options{Env: cfg.SubprocessEnv(), Servers: map[string]config.MCPServer{"env": srv}})
	ready(t, m, "env")
	res := call(set, "mcp_env_environ", `{}`)
	if res.IsError || strings.Contains(res.Content, secret) {
		t.Fatalf("the server's environment holds herald's secret:\n%s", res.Content)
	}
	// The server has its own credential, and its results never show it:
	// the variable its env names is its secret.
	if !strings.Contains(res.Content, "SERVER_TOKEN=****") || !strings.Contains(res.Content, "SERVER_MODE=plain-****") || !strings.Contains(res.Content, "PATH=") {
		t.Errorf("the server's environment lacks its own env or the base set, or a result shows its credential:\n%s", res.Content)
	}
	if strings.Contains(res.Content, "given-on-purpose") {
		t.Errorf("a result shows the server's credential:\n%s", res.Content)
	}
}

func TestToolListChangedRefreshes(t *testing.T) {
	m, set := started(t, mcp.Options{Servers: map[string]config.MCPServer{"g": stdio(t)}})
	ready(t, m, "g")
	if set.Has("mcp_g_extra") {
		t.Fatal("extra before grow")
	}
	if res := call(set, "mcp_g_grow", `{}`); res.IsError {
		t.Fatal(res.Content)
	}
	testkit.Eventually(t, "extra offered", func() bool { return set.Has("mcp_g_extra") })
	if res := call(set, "mcp_g_extra", `{}`); res.Content != "extra" {
		t.Errorf("extra = %+v", res)
	}
}

func TestToolName(t *testing.T) {
	if got := mcp.ToolName("my-srv", "get.issue/v2"); got != "mcp_my_srv_get_issue_v2" {
		t.Errorf("ToolName = %s", got)
	}
}

func TestCrashedServerComesBack(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	m, set := started(t, mcp.Options{Clock: fake, Servers: map[string]config.MCPServer{"c": stdio(t)}})
	ready(t, m, "c")
	if res := call(set, "mcp_c_crash", `{}`); !res.IsError || !strings.Contains(res.Content, "MCP server c failed on crash") {
		t.Errorf("a call the server died in = %+v, want a tool error", res)
	}
	testkit.Eventually(t, "the dead server failed and waiting to retry", func() bool {
		return m.Statuses()[0].State == mcp.StateFailed && fake.Waiters() == 1
	})
	if res := call(set, "mcp_c_echo", `{"text":"x"}`); !res.IsError || !strings.Contains(res.Content, "MCP server c is not connected (failed)") {
		t.Errorf("a call to the dead server = %+v, want a tool error saying it is not connected", res)
	}
	fake.Advance(time.Second)
	ready(t, m, "c")
	if res := call(set, "mcp_c_echo", `{"text":"back"}`); res.Content != "back" {
		t.Errorf("echo after the restart = %+v", res)
	}
}

func TestReloadKeepsUnchangedServers(t *testing.T) {
	// Every server is made before the Manager, whose shutdown must come
	// first: an httptest server's Close waits for open streams.
	keep, chg, gone, added := stdio(t), httpServer(t), httpServer(t), httpServer(t)
	m, set := started(t, mcp.Options{Servers: map[string]config.MCPServer{"keep": keep, "chg": chg, "gone": gone}})
	for _, name := range []string{"keep", "chg", "gone"} {
		ready(t, m, name)
	}
	before := call(set, "mcp_keep_environ", `{}`)
	chg2 := chg
	chg2.Tools.Include = []string{"echo"}
	got := m.Reload(map[string]config.MCPServer{"keep": keep, "chg": chg2, "new": added})
	if !slices.Equal(got.Connected, []string{"chg", "new"}) || !slices.Equal(got.Closed, []string{"gone"}) || !slices.Equal(got.Kept, []string{"keep"}) {
		t.Errorf("Reload = %+v, want chg and new connected, gone closed, keep kept", got)
	}
	if st := m.Statuses(); len(st) != 3 || st[1].Name != "keep" || st[1].State != mcp.StateReady {
		t.Errorf("statuses right after Reload = %+v, want keep still ready", st)
	}
	if after := call(set, "mcp_keep_environ", `{}`); after.Content != before.Content {
		t.Error("the unchanged stdio server was restarted")
	}
	if got := ready(t, m, "chg").Tools; !slices.Equal(got, []string{"mcp_chg_echo"}) {
		t.Errorf("the changed server's tools = %v", got)
	}
	ready(t, m, "new")
	testkit.Eventually(t, "the removed server's tools gone", func() bool {
		return !set.Has("mcp_gone_echo") && set.Has("mcp_new_echo") && set.Has("mcp_keep_echo")
	})
}

func TestResultImagesAreKeptToBeShown(t *testing.T) {
	home := t.TempDir()
	m, set := started(t, mcp.Options{Home: home, Servers: map[string]config.MCPServer{"pics": httpServer(t)}})
	ready(t, m, "pics")
	res := set.Call(context.Background(), &tools.Turn{Conv: "telegram:42", EntryID: "e1"}, chat.ToolCall{ID: "call9", Name: "mcp_pics_media", Arguments: `{}`})
	if res.IsError || res.Content != "here\n[resource file:///tmp/report.txt report]" {
		t.Errorf("content = %q, want the text and the link, the image shown apart", res.Content)
	}
	if len(res.Images) != 1 || res.Images[0].MIME != "image/png" || !strings.HasPrefix(res.Images[0].Path, home+"/files/telegram:42/e1-call9-") {
		t.Fatalf("images = %+v", res.Images)
	}
	if b, err := os.ReadFile(res.Images[0].Path); err != nil || string(b) != "png!" {
		t.Errorf("the kept image = %q, %v", b, err)
	}
}

// writeConfig writes a config file naming servers, each a URL.
func writeConfig(t *testing.T, file string, urls map[string]string) {
	t.Helper()
	body := "mcp_servers:\n"
	for _, name := range slices.Sorted(maps.Keys(urls)) {
		body += "  " + name + ":\n    url: " + urls[name] + "\n"
	}
	if urls == nil {
		body = "mcp_servers:\n  broken:\n    command: a\n    url: http://both.example\n"
	}
	// Written whole and renamed into place, as an editor saves: the
	// watcher, whose timers the test's clock may have left due, never
	// reads the file half written.
	tmp := file + ".new"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

func TestConfigFileChangeReloads(t *testing.T) {
	a, b := httpServer(t), httpServer(t)
	file := filepath.Join(t.TempDir(), "herald.yaml")
	writeConfig(t, file, map[string]string{"a": a.URL})
	fake := clock.NewFake(time.Unix(0, 0))
	m, set := started(t, mcp.Options{Clock: fake, Servers: map[string]config.MCPServer{"a": a}})
	ready(t, m, "a")
	r := mcp.NewReloader(mcp.ReloaderOptions{Manager: m, File: file, Clock: fake, Load: func() (map[string]config.MCPServer, error) {
		cfg, err := config.Load(file, func(string) (string, bool) { return "", false })
		return cfg.MCPServers, err
	}})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })

	writeConfig(t, file, map[string]string{"a": a.URL, "b": b.URL})
	testkit.Eventually(t, "the file's new server connected", func() bool {
		fake.Advance(mcp.WatchInterval)
		return set.Has("mcp_b_echo")
	})
	if res := call(set, "mcp_b_echo", `{"text":"from b"}`); res.Content != "from b" {
		t.Errorf("b's echo = %+v", res)
	}

	writeConfig(t, file, nil)
	if _, err := r.Reload(); err == nil || !strings.Contains(err.Error(), "left as they are") {
		t.Errorf("a reload of a file with problems = %v, want an error saying nothing changed", err)
	}
	if !set.Has("mcp_a_echo") || !set.Has("mcp_b_echo") {
		t.Errorf("a file with problems changed the tools: %v", set.Names())
	}

	writeConfig(t, file, map[string]string{"b": b.URL})
	got, err := r.Reload()
	if err != nil || !slices.Equal(got.Closed, []string{"a"}) || !slices.Equal(got.Kept, []string{"b"}) {
		t.Errorf("Reload = %+v, %v; want a closed, b kept", got, err)
	}
	if text := mcp.ReloadedText(file, got); !strings.Contains(text, "closed a; unchanged b") {
		t.Errorf("/reload-mcp says %q", text)
	}
}

func TestReloadWithoutAConfigFileSaysSo(t *testing.T) {
	m, _ := started(t, mcp.Options{})
	r := mcp.NewReloader(mcp.ReloaderOptions{Manager: m})
	if _, err := r.Reload(); err == nil || !strings.Contains(err.Error(), "without a config file") {
		t.Errorf("Reload = %v", err)
	}
}
