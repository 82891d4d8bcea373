package config_test

import (
	"path/filepath"
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
				c.SendMessage.AllowedTargets = []string{"telegram:42", "slack:T1:C2"}
			},
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
			file: "home: ~/data\nstore:\n  sqlite_path: ~/db/h.db\n",
			want: func(c *config.Config) {
				c.Home = filepath.Join(c.Home, "..", "data")
				c.Store.SQLitePath = filepath.Join(c.Home, "..", "db", "h.db")
			},
		},
		{
			desc: "a relative sqlite_path is inside home",
			file: "store:\n  sqlite_path: state/h.db\n",
			want: func(c *config.Config) { c.Store.SQLitePath = filepath.Join(c.Home, "state", "h.db") },
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
	env := map[string]string{"HOME": dir, "HERALD_ALLOW_ALL_USERS": "maybe"}
	c, err := config.Load(path, envOf(env))
	if !errs.Is(err, errs.Invalid) {
		t.Fatalf("Load error = %v, want Invalid", err)
	}
	want := config.Problems{
		{Key: "store.leas_ttl", Line: 3, Msg: `unknown key (did you mean "lease_ttl"?)`},
		{Key: "model.timeout", Line: 5, Msg: `want a duration like "30s", got "soon"`},
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
