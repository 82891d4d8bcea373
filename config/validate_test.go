package config_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/errs"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		desc   string
		change func(c *config.Config)
		want   config.Problems // nil: valid
	}{
		{desc: "defaults are valid", change: func(c *config.Config) {}},
		{
			desc: "cron with a zone that does not exist, no script timeout and a home channel without a chat",
			change: func(c *config.Config) {
				c.Cron.Timezone, c.Cron.ScriptTimeout = "Mars/Base", 0
				c.Platforms.Slack.HomeChannel = ":123.4"
			},
			want: config.Problems{
				{Key: "cron.timezone", Msg: `unknown timezone "Mars/Base" (an IANA name like Europe/Berlin)`},
				{Key: "cron.script_timeout", Msg: "must be positive, got 0s"},
				{Key: "platforms.slack.home_channel", Msg: `":123.4" has no chat: use chat or chat:thread`},
			},
		},
		{
			desc: "kanban with no claim ttl, a lane with args and no command, and assignees no lane has",
			change: func(c *config.Config) {
				c.Kanban.ClaimTTLSeconds, c.Kanban.DefaultAssignee, c.Kanban.ReviewLane = 0, "coder", "reviewer"
				c.Kanban.Lanes = map[string]config.KanbanLane{
					"Shell": {Command: "/bin/true"},
					"tests": {Args: []string{"-v"}, MaxConcurrent: -1},
				}
			},
			want: config.Problems{
				{Key: "kanban.claim_ttl_seconds", Msg: "must be positive, got 0"},
				{Key: "kanban.lanes.Shell", Msg: "a lane's name is lower-case, without spaces around it"},
				{Key: "kanban.lanes.tests.max_concurrent", Msg: "may not be negative, got -1"},
				{Key: "kanban.lanes.tests.command", Msg: "is needed for args, workdir and exit_zero_completes (a lane without one runs herald's own worker agent)"},
				{Key: "kanban.default_assignee", Msg: `names lane "coder", which kanban.lanes does not have`},
				{Key: "kanban.review_lane", Msg: `names lane "reviewer", which kanban.lanes does not have`},
			},
		},
		{
			desc: "kanban with a negative crash grace and no rate-limit wait",
			change: func(c *config.Config) {
				c.Kanban.CrashGraceSeconds, c.Kanban.RateLimitWaitSeconds = -1, 0
			},
			want: config.Problems{
				{Key: "kanban.rate_limit_wait_seconds", Msg: "must be positive, got 0"},
				{Key: "kanban.crash_grace_seconds", Msg: "may not be negative, got -1"},
			},
		},
		{
			desc: "controllers with no budget, a loop interval under the floor, a negative tick cap and no heartbeat interval",
			change: func(c *config.Config) {
				c.Goal.MaxTurns, c.Loop.MinInterval, c.Loop.MaxTicks, c.Heartbeat.MinInterval = 0, time.Second, -1, 0
			},
			want: config.Problems{
				{Key: "goal.max_turns", Msg: "must be positive, got 0"},
				{Key: "loop.min_interval", Msg: "is 1s; it may not be below 5s"},
				{Key: "loop.max_ticks", Msg: "is -1; 0 is no cap, and it may not be negative"},
				{Key: "heartbeat.min_interval", Msg: "is 0s; it may not be below 1m0s"},
			},
		},
		{desc: "a loop at the floor and with no tick cap", change: func(c *config.Config) {
			c.Loop.MinInterval, c.Loop.MaxTicks = 5*time.Second, 0
		}},
		{
			desc:   "a heartbeat interval under its floor",
			change: func(c *config.Config) { c.Heartbeat.MinInterval = 30 * time.Second },
			want:   config.Problems{{Key: "heartbeat.min_interval", Msg: "is 30s; it may not be below 1m0s"}},
		},
		{desc: "a heartbeat interval at its floor", change: func(c *config.Config) {
			c.Heartbeat.MinInterval = 60 * time.Second
		}},
		{desc: "kanban lanes that run commands", change: func(c *config.Config) {
			c.Kanban.DefaultAssignee = "coder"
			c.Kanban.Lanes = map[string]config.KanbanLane{"coder": {Command: "claude", Args: []string{"-p"}, MaxConcurrent: 2, ExitZeroCompletes: true}}
		}},
		{desc: "cron in a zone, home channels with threads", change: func(c *config.Config) {
			c.Cron.Timezone = "America/New_York"
			c.Platforms.Telegram.HomeChannel = "-100123:7"
		}},
		{
			desc:   "home empty",
			change: func(c *config.Config) { c.Home = " " },
			want:   config.Problems{{Key: "home", Msg: "must be set"}},
		},
		{
			desc:   "unknown backend",
			change: func(c *config.Config) { c.Store.Backend = "mysql" },
			want:   config.Problems{{Key: "store.backend", Msg: `unknown backend "mysql" (sqlite or redis)`}},
		},
		{
			desc:   "unknown redis mode",
			change: func(c *config.Config) { c.Store.Backend, c.Store.RedisMode = "redis", "sentinel" },
			want:   config.Problems{{Key: "store.redis_mode", Msg: `unknown mode "sentinel" (single or cluster)`}},
		},
		{
			desc:   "cluster mode on SQLite",
			change: func(c *config.Config) { c.Store.RedisMode = "cluster" },
			want:   config.Problems{{Key: "store.redis_mode", Msg: `cluster needs store.backend redis, not "sqlite"`}},
		},
		{
			desc:   "negative wait replicas",
			change: func(c *config.Config) { c.Store.RedisWaitReplicas = -1 },
			want:   config.Problems{{Key: "store.redis_wait_replicas", Msg: "must be 0 (act at once) or more, got -1"}},
		},
		{
			desc:   "redis backend without a URL",
			change: func(c *config.Config) { c.Store.Backend, c.Store.RedisURL = "redis", "" },
			want:   config.Problems{{Key: "store.redis_url", Msg: "must be set when store.backend is redis"}},
		},
		{
			desc: "redis URLs that work",
			change: func(c *config.Config) {
				c.Store.Backend, c.Store.RedisURL = "redis", "rediss://default:pw@redis.internal:6380/3"
			},
		},
		{desc: "redis unix socket", change: func(c *config.Config) { c.Store.RedisURL = "unix:///run/redis.sock" }},
		{
			desc:   "redis URL that does not parse",
			change: func(c *config.Config) { c.Store.RedisURL = "redis://[::1" },
			want:   config.Problems{{Key: "store.redis_url", Msg: "malformed URL"}},
		},
		{
			desc:   "redis URL without a scheme",
			change: func(c *config.Config) { c.Store.RedisURL = "127.0.0.1:6379" },
			want:   config.Problems{{Key: "store.redis_url", Msg: "malformed URL"}},
		},
		{
			desc:   "redis URL with a path for a scheme",
			change: func(c *config.Config) { c.Store.RedisURL = "localhost/0" },
			want:   config.Problems{{Key: "store.redis_url", Msg: "malformed URL: want redis://host:port/db, rediss:// or unix://"}},
		},
		{
			desc:   "redis URL with another scheme",
			change: func(c *config.Config) { c.Store.RedisURL = "http://127.0.0.1:6379" },
			want:   config.Problems{{Key: "store.redis_url", Msg: `malformed URL: scheme "http" is not redis, rediss or unix`}},
		},
		{
			desc:   "redis URL without a host",
			change: func(c *config.Config) { c.Store.RedisURL = "redis:///0" },
			want:   config.Problems{{Key: "store.redis_url", Msg: "malformed URL: no host"}},
		},
		{
			desc:   "redis URL with a non-numeric database",
			change: func(c *config.Config) { c.Store.RedisURL = "redis://127.0.0.1:6379/main" },
			want:   config.Problems{{Key: "store.redis_url", Msg: "malformed URL: the path must be a database number like /0"}},
		},
		{
			desc:   "unix redis URL without a path",
			change: func(c *config.Config) { c.Store.RedisURL = "unix://" },
			want:   config.Problems{{Key: "store.redis_url", Msg: "malformed URL: no socket path"}},
		},
		{
			desc: "store limits not positive",
			change: func(c *config.Config) {
				c.Store.MaxEntryBytes = 0
				c.Store.DedupeWindow = -time.Hour
				c.Store.LeaseTTL = 0
			},
			want: config.Problems{
				{Key: "store.max_entry_bytes", Msg: "must be positive, got 0"},
				{Key: "store.dedupe_window", Msg: "must be positive, got -1h0m0s"},
				{Key: "store.lease_ttl", Msg: "must be positive, got 0s"},
			},
		},
		{
			desc:   "http.addr without a port",
			change: func(c *config.Config) { c.HTTP.Addr = "127.0.0.1" },
			want:   config.Problems{{Key: "http.addr", Msg: `want host:port like "127.0.0.1:8642", got "127.0.0.1"`}},
		},
		{
			desc:   "http.addr with a bad port",
			change: func(c *config.Config) { c.HTTP.Addr = "127.0.0.1:70000" },
			want:   config.Problems{{Key: "http.addr", Msg: `port "70000" is not a number from 0 to 65535`}},
		},
		{
			desc:   "http.addr public without an API key",
			change: func(c *config.Config) { c.HTTP.Addr = "0.0.0.0:8642" },
			want:   config.Problems{{Key: "http.api_key", Msg: "must be set when http.addr (0.0.0.0:8642) is not loopback"}},
		},
		{
			desc:   "http.addr on every interface without an API key",
			change: func(c *config.Config) { c.HTTP.Addr = ":8642" },
			want:   config.Problems{{Key: "http.api_key", Msg: "must be set when http.addr (:8642) is not loopback"}},
		},
		{desc: "http.addr public with an API key", change: func(c *config.Config) { c.HTTP.Addr, c.HTTP.APIKey = ":8642", "k" }},
		{desc: "http.addr on an ephemeral port", change: func(c *config.Config) { c.HTTP.Addr = "127.0.0.1:0" }},
		{desc: "metrics on an address of their own", change: func(c *config.Config) { c.HTTP.MetricsAddr = "0.0.0.0:9091" }},
		{desc: "both on ports the system picks", change: func(c *config.Config) { c.HTTP.Addr, c.HTTP.MetricsAddr = "127.0.0.1:0", "127.0.0.1:0" }},
		{
			desc:   "http.metrics_addr without a port",
			change: func(c *config.Config) { c.HTTP.MetricsAddr = "10.0.0.1" },
			want:   config.Problems{{Key: "http.metrics_addr", Msg: `want host:port like "127.0.0.1:8642", got "10.0.0.1"`}},
		},
		{
			desc:   "http.metrics_addr the same as http.addr",
			change: func(c *config.Config) { c.HTTP.MetricsAddr = c.HTTP.Addr },
			want:   config.Problems{{Key: "http.metrics_addr", Msg: "is http.addr (127.0.0.1:8642); give the metrics an address of their own, or leave it empty"}},
		},
		{
			desc:   "http.max_body_bytes negative",
			change: func(c *config.Config) { c.HTTP.MaxBodyBytes = -1 },
			want:   config.Problems{{Key: "http.max_body_bytes", Msg: "must be positive, got -1"}},
		},
		{
			desc:   "model.base_url empty",
			change: func(c *config.Config) { c.Model.BaseURL = "" },
			want:   config.Problems{{Key: "model.base_url", Msg: "must be set"}},
		},
		{
			desc:   "model.base_url without a scheme",
			change: func(c *config.Config) { c.Model.BaseURL = "api.openai.com/v1" },
			want:   config.Problems{{Key: "model.base_url", Msg: "malformed URL: want http:// or https://"}},
		},
		{
			desc:   "model.base_url with another scheme",
			change: func(c *config.Config) { c.Model.BaseURL = "ftp://models/v1" },
			want:   config.Problems{{Key: "model.base_url", Msg: `malformed URL: scheme "ftp" is not http or https`}},
		},
		{
			desc:   "model.base_url without a host",
			change: func(c *config.Config) { c.Model.BaseURL = "https:///v1" },
			want:   config.Problems{{Key: "model.base_url", Msg: "malformed URL: no host"}},
		},
		{
			desc:   "model.base_url that does not parse",
			change: func(c *config.Config) { c.Model.BaseURL = "http://a b/v1" },
			want:   config.Problems{{Key: "model.base_url", Msg: "malformed URL"}},
		},
		{
			desc:   "model limits not positive",
			change: func(c *config.Config) { c.Model.Timeout, c.Model.MaxIterations = -time.Second, 0 },
			want: config.Problems{
				{Key: "model.timeout", Msg: "must be positive, got -1s"},
				{Key: "model.max_iterations", Msg: "must be positive, got 0"},
			},
		},
		{
			desc:   "model retries out of range",
			change: func(c *config.Config) { c.Model.MaxRetries = 11 },
			want:   config.Problems{{Key: "model.max_retries", Msg: "must be from 0 to 10, got 11"}},
		},
		{desc: "no model retries", change: func(c *config.Config) { c.Model.MaxRetries = 0 }},
		{
			desc: "the main model's overrides name what herald sets",
			change: func(c *config.Config) {
				c.Model.RequestOverrides = map[string]any{"temperature": 0.2, "model": "other", "tools": []any{}}
			},
			want: config.Problems{
				{Key: "model.request_overrides.model", Msg: "cannot be overridden: set model.name instead"},
				{Key: "model.request_overrides.tools", Msg: "cannot be overridden: herald sets it"},
			},
		},
		{
			desc:   "an unknown model API",
			change: func(c *config.Config) { c.Model.APIMode, c.Delegation.APIMode = "gemini", config.APIAnthropicMessages },
			want:   config.Problems{{Key: "model.api_mode", Msg: `want openai_chat or anthropic_messages, got "gemini"`}},
		},
		{
			desc: "a negative price",
			change: func(c *config.Config) {
				c.Model.Prices = map[string]config.Price{"ok-model": {Input: 3, Output: 15}, "bad": {Input: -1}}
			},
			want: config.Problems{{Key: "model.prices.bad", Msg: "input and output are prices per million tokens, 0 or more; got -1 and 0"}},
		},
		{
			desc:   "negative history bound",
			change: func(c *config.Config) { c.Store.HistoryMaxMessages = -1 },
			want:   config.Problems{{Key: "store.history_max_messages", Msg: "must be 0 (keep all) or more, got -1"}},
		},
		{
			desc:   "negative timeline bound",
			change: func(c *config.Config) { c.Store.TimelineMaxItems = -1 },
			want:   config.Problems{{Key: "store.timeline_max_items", Msg: "must be 0 (keep all) or more, got -1"}},
		},
		{
			desc: "worker counts not positive",
			change: func(c *config.Config) {
				c.Workers.Turns, c.Workers.Deliveries, c.Workers.ShutdownGrace, c.Workers.DeliveryDrain = 0, -2, 0, -time.Second
			},
			want: config.Problems{
				{Key: "workers.turns", Msg: "must be positive, got 0"},
				{Key: "workers.deliveries", Msg: "must be positive, got -2"},
				{Key: "workers.shutdown_grace", Msg: "must be positive, got 0s"},
				{Key: "workers.delivery_drain", Msg: "must be positive, got -1s"},
			},
		},
		{
			desc:   "unknown busy input mode",
			change: func(c *config.Config) { c.Display.BusyInputMode = "ignore" },
			want:   config.Problems{{Key: "display.busy_input_mode", Msg: `unknown mode "ignore" (interrupt, queue or steer)`}},
		},
		{desc: "busy input mode queue", change: func(c *config.Config) { c.Display.BusyInputMode = "queue" }},
		{
			desc:   "stream edit interval under a second",
			change: func(c *config.Config) { c.Display.StreamEditInterval = 500 * time.Millisecond },
			want: config.Problems{{Key: "display.stream_edit_interval",
				Msg: "must be at least 1s (the platforms refuse faster edits), got 500ms"}},
		},
		{desc: "streaming off", change: func(c *config.Config) { c.Display.Streaming = false }},
		{desc: "busy input mode steer", change: func(c *config.Config) { c.Display.BusyInputMode = "steer" }},
		{
			desc: "unknown group session scope and triggers",
			change: func(c *config.Config) {
				c.Platforms.GroupSessions = "per_channel"
				c.Platforms.Telegram.GroupTrigger = "never"
				c.Platforms.Discord.GroupTrigger = ""
			},
			want: config.Problems{
				{Key: "platforms.group_sessions", Msg: `unknown scope "per_channel" (auto, shared or per_user)`},
				{Key: "platforms.telegram.group_trigger", Msg: `unknown trigger "never" (mention or all)`},
				{Key: "platforms.discord.group_trigger", Msg: `unknown trigger "" (mention or all)`},
			},
		},
		{desc: "group sessions per user, triggers all", change: func(c *config.Config) {
			c.Platforms.GroupSessions, c.Platforms.Telegram.GroupTrigger, c.Platforms.Discord.GroupTrigger = "per_user", "all", "all"
		}},
		{
			desc:   "unknown telegram mode",
			change: func(c *config.Config) { c.Platforms.Telegram.Mode = "push" },
			want:   config.Problems{{Key: "platforms.telegram.mode", Msg: `unknown mode "push" (polling or webhook)`}},
		},
		{
			desc:   "telegram webhook without URL and secret",
			change: func(c *config.Config) { c.Platforms.Telegram.Mode = "webhook" },
			want: config.Problems{
				{Key: "platforms.telegram.webhook_url", Msg: "must be set when mode is webhook"},
				{Key: "platforms.telegram.webhook_secret", Msg: "must be set when mode is webhook"},
			},
		},
		{
			desc: "telegram webhook with a bad URL and secret",
			change: func(c *config.Config) {
				c.Platforms.Telegram.Mode = "webhook"
				c.Platforms.Telegram.WebhookURL = "bot.example/hook"
				c.Platforms.Telegram.WebhookSecret = "not allowed!"
			},
			want: config.Problems{
				{Key: "platforms.telegram.webhook_url", Msg: "malformed URL: want http:// or https://"},
				{Key: "platforms.telegram.webhook_secret", Msg: "must be 1 to 256 characters of A-Z, a-z, 0-9, _ and -"},
			},
		},
		{
			desc: "telegram webhook set up",
			change: func(c *config.Config) {
				c.Platforms.Telegram.Mode = "webhook"
				c.Platforms.Telegram.WebhookURL = "https://bot.example/telegram"
				c.Platforms.Telegram.WebhookSecret = "s3cret_-X"
			},
		},
		{
			desc: "platform API URLs malformed",
			change: func(c *config.Config) {
				c.Platforms.Telegram.APIURL = "127.0.0.1:8081"
				c.Platforms.Slack.APIURL = "ws://slack/api"
				c.Platforms.Discord.APIURL = "http://"
			},
			want: config.Problems{
				{Key: "platforms.telegram.api_url", Msg: "malformed URL"},
				{Key: "platforms.slack.api_url", Msg: `malformed URL: scheme "ws" is not http or https`},
				{Key: "platforms.discord.api_url", Msg: "malformed URL: no host"},
			},
		},
		{
			desc:   "slack bot token alone",
			change: func(c *config.Config) { c.Platforms.Slack.BotToken = "xoxb-1" },
			want:   config.Problems{{Key: "platforms.slack.signing_secret", Msg: "must be set for the Events API (or set app_token for Socket Mode)"}},
		},
		{
			desc:   "slack app token without a bot token",
			change: func(c *config.Config) { c.Platforms.Slack.AppToken = "xapp-1" },
			want:   config.Problems{{Key: "platforms.slack.bot_token", Msg: "must be set when app_token or signing_secret is"}},
		},
		{desc: "slack socket mode", change: func(c *config.Config) { c.Platforms.Slack.BotToken, c.Platforms.Slack.AppToken = "xoxb-1", "xapp-1" }},
		{desc: "slack events API", change: func(c *config.Config) { c.Platforms.Slack.BotToken, c.Platforms.Slack.SigningSecret = "xoxb-1", "sig" }},
		{
			desc:   "discord guild id not numeric",
			change: func(c *config.Config) { c.Platforms.Discord.GuildID = "my-guild" },
			want:   config.Problems{{Key: "platforms.discord.guild_id", Msg: `want a numeric guild id, got "my-guild"`}},
		},
		{
			desc: "bad list items",
			change: func(c *config.Config) {
				c.Platforms.Telegram.AllowedUsers = []string{"1", ""}
				c.Platforms.Slack.AllowedUsers = []string{"U1 U2"}
				c.Platforms.Discord.AllowedUsers = []string{" "}
				c.SendMessage.AllowedTargets = []string{"telegram:1", "slack:T1:C1 discord:1"}
			},
			want: config.Problems{
				{Key: "platforms.telegram.allowed_users[1]", Msg: "must not be empty"},
				{Key: "platforms.slack.allowed_users[0]", Msg: `"U1 U2" has blanks in it (separate items with commas)`},
				{Key: "platforms.discord.allowed_users[0]", Msg: "must not be empty"},
				{Key: "send_message.allowed_targets[1]", Msg: `"slack:T1:C1 discord:1" has blanks in it (separate items with commas)`},
			},
		},
		{
			desc: "allowed targets that are not platform:chat[:thread] or platform:*",
			change: func(c *config.Config) {
				c.SendMessage.AllowedTargets = []string{"telegram", "slack:*", "discord:*:x", "api:ops"}
			},
			want: config.Problems{
				{Key: "send_message.allowed_targets[0]", Msg: `"telegram" is neither platform:chat[:thread] nor platform:*`},
				{Key: "send_message.allowed_targets[2]", Msg: `"discord:*:x" is neither platform:chat[:thread] nor platform:*`},
			},
		},
		{
			desc:   "a history budget that is not positive",
			change: func(c *config.Config) { c.Model.HistoryBudget = -1 },
			want: config.Problems{
				{Key: "model.history_budget", Msg: "must be positive, got -1"},
			},
		},
		{
			desc: "delegation counts below their floors",
			change: func(c *config.Config) {
				d := &c.Delegation
				d.MaxConcurrentChildren, d.MaxSpawnDepth, d.MaxIterations = 0, 0, -1
				d.StallQuietSeconds, d.StallToolSeconds, d.StallGraceSeconds = 0, -1, 0
				d.SummaryMaxChars, d.ProcessMaxChildren, d.OwnerTTL = 99, 0, 2*time.Second
			},
			want: config.Problems{
				{Key: "delegation.max_concurrent_children", Msg: "must be positive, got 0"},
				{Key: "delegation.max_spawn_depth", Msg: "must be from 1 (flat) to 5, got 0"},
				{Key: "delegation.max_iterations", Msg: "must be positive, got -1"},
				{Key: "delegation.stall_quiet_seconds", Msg: "must be positive, got 0"},
				{Key: "delegation.stall_tool_seconds", Msg: "must be positive, got -1"},
				{Key: "delegation.stall_grace_seconds", Msg: "must be positive, got 0"},
				{Key: "delegation.summary_max_chars", Msg: "must be at least 100, got 99"},
				{Key: "delegation.process_max_children", Msg: "must be positive, got 0"},
				{Key: "delegation.owner_ttl", Msg: "must be at least 3s, got 2s"},
			},
		},
		{
			desc:   "delegation spawn depth above the limit",
			change: func(c *config.Config) { c.Delegation.MaxSpawnDepth = 6 },
			want:   config.Problems{{Key: "delegation.max_spawn_depth", Msg: "must be from 1 (flat) to 5, got 6"}},
		},
		{
			desc: "delegation at its bounds",
			change: func(c *config.Config) {
				d := &c.Delegation
				d.MaxConcurrentChildren, d.MaxSpawnDepth, d.SummaryMaxChars, d.OwnerTTL = 1, 5, 100, 3*time.Second
			},
		},
		{
			desc:   "a negative child timeout",
			change: func(c *config.Config) { c.Delegation.ChildTimeoutSeconds = -1 },
			want:   config.Problems{{Key: "delegation.child_timeout_seconds", Msg: "must be 0 (none) or more, got -1"}},
		},
		{desc: "a child timeout below the floor is no error", change: func(c *config.Config) { c.Delegation.ChildTimeoutSeconds = 10 }},
		{
			desc: "delegation and review base URLs malformed",
			change: func(c *config.Config) {
				c.Delegation.BaseURL = "models.example/v1"
				c.Auxiliary.Review.BaseURL = "ftp://review/v1"
			},
			want: config.Problems{
				{Key: "delegation.base_url", Msg: "malformed URL: want http:// or https://"},
				{Key: "auxiliary.review.base_url", Msg: `malformed URL: scheme "ftp" is not http or https`},
			},
		},
		{
			desc: "request overrides of what herald sets",
			change: func(c *config.Config) {
				c.Delegation.RequestOverrides = map[string]any{"temperature": 0.1, "stream": true, "model": "x", "messages": []any{}}
			},
			want: config.Problems{
				{Key: "delegation.request_overrides.messages", Msg: "cannot be overridden: herald sets it"},
				{Key: "delegation.request_overrides.model", Msg: "cannot be overridden: set delegation.model instead"},
				{Key: "delegation.request_overrides.stream", Msg: "cannot be overridden: herald sets it"},
			},
		},
		{
			desc: "tools out of range",
			change: func(c *config.Config) {
				c.Tools.Workspace = "work"
				c.Tools.TerminalTimeout = 0
				c.Tools.OutputMaxChars = -1
			},
			want: config.Problems{
				{Key: "tools.workspace", Msg: `must be an absolute path (or start with ~/), got "work"`},
				{Key: "tools.terminal_timeout", Msg: "must be positive, got 0s"},
				{Key: "tools.output_max_chars", Msg: "must be positive, got -1"},
			},
		},
		{
			desc:   "dangerous commands that are not patterns",
			change: func(c *config.Config) { c.Tools.DangerousCommands = []string{`rm -rf /`, ` `, `curl (.*| sh`} },
			want: config.Problems{
				{Key: "tools.dangerous_commands[1]", Msg: "must not be empty"},
				{Key: "tools.dangerous_commands[2]", Msg: `"curl (.*| sh" is not a regular expression: missing closing ): ` + "`curl (.*| sh`"},
			},
		},
		{desc: "no dangerous commands", change: func(c *config.Config) { c.Tools.DangerousCommands = nil }},
		{
			desc:   "env_passthrough entries that are not names",
			change: func(c *config.Config) { c.Tools.EnvPassthrough = []string{"GOPATH", "", "A=b"} },
			want: config.Problems{
				{Key: "tools.env_passthrough[1]", Msg: `"" is not a variable's name`},
				{Key: "tools.env_passthrough[2]", Msg: `"A=b" is not a variable's name`},
			},
		},
		{desc: "a workspace", change: func(c *config.Config) { c.Tools.Workspace = "/srv/work" }},
		{
			desc: "every problem at once",
			change: func(c *config.Config) {
				c.Store.Backend = "mysql"
				c.Store.MaxEntryBytes = -1
				c.HTTP.Addr = "0.0.0.0:80"
				c.Model.BaseURL = "nope"
				c.Display.BusyInputMode = ""
			},
			want: config.Problems{
				{Key: "store.backend", Msg: `unknown backend "mysql" (sqlite or redis)`},
				{Key: "store.max_entry_bytes", Msg: "must be positive, got -1"},
				{Key: "http.api_key", Msg: "must be set when http.addr (0.0.0.0:80) is not loopback"},
				{Key: "model.base_url", Msg: "malformed URL: want http:// or https://"},
				{Key: "display.busy_input_mode", Msg: `unknown mode "" (interrupt, queue or steer)`},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c := config.Default()
			tc.change(&c)
			err := c.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errs.Is(err, errs.Invalid) {
				t.Fatalf("Validate() = %v, want Invalid", err)
			}
			if diff := cmp.Diff(tc.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProblemsError(t *testing.T) {
	tests := []struct {
		desc string
		ps   config.Problems
		want string
	}{
		{
			desc: "one problem",
			ps:   config.Problems{{Key: "store.backend", Msg: "bad"}},
			want: "store.backend: bad",
		},
		{
			desc: "several, with a line and a keyless one",
			ps: config.Problems{
				{Key: "store.lease_ttl", Msg: "bad", Line: 3},
				{Msg: "herald.yaml: yaml: broken"},
			},
			want: "2 problems: store.lease_ttl: bad (line 3); herald.yaml: yaml: broken",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := tc.ps.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
}
