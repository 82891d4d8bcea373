package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// Lookup reads one environment variable; os.LookupEnv is one. Load takes
// the environment through it so tests never touch the process's.
type Lookup func(name string) (string, bool)

// Load builds the effective configuration: Default, then the config file,
// then the environment. The file is path when not empty (the --config
// flag), else $HERALD_CONFIG, else $HERALD_HOME/herald.yaml if it exists;
// having no file at all is fine. A nil lookup reads the process
// environment.
//
// Load validates what it built. The error is Invalid and carries Problems
// (find them with errors.As) naming every bad key at once: unknown keys,
// ill-typed values, bad environment values and everything Validate
// reports. The returned Config is filled in as far as it could be even
// then, so `herald config check` can show it beside the problems. A named
// file that does not exist is NotFound; one that cannot be read is
// Invalid without Problems.
func Load(path string, lookup Lookup) (Config, error) {
	const op = "config.Load"
	if lookup == nil {
		lookup = os.LookupEnv
	}
	env := nonEmpty(lookup)

	cfg := Default()
	file, named := findFile(path, env)
	var problems Problems
	if file != "" {
		data, err := os.ReadFile(file)
		switch {
		case err == nil:
			cfg.File = file
			problems = decodeYAML(data, file, &cfg)
		case errors.Is(err, fs.ErrNotExist) && named:
			return Config{}, errs.E(op, errs.NotFound, "config file %s does not exist", file)
		case errors.Is(err, fs.ErrNotExist):
			// Removed between the look and the read: the same as absent.
		default:
			return Config{}, errs.Wrap(op, errs.Invalid, err)
		}
	}
	problems = append(problems, applyEnv(&cfg, env)...)
	applyFloors(&cfg)
	problems = append(problems, resolvePaths(&cfg, lookup)...)
	problems = append(problems, cfg.problems()...)
	for _, srv := range cfg.MCPServers {
		cfg.Referenced = append(cfg.Referenced, srv.referenced(lookup)...)
	}
	if len(problems) > 0 {
		return cfg, errs.Wrap(op, errs.Invalid, problems)
	}
	return cfg, nil
}

// nonEmpty treats a variable set to blanks as unset: deploy tools often
// define every variable they know of, empty ones included, and an empty
// TELEGRAM_BOT_TOKEN should not erase the file's token. Values are trimmed
// because secrets pasted from files tend to bring a newline along.
func nonEmpty(lookup Lookup) Lookup {
	return func(name string) (string, bool) {
		v, ok := lookup(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
}

// findFile says which config file to read and whether it was named
// (explicitly or by $HERALD_CONFIG), in which case it must exist.
func findFile(path string, env Lookup) (file string, named bool) {
	if path != "" {
		return path, true
	}
	if p, ok := env("HERALD_CONFIG"); ok {
		return p, true
	}
	home, ok := env("HERALD_HOME")
	if !ok {
		home = DefaultHome
	}
	home, err := expandHome(home, env)
	if err != nil {
		return "", false
	}
	p := filepath.Join(home, FileName)
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	return p, false
}

// envStrings are the variables that set one string key each, as
// CONTRACT.md lists them.
var envStrings = []struct {
	name  string
	field func(*Config) *string
}{
	{"HERALD_HOME", func(c *Config) *string { return &c.Home }},
	{"HERALD_STORE", func(c *Config) *string { return &c.Store.Backend }},
	{"REDIS_URL", func(c *Config) *string { return &c.Store.RedisURL }},
	{"HERALD_REDIS_PREFIX", func(c *Config) *string { return &c.Store.RedisPrefix }},
	{"HERALD_REDIS_MODE", func(c *Config) *string { return &c.Store.RedisMode }},
	{"HERALD_HTTP_ADDR", func(c *Config) *string { return &c.HTTP.Addr }},
	{"HERALD_API_KEY", func(c *Config) *string { return &c.HTTP.APIKey }},
	{"HERALD_METRICS_ADDR", func(c *Config) *string { return &c.HTTP.MetricsAddr }},
	{"HERALD_MODEL_BASE_URL", func(c *Config) *string { return &c.Model.BaseURL }},
	{"HERALD_MODEL_API_KEY", func(c *Config) *string { return &c.Model.APIKey }},
	{"HERALD_MODEL", func(c *Config) *string { return &c.Model.Name }},
	{"TELEGRAM_BOT_TOKEN", func(c *Config) *string { return &c.Platforms.Telegram.Token }},
	{"TELEGRAM_API_URL", func(c *Config) *string { return &c.Platforms.Telegram.APIURL }},
	{"SLACK_BOT_TOKEN", func(c *Config) *string { return &c.Platforms.Slack.BotToken }},
	{"SLACK_APP_TOKEN", func(c *Config) *string { return &c.Platforms.Slack.AppToken }},
	{"SLACK_SIGNING_SECRET", func(c *Config) *string { return &c.Platforms.Slack.SigningSecret }},
	{"SLACK_API_URL", func(c *Config) *string { return &c.Platforms.Slack.APIURL }},
	{"DISCORD_BOT_TOKEN", func(c *Config) *string { return &c.Platforms.Discord.Token }},
	{"DISCORD_API_URL", func(c *Config) *string { return &c.Platforms.Discord.APIURL }},
	{"DELEGATION_MODEL", func(c *Config) *string { return &c.Delegation.Model }},
	{"DELEGATION_BASE_URL", func(c *Config) *string { return &c.Delegation.BaseURL }},
	{"DELEGATION_API_KEY", func(c *Config) *string { return &c.Delegation.APIKey }},
	{"HERALD_TOOLS_WORKSPACE", func(c *Config) *string { return &c.Tools.Workspace }},
	{"HERALD_STT_BASE_URL", func(c *Config) *string { return &c.STT.BaseURL }},
	{"HERALD_STT_MODEL", func(c *Config) *string { return &c.STT.Model }},
	{"HERALD_STT_API_KEY", func(c *Config) *string { return &c.STT.APIKey }},
	{"TELEGRAM_HOME_CHANNEL", func(c *Config) *string { return &c.Platforms.Telegram.HomeChannel }},
	{"SLACK_HOME_CHANNEL", func(c *Config) *string { return &c.Platforms.Slack.HomeChannel }},
	{"DISCORD_HOME_CHANNEL", func(c *Config) *string { return &c.Platforms.Discord.HomeChannel }},
}

// envInts are the variables that set one integer key each.
var envInts = []struct {
	name, key string
	field     func(*Config) *int
}{
	{"HERALD_REDIS_WAIT_REPLICAS", "store.redis_wait_replicas", func(c *Config) *int { return &c.Store.RedisWaitReplicas }},
	{"DELEGATION_MAX_CONCURRENT_CHILDREN", "delegation.max_concurrent_children", func(c *Config) *int { return &c.Delegation.MaxConcurrentChildren }},
}

// envLists are the variables that hold comma separated lists.
var envLists = []struct {
	name  string
	field func(*Config) *[]string
}{
	{"TELEGRAM_ALLOWED_USERS", func(c *Config) *[]string { return &c.Platforms.Telegram.AllowedUsers }},
	{"SLACK_ALLOWED_USERS", func(c *Config) *[]string { return &c.Platforms.Slack.AllowedUsers }},
	{"DISCORD_ALLOWED_USERS", func(c *Config) *[]string { return &c.Platforms.Discord.AllowedUsers }},
}

// applyEnv lays the environment over cfg.
func applyEnv(cfg *Config, env Lookup) Problems {
	for _, e := range envStrings {
		if v, ok := env(e.name); ok {
			*e.field(cfg) = v
		}
	}
	// OPENAI_API_KEY is a fallback, not an override: it is often exported
	// for other tools, and must not replace a key herald was given.
	if v, ok := env("OPENAI_API_KEY"); ok && cfg.Model.APIKey == "" {
		cfg.Model.APIKey = v
	}
	for _, e := range envLists {
		if v, ok := env(e.name); ok {
			*e.field(cfg) = splitList(v)
		}
	}
	if v, ok := env("HERALD_MODEL_API_KEYS"); ok {
		// In the order given: the first is fill_first's first.
		cfg.Model.Credentials = nil
		for i, k := range splitList(v) {
			cfg.Model.Credentials = append(cfg.Model.Credentials, Credential{Key: k, Priority: i})
		}
	}
	var problems Problems
	for _, e := range envInts {
		v, ok := env(e.name)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			problems = append(problems, Problem{Key: e.key, Msg: e.name + ": want an integer, got " + quote(v)})
			continue
		}
		*e.field(cfg) = n
	}
	if v, ok := env("HERALD_ALLOW_ALL_USERS"); ok {
		b, ok := parseBool(v)
		if !ok {
			problems = append(problems, Problem{
				Key: "platforms.allow_all_users",
				Msg: "HERALD_ALLOW_ALL_USERS: want true or false, got " + quote(v),
			})
		} else {
			cfg.Platforms.AllowAllUsers = b
		}
	}
	return problems
}

// applyFloors raises the values that have a floor rather than a limit,
// so the effective config shows what herald will use.
func applyFloors(cfg *Config) {
	cfg.Delegation.ChildTimeoutSeconds = int(cfg.Delegation.ChildTimeout() / time.Second)
}

func parseBool(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "1", "t", "true", "y", "yes", "on":
		return true, true
	case "0", "f", "false", "n", "no", "off":
		return false, true
	}
	return false, false
}

// resolvePaths expands a leading ~ in home, store.sqlite_path,
// cron.scripts_dir and tools.workspace, makes home absolute (a relative
// one is from the directory herald started in: a worker started
// elsewhere reads the same path), and writes the SQLite file's and the
// scripts directory's full paths into the config, so the effective
// config shows where the data is.
func resolvePaths(cfg *Config, lookup Lookup) Problems {
	var problems Problems
	home, err := absPath(expandHome(cfg.Home, nonEmpty(lookup)))
	if err != nil {
		problems = append(problems, Problem{Key: "home", Msg: err.Error()})
	} else {
		cfg.Home = home
	}
	sqlite, err := expandHome(cfg.Store.SQLitePath, nonEmpty(lookup))
	if err != nil {
		problems = append(problems, Problem{Key: "store.sqlite_path", Msg: err.Error()})
	} else {
		cfg.Store.SQLitePath = sqlite
	}
	scripts, err := expandHome(cfg.Cron.ScriptsDir, nonEmpty(lookup))
	if err != nil {
		problems = append(problems, Problem{Key: "cron.scripts_dir", Msg: err.Error()})
	} else {
		cfg.Cron.ScriptsDir = scripts
	}
	if len(problems) == 0 {
		cfg.Store.SQLitePath = cfg.SQLitePath()
		cfg.Cron.ScriptsDir = cfg.CronScriptsDir()
	}
	workspace, err := expandHome(cfg.Tools.Workspace, nonEmpty(lookup))
	if err != nil {
		problems = append(problems, Problem{Key: "tools.workspace", Msg: err.Error()})
	} else {
		cfg.Tools.Workspace = workspace
	}
	return problems
}

// absPath is p, as expandHome gave it, made absolute; blank stays
// blank, for validation to report.
func absPath(p string, err error) (string, error) {
	if err != nil || strings.TrimSpace(p) == "" {
		return p, err
	}
	return filepath.Abs(p)
}

// expandHome replaces a leading "~" with the user's home directory, read
// from $HOME through env (and from the OS only when env has none).
func expandHome(p string, env Lookup) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		if strings.HasPrefix(p, "~") {
			return "", errors.New("~user paths are not supported; use an absolute path")
		}
		return p, nil
	}
	dir, ok := env("HOME")
	if !ok {
		var err error
		if dir, err = os.UserHomeDir(); err != nil {
			return "", errors.New("cannot expand ~: the home directory is unknown ($HOME is not set)")
		}
	}
	return filepath.Join(dir, strings.TrimPrefix(p, "~")), nil
}
