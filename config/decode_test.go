package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/config"
)

// loadFile loads body as the config file with an otherwise empty
// environment.
func loadFile(t *testing.T, body string) (config.Config, error) {
	t.Helper()
	dir := t.TempDir()
	path := writeFile(t, dir, "herald.yaml", body)
	return config.Load(path, envOf(map[string]string{"HOME": dir}))
}

func TestDecodeProblems(t *testing.T) {
	tests := []struct {
		desc string
		file string
		want config.Problems
	}{
		{
			desc: "every unknown key, at every depth, with its path",
			file: `
hoem: /x
store:
  backend: sqlite
  redis_ulr: redis://x
  extra:
    deep: 1
platforms:
  telegram:
    tokn: abc
    allowed_users: [1]
  matrix:
    token: t
`,
			want: config.Problems{
				{Key: "hoem", Line: 2, Msg: `unknown key (did you mean "home"?)`},
				{Key: "store.redis_ulr", Line: 5, Msg: `unknown key (did you mean "redis_url"?)`},
				{Key: "store.extra", Line: 6, Msg: "unknown key"},
				{Key: "platforms.telegram.tokn", Line: 10, Msg: `unknown key (did you mean "token"?)`},
				{Key: "platforms.matrix", Line: 12, Msg: "unknown key"},
			},
		},
		{
			desc: "unknown and ill-typed keys of delegation, tools and auxiliary",
			file: `
delegation:
  max_concurent_children: 4
  max_spawn_depth: two
  orchestrator_enabled: maybe
  owner_ttl: 30
  request_overrides: [temperature]
  budget: 1
tools:
  workspaces: /srv
  dangerous_commands: {rm: 1}
auxiliary:
  review:
    modle: x
  goal:
    modle: y
`,
			want: config.Problems{
				{Key: "delegation.max_concurent_children", Line: 3, Msg: `unknown key (did you mean "max_concurrent_children"?)`},
				{Key: "delegation.max_spawn_depth", Line: 4, Msg: `want an integer, got "two"`},
				{Key: "delegation.orchestrator_enabled", Line: 5, Msg: `want true or false, got "maybe"`},
				{Key: "delegation.owner_ttl", Line: 6, Msg: `want a duration with a unit like "30s", got 30`},
				{Key: "delegation.request_overrides", Line: 7, Msg: "want a mapping, got a list"},
				{Key: "delegation.budget", Line: 8, Msg: "unknown key"},
				{Key: "tools.workspaces", Line: 10, Msg: `unknown key (did you mean "workspace"?)`},
				{Key: "tools.dangerous_commands", Line: 11, Msg: "want a list, got a mapping"},
				{Key: "auxiliary.review.modle", Line: 14, Msg: `unknown key (did you mean "model"?)`},
				{Key: "auxiliary.goal.modle", Line: 16, Msg: `unknown key (did you mean "model"?)`},
			},
		},
		{
			desc: "request overrides with a key that is not a plain value",
			file: "delegation:\n  request_overrides:\n    [a]: 1\n",
			want: config.Problems{{Key: "delegation.request_overrides", Line: 3, Msg: "want a mapping with plain keys"}},
		},
		{
			desc: "unknown keys pulled in through a merge",
			file: "base: &b\n  addr: 127.0.0.1:1\n  port: 2\nhttp:\n  <<: *b\n",
			want: config.Problems{
				{Key: "base", Line: 1, Msg: "unknown key"},
				{Key: "http.port", Line: 3, Msg: "unknown key"},
			},
		},
		{
			desc: "ill-typed values",
			file: `
store:
  max_entry_bytes: lots
  lease_ttl: 30
  dedupe_window: [1]
http:
  api_key: {a: b}
model:
  max_iterations: 1.5
platforms:
  allow_all_users: sometimes
  telegram:
    allowed_users: {a: b}
  slack:
    allowed_users: [[U1]]
workers: 8
`,
			want: config.Problems{
				{Key: "store.max_entry_bytes", Line: 3, Msg: `want an integer, got "lots"`},
				{Key: "store.lease_ttl", Line: 4, Msg: `want a duration with a unit like "30s", got 30`},
				{Key: "store.dedupe_window", Line: 5, Msg: `want a duration like "30s", got a list`},
				{Key: "http.api_key", Line: 7, Msg: "want a string, got a mapping"},
				{Key: "model.max_iterations", Line: 9, Msg: `want an integer, got "1.5"`},
				{Key: "platforms.allow_all_users", Line: 11, Msg: `want true or false, got "sometimes"`},
				{Key: "platforms.telegram.allowed_users", Line: 13, Msg: "want a list, got a mapping"},
				{Key: "platforms.slack.allowed_users[0]", Line: 15, Msg: "want a string, got a list"},
				{Key: "workers", Line: 16, Msg: "want a mapping, got a single value"},
			},
		},
		{
			desc: "a document that is not a mapping",
			file: "- a\n- b\n",
			want: config.Problems{{Key: "(top level)", Line: 1, Msg: "want a mapping, got a list"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := loadFile(t, tc.file)
			if diff := cmp.Diff(tc.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeSyntaxError(t *testing.T) {
	_, err := loadFile(t, "store:\n  backend: [sqlite\n")
	ps := problemsOf(t, err)
	if len(ps) != 1 || ps[0].Key != "" || !strings.Contains(ps[0].Msg, "herald.yaml: yaml:") {
		t.Errorf("problems = %v, want one naming the file and the YAML error", ps)
	}
}

func TestDecodeKeepsDefaults(t *testing.T) {
	tests := []struct {
		desc string
		file string
		want func(c *config.Config)
	}{
		{desc: "empty file", file: "", want: func(c *config.Config) {}},
		{desc: "comments only", file: "# nothing yet\n", want: func(c *config.Config) {}},
		{desc: "empty sections", file: "store:\nmodel:\nplatforms:\n  telegram:\ndelegation:\n  request_overrides:\ntools:\nauxiliary:\n  review:\n", want: func(c *config.Config) {}},
		{desc: "null value keeps the default", file: "store:\n  lease_ttl: ~\n  backend: null\n", want: func(c *config.Config) {}},
		{
			desc: "anchors and aliases",
			file: "model:\n  timeout: &t 90s\nstore:\n  lease_ttl: *t\n",
			want: func(c *config.Config) {
				c.Model.Timeout = 90 * time.Second
				c.Store.LeaseTTL = 90 * time.Second
			},
		},
		{
			desc: "numbers and booleans as strings where strings are wanted",
			file: "model:\n  name: 42\nplatforms:\n  discord:\n    guild_id: 123456789012345678\n",
			want: func(c *config.Config) {
				c.Model.Name = "42"
				c.Platforms.Discord.GuildID = "123456789012345678"
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := loadFile(t, tc.file)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := config.Default()
			tc.want(&want)
			// Only the decoded keys matter here; paths are Load's business.
			want.Home, want.Store.SQLitePath, want.Cron.ScriptsDir, want.File = got.Home, got.Store.SQLitePath, got.Cron.ScriptsDir, got.File
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Load mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodePrices(t *testing.T) {
	cfg, err := loadFile(t, `
model:
  base_url: http://127.0.0.1:9/v1
  prices:
    big: {input: 3, output: 15}
    small: {input: 0.25, output: 1.25}
`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]config.Price{"big": {Input: 3, Output: 15}, "small": {Input: 0.25, Output: 1.25}}
	if d := cmp.Diff(want, cfg.Model.Prices); d != "" {
		t.Errorf("prices (-want +got):\n%s", d)
	}
	_, err = loadFile(t, `
model:
  prices:
    big: {input: cheap}
`)
	if err == nil || !strings.Contains(err.Error(), `model.prices.big.input: want a number, got "cheap"`) {
		t.Errorf("Load of a price that is no number = %v", err)
	}
}
