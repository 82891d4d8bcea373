package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/errs"
)

// loaded is Default as Load returns it for a user whose $HOME is home and
// who has no config file: paths resolved.
func loaded(home string) config.Config {
	c := config.Default()
	c.Home = filepath.Join(home, ".herald")
	c.Store.SQLitePath = filepath.Join(c.Home, "herald.db")
	return c
}

func TestLoadPrecedence(t *testing.T) {
	tests := []struct {
		desc string
		file string            // config file body; "" writes none
		env  map[string]string // besides HOME
		want func(c *config.Config)
	}{
		{
			desc: "no file, no environment: defaults",
			want: func(c *config.Config) {},
		},
		{
			desc: "file values replace defaults, others stay",
			file: `
store:
  backend: redis
  redis_url: redis://cache:6379/2
  lease_ttl: 45s
  history_max_messages: 500
  timeline_max_items: 1000
http:
  addr: 127.0.0.1:9000
model:
  name: qwen3
  max_iterations: 12
  max_retries: 0
  system_prompt: |
    You are terse.
workers:
  turns: 4
  shutdown_grace: 45s
  delivery_drain: 10s
display:
  busy_input_mode: steer
  streaming: false
  stream_edit_interval: 3s
send_message:
  allowed_targets: [telegram:42, "slack:T1:C2"]
`,
			want: func(c *config.Config) {
				c.Store.Backend = "redis"
				c.Store.RedisURL = "redis://cache:6379/2"
				c.Store.LeaseTTL = 45 * time.Second
				c.Store.HistoryMaxMessages = 500
				c.Store.TimelineMaxItems = 1000
				c.HTTP.Addr = "127.0.0.1:9000"
				c.Model.Name = "qwen3"
				c.Model.MaxIterations = 12
				c.Model.MaxRetries = 0
				c.Model.SystemPrompt = "You are terse.\n"
				c.Workers.Turns = 4
				c.Workers.ShutdownGrace = 45 * time.Second
				c.Workers.DeliveryDrain = 10 * time.Second
				c.Display.BusyInputMode = "steer"
				c.Display.Streaming = false
				c.Display.StreamEditInterval = 3 * time.Second
				c.SendMessage.AllowedTargets = []string{"telegram:42", "slack:T1:C2"}
			},
		},
		{
			desc: "delegation, tools and auxiliary keys from the file",
			file: `
delegation:
  max_concurrent_children: 3
  max_spawn_depth: 2
  orchestrator_enabled: false
  max_iterations: 20
  child_timeout_seconds: 600
  subagent_auto_approve: true
  worktree_isolation: true
  independent_completions: true
  model: small
  base_url: http://127.0.0.1:8000/v1
  api_key: child-key
  request_overrides:
    temperature: 0.2
    reasoning_effort: low
    extra_body: {top_k: 20, 1: one}
  stall_quiet_seconds: 60
  stall_tool_seconds: 300
  stall_grace_seconds: 10
  summary_max_chars: 4000
  process_max_children: 8
  owner_ttl: 10s
tools:
  workspace: /srv/work
  terminal_timeout: 30s
  output_max_chars: 1000
  dangerous_commands: ['\bgit\s+push\b.*--force']
auxiliary:
  review:
    model: reviewer
    base_url: https://review.example/v1
    api_key: review-key
`,
			want: func(c *config.Config) {
				c.Delegation = config.Delegation{
					MaxConcurrentChildren:  3,
					MaxSpawnDepth:          2,
					MaxIterations:          20,
					ChildTimeoutSeconds:    600,
					SubagentAutoApprove:    true,
					SubagentApprovals:      "deny",
					WorktreeIsolation:      true,
					IndependentCompletions: true,
					Model:                  "small",
					BaseURL:                "http://127.0.0.1:8000/v1",
					APIKey:                 "child-key",
					RequestOverrides: map[string]any{
						"temperature":      0.2,
						"reasoning_effort": "low",
						"extra_body":       map[string]any{"top_k": 20, "1": "one"},
					},
					StallQuietSeconds:  60,
					StallToolSeconds:   300,
					StallGraceSeconds:  10,
					SummaryMaxChars:    4000,
					ProcessMaxChildren: 8,
					OwnerTTL:           10 * time.Second,
				}
				c.Tools = config.Tools{
					Workspace:         "/srv/work",
					TerminalTimeout:   30 * time.Second,
					OutputMaxChars:    1000,
					DangerousCommands: []string{`\bgit\s+push\b.*--force`},
				}
				c.Auxiliary.Review = config.AuxModel{Model: "reviewer", BaseURL: "https://review.example/v1", APIKey: "review-key"}
			},
		},
		{
			desc: "an empty dangerous_commands list checks nothing",
			file: "tools:\n  dangerous_commands: []\n",
			want: func(c *config.Config) { c.Tools.DangerousCommands = nil },
		},
		{
			desc: "a child timeout below 30 seconds is raised to 30",
			file: "delegation:\n  child_timeout_seconds: 10\n",
			want: func(c *config.Config) { c.Delegation.ChildTimeoutSeconds = 30 },
		},
		{
			desc: "DELEGATION_MAX_CONCURRENT_CHILDREN overrides the file",
			file: "delegation:\n  max_concurrent_children: 3\n",
			env:  map[string]string{"DELEGATION_MAX_CONCURRENT_CHILDREN": " 25\n"},
			want: func(c *config.Config) { c.Delegation.MaxConcurrentChildren = 25 },
		},
		{
			desc: "environment overrides the file",
			file: "store:\n  backend: redis\nmodel:\n  name: from-file\n  base_url: http://file:1/v1\n",
			env:  map[string]string{"HERALD_STORE": "sqlite", "HERALD_MODEL": "from-env"},
			want: func(c *config.Config) {
				c.Model.Name = "from-env"
				c.Model.BaseURL = "http://file:1/v1"
			},
		},
		{
			desc: "a variable set empty keeps the file's value",
			file: "model:\n  name: from-file\n",
			env:  map[string]string{"HERALD_MODEL": "  "},
			want: func(c *config.Config) { c.Model.Name = "from-file" },
		},
		{
			desc: "values are trimmed",
			env:  map[string]string{"TELEGRAM_BOT_TOKEN": "123:abc\n"},
			want: func(c *config.Config) { c.Platforms.Telegram.Token = "123:abc" },
		},
		{
			desc: "every variable, the contract's and herald's own",
			env: map[string]string{
				"HERALD_HOME":            "/srv/herald",
				"HERALD_STORE":           "redis",
				"REDIS_URL":              "redis://:pw@redis:6379/1",
				"HERALD_REDIS_PREFIX":    "h2:",
				"HERALD_HTTP_ADDR":       "0.0.0.0:8080",
				"HERALD_API_KEY":         "api-key",
				"HERALD_METRICS_ADDR":    "[fdaa::3]:9091",
				"HERALD_MODEL_BASE_URL":  "https://models.example/v1",
				"HERALD_MODEL_API_KEY":   "model-key",
				"HERALD_MODEL":           "gpt-x",
				"TELEGRAM_BOT_TOKEN":     "tg-token",
				"TELEGRAM_API_URL":       "http://127.0.0.1:8081",
				"TELEGRAM_ALLOWED_USERS": "1,@ann",
				"SLACK_BOT_TOKEN":        "xoxb-1",
				"SLACK_APP_TOKEN":        "xapp-1",
				"SLACK_SIGNING_SECRET":   "signing",
				"SLACK_API_URL":          "http://127.0.0.1:8082/api/",
				"SLACK_ALLOWED_USERS":    "U1",
				"DISCORD_BOT_TOKEN":      "dc-token",
				"DISCORD_API_URL":        "http://127.0.0.1:8083/",
				"DISCORD_ALLOWED_USERS":  "111,222",
				"HERALD_ALLOW_ALL_USERS": "true",

				"DELEGATION_MAX_CONCURRENT_CHILDREN": "4",
				"DELEGATION_MODEL":                   "child-model",
				"DELEGATION_BASE_URL":                "https://children.example/v1",
				"DELEGATION_API_KEY":                 "child-key",
				"HERALD_TOOLS_WORKSPACE":             "/srv/work",
			},
			want: func(c *config.Config) {
				c.Home = "/srv/herald"
				c.Store.SQLitePath = "/srv/herald/herald.db"
				c.Store.Backend = "redis"
				c.Store.RedisURL = "redis://:pw@redis:6379/1"
				c.Store.RedisPrefix = "h2:"
				c.HTTP.Addr = "0.0.0.0:8080"
				c.HTTP.APIKey = "api-key"
				c.HTTP.MetricsAddr = "[fdaa::3]:9091"
				c.Model.BaseURL = "https://models.example/v1"
				c.Model.APIKey = "model-key"
				c.Model.Name = "gpt-x"
				c.Platforms.AllowAllUsers = true
				c.Platforms.Telegram.Token = "tg-token"
				c.Platforms.Telegram.APIURL = "http://127.0.0.1:8081"
				c.Platforms.Telegram.AllowedUsers = []string{"1", "@ann"}
				c.Platforms.Slack.BotToken = "xoxb-1"
				c.Platforms.Slack.AppToken = "xapp-1"
				c.Platforms.Slack.SigningSecret = "signing"
				c.Platforms.Slack.APIURL = "http://127.0.0.1:8082/api/"
				c.Platforms.Slack.AllowedUsers = []string{"U1"}
				c.Platforms.Discord.Token = "dc-token"
				c.Platforms.Discord.APIURL = "http://127.0.0.1:8083/"
				c.Platforms.Discord.AllowedUsers = []string{"111", "222"}
				c.Delegation.MaxConcurrentChildren = 4
				c.Delegation.Model = "child-model"
				c.Delegation.BaseURL = "https://children.example/v1"
				c.Delegation.APIKey = "child-key"
				c.Tools.Workspace = "/srv/work"
			},
		},
		{
			desc: "allow-all accepts yes/no words",
			file: "platforms:\n  allow_all_users: true\n",
			env:  map[string]string{"HERALD_ALLOW_ALL_USERS": "off"},
			want: func(c *config.Config) {},
		},
		{
			desc: "~ in the file's paths is the user's home",
			file: "home: ~/data\nstore:\n  sqlite_path: ~/db/h.db\ntools:\n  workspace: ~/work\n",
			want: func(c *config.Config) {
				c.Home = filepath.Join(c.Home, "..", "data")
				c.Store.SQLitePath = filepath.Join(c.Home, "..", "db", "h.db")
				c.Tools.Workspace = filepath.Join(c.Home, "..", "work")
			},
		},
		{
			desc: "a relative sqlite_path is inside home",
			file: "store:\n  sqlite_path: state/h.db\n",
			want: func(c *config.Config) { c.Store.SQLitePath = filepath.Join(c.Home, "state", "h.db") },
		},
		{
			desc: "a relative scripts_dir is inside home, ~ is the user's home",
			file: "cron:\n  scripts_dir: jobs\ntools:\n  env_passthrough: [GOPATH, SSH_AUTH_SOCK]\n",
			want: func(c *config.Config) {
				c.Cron.ScriptsDir = filepath.Join(c.Home, "jobs")
				c.Tools.EnvPassthrough = []string{"GOPATH", "SSH_AUTH_SOCK"}
			},
		},
		{
			desc: "~ in scripts_dir is the user's home",
			file: "cron:\n  scripts_dir: ~/jobs\n",
			want: func(c *config.Config) { c.Cron.ScriptsDir = filepath.Join(filepath.Dir(c.Home), "jobs") },
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			home := t.TempDir()
			env := map[string]string{"HOME": home}
			for k, v := range tc.env {
				env[k] = v
			}
			path := ""
			if tc.file != "" {
				path = writeFile(t, t.TempDir(), "herald.yaml", tc.file)
			}
			got, err := config.Load(path, envOf(env))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := loaded(home)
			want.File = path
			tc.want(&want)
			want.Home = filepath.Clean(want.Home)
			want.Store.SQLitePath = filepath.Clean(want.Store.SQLitePath)
			if want.Cron.ScriptsDir == "" {
				want.Cron.ScriptsDir = filepath.Join(want.Home, "scripts")
			}
			if want.Tools.Workspace != "" {
				want.Tools.Workspace = filepath.Clean(want.Tools.Workspace)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Load mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadModelKeyFallback(t *testing.T) {
	tests := []struct {
		desc string
		file string
		env  map[string]string
		want string
	}{
		{desc: "OPENAI_API_KEY alone is used", env: map[string]string{"OPENAI_API_KEY": "openai"}, want: "openai"},
		{desc: "HERALD_MODEL_API_KEY wins over OPENAI_API_KEY", env: map[string]string{"OPENAI_API_KEY": "openai", "HERALD_MODEL_API_KEY": "herald"}, want: "herald"},
		{desc: "the file's key wins over OPENAI_API_KEY", file: "model:\n  api_key: file\n", env: map[string]string{"OPENAI_API_KEY": "openai"}, want: "file"},
		{desc: "HERALD_MODEL_API_KEY wins over the file", file: "model:\n  api_key: file\n", env: map[string]string{"HERALD_MODEL_API_KEY": "herald"}, want: "herald"},
		{desc: "none set", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			env := map[string]string{"HOME": t.TempDir()}
			for k, v := range tc.env {
				env[k] = v
			}
			path := ""
			if tc.file != "" {
				path = writeFile(t, t.TempDir(), "herald.yaml", tc.file)
			}
			c, err := config.Load(path, envOf(env))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if c.Model.APIKey != tc.want {
				t.Errorf("model.api_key = %q, want %q", c.Model.APIKey, tc.want)
			}
		})
	}
}

func TestLoadLists(t *testing.T) {
	tests := []struct {
		desc string
		file string
		env  string // TELEGRAM_ALLOWED_USERS; "" leaves it unset
		want []string
	}{
		{desc: "comma list from the environment", env: "123, @ann ,,456,", want: []string{"123", "@ann", "456"}},
		{desc: "YAML list", file: "platforms:\n  telegram:\n    allowed_users: [123, '@ann']\n", want: []string{"123", "@ann"}},
		{desc: "YAML block list", file: "platforms:\n  telegram:\n    allowed_users:\n      - 123\n      - '@ann'\n", want: []string{"123", "@ann"}},
		{desc: "comma string in YAML", file: "platforms:\n  telegram:\n    allowed_users: 123, @ann\n", want: []string{"123", "@ann"}},
		{desc: "environment replaces the file's list", file: "platforms:\n  telegram:\n    allowed_users: [1, 2]\n", env: "3", want: []string{"3"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			env := map[string]string{"HOME": t.TempDir()}
			if tc.env != "" {
				env["TELEGRAM_ALLOWED_USERS"] = tc.env
			}
			path := ""
			if tc.file != "" {
				path = writeFile(t, t.TempDir(), "herald.yaml", tc.file)
			}
			c, err := config.Load(path, envOf(env))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if diff := cmp.Diff(tc.want, c.Platforms.Telegram.AllowedUsers); diff != "" {
				t.Errorf("allowed_users mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadFindsFile(t *testing.T) {
	// Each candidate file names a different model, so the loaded model
	// name tells which file was read.
	tests := []struct {
		desc     string
		explicit bool // pass the "explicit" file as the path argument
		files    []string
		env      func(dir string) map[string]string
		want     string // model name read; "" for no file
		wantCode errs.Code
	}{
		{
			desc:     "the path argument wins over everything",
			explicit: true,
			files:    []string{"explicit", "env", "home", "userhome"},
			env: func(dir string) map[string]string {
				return map[string]string{"HERALD_CONFIG": filepath.Join(dir, "env/herald.yaml"), "HERALD_HOME": filepath.Join(dir, "home")}
			},
			want: "explicit",
		},
		{
			desc:  "HERALD_CONFIG wins over HERALD_HOME",
			files: []string{"env", "home", "userhome"},
			env: func(dir string) map[string]string {
				return map[string]string{"HERALD_CONFIG": filepath.Join(dir, "env/herald.yaml"), "HERALD_HOME": filepath.Join(dir, "home")}
			},
			want: "env",
		},
		{
			desc:  "herald.yaml in HERALD_HOME",
			files: []string{"home", "userhome"},
			env: func(dir string) map[string]string {
				return map[string]string{"HERALD_HOME": filepath.Join(dir, "home")}
			},
			want: "home",
		},
		{
			desc:  "herald.yaml in ~/.herald when HERALD_HOME is unset",
			files: []string{"userhome"},
			env:   func(dir string) map[string]string { return nil },
			want:  "userhome",
		},
		{
			desc:  "no file anywhere is fine",
			files: nil,
			env: func(dir string) map[string]string {
				return map[string]string{"HERALD_HOME": filepath.Join(dir, "home")}
			},
			want: "",
		},
		{
			desc:     "a missing path argument is NotFound",
			explicit: true,
			env:      func(dir string) map[string]string { return nil },
			wantCode: errs.NotFound,
		},
		{
			desc:  "a missing HERALD_CONFIG is NotFound",
			files: []string{"home"},
			env: func(dir string) map[string]string {
				return map[string]string{"HERALD_CONFIG": filepath.Join(dir, "nope.yaml"), "HERALD_HOME": filepath.Join(dir, "home")}
			},
			wantCode: errs.NotFound,
		},
	}
	// Where each candidate lives, relative to the test's directory.
	paths := map[string]string{
		"explicit": "explicit/herald.yaml",
		"env":      "env/herald.yaml",
		"home":     "home/herald.yaml",
		"userhome": "user/.herald/herald.yaml",
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				writeFile(t, dir, paths[f], "model:\n  name: "+f+"\n")
			}
			env := map[string]string{"HOME": filepath.Join(dir, "user")}
			for k, v := range tc.env(dir) {
				env[k] = v
			}
			path := ""
			if tc.explicit {
				path = filepath.Join(dir, paths["explicit"])
			}
			c, err := config.Load(path, envOf(env))
			if tc.wantCode != "" {
				if !errs.Is(err, tc.wantCode) {
					t.Fatalf("Load error = %v, want code %s", err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if c.Model.Name != tc.want {
				t.Errorf("model.name = %q, want %q (read %q)", c.Model.Name, tc.want, c.File)
			}
			if tc.want == "" && c.File != "" {
				t.Errorf("File = %q, want none", c.File)
			}
			if tc.want != "" && c.File != filepath.Join(dir, paths[tc.want]) {
				t.Errorf("File = %q, want %q", c.File, filepath.Join(dir, paths[tc.want]))
			}
		})
	}
}

func TestLoadReportsEverything(t *testing.T) {
	// One run names the unknown key, the ill-typed value, the bad
	// variable and the invalid value together, so a user fixes all at once.
	dir := t.TempDir()
	path := writeFile(t, dir, "herald.yaml", "store:\n  backend: mysql\n  leas_ttl: 30s\nmodel:\n  timeout: soon\n")
	env := map[string]string{"HOME": dir, "HERALD_ALLOW_ALL_USERS": "maybe", "DELEGATION_MAX_CONCURRENT_CHILDREN": "ten"}
	c, err := config.Load(path, envOf(env))
	if !errs.Is(err, errs.Invalid) {
		t.Fatalf("Load error = %v, want Invalid", err)
	}
	want := config.Problems{
		{Key: "store.leas_ttl", Line: 3, Msg: `unknown key (did you mean "lease_ttl"?)`},
		{Key: "model.timeout", Line: 5, Msg: `want a duration like "30s", got "soon"`},
		{Key: "delegation.max_concurrent_children", Msg: `DELEGATION_MAX_CONCURRENT_CHILDREN: want an integer, got "ten"`},
		{Key: "platforms.allow_all_users", Msg: `HERALD_ALLOW_ALL_USERS: want true or false, got "maybe"`},
		{Key: "store.backend", Msg: `unknown backend "mysql" (sqlite or redis)`},
	}
	if diff := cmp.Diff(want, problemsOf(t, err)); diff != "" {
		t.Errorf("problems mismatch (-want +got):\n%s", diff)
	}
	// The config is still returned, for config check to show.
	if c.Store.Backend != "mysql" || c.File != path {
		t.Errorf("Load returned backend %q, file %q; want the file's values", c.Store.Backend, c.File)
	}
}

// kanban.lanes is a mapping of lane names to lanes, each decoded like
// any other section, its env a mapping of names to strings.
func TestLoadKanbanLanes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "herald.yaml")
	yaml := `kanban:
  default_assignee: coder
  lanes:
    coder:
      command: claude
      args: ["-p", "--verbose"]
      env:
        ANTHROPIC_MODEL: opus
      max_concurrent: 2
      exit_zero_completes: true
    shell:
      command: ./work.sh
      bogus: 1
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(path, func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "kanban.lanes.shell.bogus") {
		t.Fatalf("Load = %v, want the unknown key named with its path", err)
	}
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(yaml, "      bogus: 1\n", "")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	coder := cfg.Kanban.Lanes["coder"]
	if coder.Command != "claude" || len(coder.Args) != 2 || coder.Env["ANTHROPIC_MODEL"] != "opus" || coder.MaxConcurrent != 2 || !coder.ExitZeroCompletes {
		t.Errorf("lane coder = %+v", coder)
	}
	if cfg.Kanban.Lanes["shell"].Command != "./work.sh" {
		t.Errorf("lane shell = %+v", cfg.Kanban.Lanes["shell"])
	}
}

func TestLoadModelPool(t *testing.T) {
	yaml := `model:
  name: gpt-4o
  credentials:
    - {key: sk-first-aaaa, priority: 2, label: team}
    - {key: sk-second-bbbb, priority: 1}
  strategy: round_robin
  cooldowns: {billing: 2h}
  fallbacks:
    - {base_url: "https://api.example.com/anthropic", model: claude-x, api_key: sk-fb-cccc}
`
	path := writeFile(t, t.TempDir(), "herald.yaml", yaml)
	c, err := config.Load(path, envOf(map[string]string{"HOME": t.TempDir()}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := []config.Credential{{Key: "sk-first-aaaa", Priority: 2, Label: "team"}, {Key: "sk-second-bbbb", Priority: 1}}
	if diff := cmp.Diff(want, c.Model.Keys()); diff != "" {
		t.Errorf("model keys (-want +got):\n%s", diff)
	}
	if c.Model.Strategy != "round_robin" || c.Model.Cooldowns.Billing != 2*time.Hour || c.Model.Cooldowns.Auth != 5*time.Minute {
		t.Errorf("strategy %q, cooldowns %+v", c.Model.Strategy, c.Model.Cooldowns)
	}
	if len(c.Model.Fallbacks) != 1 || c.Model.Fallbacks[0].Keys()[0].Key != "sk-fb-cccc" {
		t.Errorf("fallbacks = %+v", c.Model.Fallbacks)
	}
	out, err := c.MaskedYAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"sk-first-aaaa", "sk-second-bbbb", "sk-fb-cccc"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("masked config shows %s:\n%s", secret, out)
		}
	}
	if c.Model.Credentials[0].Key != "sk-first-aaaa" {
		t.Errorf("masking changed the config itself: %+v", c.Model.Credentials)
	}

	c, err = config.Load(path, envOf(map[string]string{"HOME": t.TempDir(), "HERALD_MODEL_API_KEYS": "sk-env-1, sk-env-2"}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want = []config.Credential{{Key: "sk-env-1", Priority: 0}, {Key: "sk-env-2", Priority: 1}}
	if diff := cmp.Diff(want, c.Model.Keys()); diff != "" {
		t.Errorf("HERALD_MODEL_API_KEYS keys (-want +got):\n%s", diff)
	}

	bad := writeFile(t, t.TempDir(), "herald.yaml", "model:\n  strategy: fastest\n  credentials: [{label: x}]\n  fallbacks: [{model: m}]\n")
	_, err = config.Load(bad, envOf(map[string]string{"HOME": t.TempDir()}))
	for _, key := range []string{"model.strategy", "model.credentials[0].key", "model.fallbacks[0].base_url"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Load of a bad pool = %v, want it to name %s", err, key)
		}
	}
}
