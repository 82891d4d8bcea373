// Package config holds herald's configuration: the YAML file, the
// environment variables that override it, the defaults, and the checks
// `herald config check` runs. Key and variable names are public (see
// CONTRACT.md); add freely, rename only with a deprecation.
package config

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/tools"
)

// Config is the whole configuration. The yaml tags are the file's keys.
//
// A field tagged `secret:"true"` holds a credential and is masked whole
// when the config is shown; `secret:"url"` is a URL whose password (and
// credential-looking query parameters) are masked. Masking is driven by
// these tags, so a new credential field only needs its tag.
type Config struct {
	// Home holds herald's data: the SQLite file, transcripts, local
	// deliveries. A leading ~ is expanded on load.
	Home        string      `yaml:"home"`
	Store       Store       `yaml:"store"`
	HTTP        HTTP        `yaml:"http"`
	Model       Model       `yaml:"model"`
	Workers     Workers     `yaml:"workers"`
	Display     Display     `yaml:"display"`
	Platforms   Platforms   `yaml:"platforms"`
	SendMessage SendMessage `yaml:"send_message"`
	Delegation  Delegation  `yaml:"delegation"`
	Tools       Tools       `yaml:"tools"`
	Auxiliary   Auxiliary   `yaml:"auxiliary"`
	Cron        Cron        `yaml:"cron"`
	Kanban      Kanban      `yaml:"kanban"`
	Goal        Goal        `yaml:"goal"`
	Loop        Loop        `yaml:"loop"`
	Heartbeat   Heartbeat   `yaml:"heartbeat"`
	Agent       Agent       `yaml:"agent"`
	Attachments Attachments `yaml:"attachments"`
	STT         STT         `yaml:"stt"`
	Approvals   Approvals   `yaml:"approvals"`
	Dashboard   Dashboard   `yaml:"dashboard"`
	// MCPServers are the Model Context Protocol servers whose tools the
	// agent is offered, by name (docs/mcp.md).
	MCPServers map[string]MCPServer `yaml:"mcp_servers"`

	// File is the config file that was read, empty when none was. It is
	// not a key: it tells `herald config check` where the values came from.
	File string `yaml:"-"`

	// Referenced are the values of the variables mcp_servers' env and
	// headers name (${VAR}) but the base set's, as Load found
	// them: secrets like the values written out (Secrets). Not a key.
	Referenced []string `yaml:"-" json:"-"`
}

// Store selects and tunes the storage backend.
type Store struct {
	Backend     string `yaml:"backend"` // BackendSQLite or BackendRedis
	RedisURL    string `yaml:"redis_url" secret:"url"`
	RedisPrefix string `yaml:"redis_prefix"`
	// RedisMode is RedisSingle (one primary, RedisURL its address) or
	// RedisCluster (Redis Cluster, RedisURL its seed nodes: the first in
	// the URL's host, more as ?addr=host:port).
	RedisMode string `yaml:"redis_mode"`
	// RedisWaitReplicas is how many replicas must hold a commit's writes
	// (WAIT) before herald acts on it; 0 acts at once, which a primary's
	// loss may turn into a lost write.
	RedisWaitReplicas int `yaml:"redis_wait_replicas"`
	// SQLitePath is the database file; empty means herald.db in Home, and
	// a relative path is taken relative to Home, so the data stays
	// together whatever directory herald is started from.
	SQLitePath    string        `yaml:"sqlite_path"`
	MaxEntryBytes int           `yaml:"max_entry_bytes"`
	DedupeWindow  time.Duration `yaml:"dedupe_window"`
	LeaseTTL      time.Duration `yaml:"lease_ttl"`
	// HistoryMaxMessages bounds the history a conversation keeps: a turn
	// drops the oldest messages beyond it. 0 keeps everything.
	HistoryMaxMessages int `yaml:"history_max_messages"`
	// TimelineMaxItems bounds the timeline a conversation keeps (what the
	// local API shows): each append drops the oldest items beyond it. 0
	// keeps everything.
	TimelineMaxItems int `yaml:"timeline_max_items"`
}

// Storage backends.
const (
	BackendSQLite = "sqlite"
	BackendRedis  = "redis"
)

// Redis modes.
const (
	RedisSingle  = "single"
	RedisCluster = "cluster"
)

// HTTP configures the local HTTP server (API, webhooks, health, metrics).
type HTTP struct {
	Addr         string `yaml:"addr"`
	APIKey       string `yaml:"api_key" secret:"true"`
	MaxBodyBytes int64  `yaml:"max_body_bytes"`
	// MetricsAddr, when set, is a second listener that serves /metrics
	// alone and without the API key, for a scraper on a private network;
	// on Addr, /metrics asks for the key like the API does.
	MetricsAddr string `yaml:"metrics_addr"`
}

// Model is the OpenAI-compatible model endpoint turns are run against.
type Model struct {
	BaseURL string `yaml:"base_url" secret:"url"`
	APIKey  string `yaml:"api_key" secret:"true"`
	// Name empty means no model is configured; turns then answer with how
	// to configure one instead of failing.
	Name string `yaml:"name"`
	// APIMode is the API the model's server speaks: APIOpenAIChat, or
	// APIAnthropicMessages; empty reads it from BaseURL (one ending in
	// /anthropic speaks Anthropic's Messages API).
	APIMode string        `yaml:"api_mode"`
	Timeout time.Duration `yaml:"timeout"` // one model call
	// MaxRetries is how many times a call that timed out, met a 5xx or
	// a rate limit is tried again, with backoff; 0 tries once.
	MaxRetries    int `yaml:"max_retries"`
	MaxIterations int `yaml:"max_iterations"` // model calls per turn
	// HistoryBudget is how many characters of history a turn sends to the
	// model; the oldest messages are left out first, tool calls kept with
	// their results.
	HistoryBudget int `yaml:"history_budget"`
	// SystemPrompt opens every request to the model, before the user's
	// notes; empty sends none.
	SystemPrompt string `yaml:"system_prompt"`
	// MaxTokens bounds a reply where the model's API requires a bound
	// (Anthropic's Messages); 0 is llm.DefaultMaxTokens.
	MaxTokens int `yaml:"max_tokens"`
	// RequestOverrides are fields merged into the body of each model
	// request (temperature, reasoning_effort, …), over herald's. Shown
	// with the string values of credential-looking keys masked.
	RequestOverrides map[string]any `yaml:"request_overrides" secret:"keys"`
	// Prices are what each model's tokens cost, by model name, so that
	// /status can say what a conversation has cost.
	Prices map[string]Price `yaml:"prices"`

	// Credentials are the endpoint's API keys, a pool a key is chosen
	// from for each request (by Strategy); set, they replace APIKey.
	Credentials []Credential `yaml:"credentials"`
	Strategy    string       `yaml:"strategy"` // one of llm.Strategies
	// Cooldowns are how long a key the server refused is left alone
	// when the answer names no reset time.
	Cooldowns Cooldowns `yaml:"cooldowns"`
	// Fallbacks are the models tried, in order, when this one's keys
	// are all cooling or its failure says another may answer.
	Fallbacks []Fallback `yaml:"fallbacks"`
}

// Credential is one API key of a pool.
type Credential struct {
	Key      string `yaml:"key" secret:"true"`
	Priority int    `yaml:"priority"` // lowest first, for fill_first
	Label    string `yaml:"label"`
}

// Cooldowns are how long a refused key cools, by what refused it.
type Cooldowns struct {
	RateLimit time.Duration `yaml:"rate_limit"`
	Billing   time.Duration `yaml:"billing"`
	Auth      time.Duration `yaml:"auth"`
}

// Fallback is a model tried when the main one cannot answer.
type Fallback struct {
	BaseURL     string       `yaml:"base_url" secret:"url"`
	Model       string       `yaml:"model"`
	APIKey      string       `yaml:"api_key" secret:"true"`
	Credentials []Credential `yaml:"credentials"`
	APIMode     string       `yaml:"api_mode"` // as model.api_mode
}

// Keys are the credentials of the pool of m's endpoint: Credentials, or
// else APIKey alone (none when it is empty).
func (m Model) Keys() []Credential { return keysOf(m.Credentials, m.APIKey) }

// Keys are the credentials of f's pool, as Model.Keys.
func (f Fallback) Keys() []Credential { return keysOf(f.Credentials, f.APIKey) }

func keysOf(creds []Credential, key string) []Credential {
	if len(creds) > 0 {
		return creds
	}
	if key != "" {
		return []Credential{{Key: key}}
	}
	return nil
}

// Price is what a model's tokens cost, per million, in dollars.
type Price struct {
	Input  float64 `yaml:"input"`
	Output float64 `yaml:"output"`
}

// Price is what model's input and output tokens cost, per million, in
// dollars, when Prices names it.
func (m Model) Price(model string) (input, output float64, ok bool) {
	p, ok := m.Prices[model]
	return p.Input, p.Output, ok
}

// Workers sizes the worker pools of one gateway process.
type Workers struct {
	Turns      int `yaml:"turns"`
	Deliveries int `yaml:"deliveries"`
	// ShutdownGrace is how long a graceful stop lets running turns
	// finish before it cancels them and hands their entries back.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// DeliveryDrain is how long a graceful stop goes on sending the
	// replies already written once the turns have ended.
	DeliveryDrain time.Duration `yaml:"delivery_drain"`
}

// Display holds how conversations behave toward their users.
type Display struct {
	BusyInputMode string `yaml:"busy_input_mode"` // one of the BusyInput* modes
	// Streaming shows a reply on the chat platforms as the model writes
	// it: one message edited as text arrives, then made the full reply.
	Streaming bool `yaml:"streaming"`
	// StreamEditInterval is the least time between two edits of a reply
	// shown as it is written.
	StreamEditInterval time.Duration `yaml:"stream_edit_interval"`
}

// DefaultStreamEditInterval is display.stream_edit_interval's default;
// MinStreamEditInterval its least value, about the edit rate Telegram,
// Slack and Discord allow on one message.
const (
	DefaultStreamEditInterval = 1500 * time.Millisecond
	MinStreamEditInterval     = time.Second
)

// What a message does when it arrives while its conversation's turn runs.
const (
	BusyInputInterrupt = "interrupt" // cancel the running turn, run the new message
	BusyInputQueue     = "queue"     // wait for the running turn to finish
	BusyInputSteer     = "steer"     // feed the text into the running turn
)

// Platforms configures the chat platform adapters. An adapter whose token
// is empty is off.
type Platforms struct {
	// AllowAllUsers serves every sender on a platform without an
	// allow-list. Off by default: an empty allow-list serves nobody.
	AllowAllUsers bool `yaml:"allow_all_users"`
	// GroupSessions says who shares a session in a group chat: "auto"
	// (the default) shares one per thread and gives each user their own
	// in a plain group; "shared" and "per_user" do so everywhere.
	GroupSessions string   `yaml:"group_sessions"`
	Telegram      Telegram `yaml:"telegram"`
	Slack         Slack    `yaml:"slack"`
	Discord       Discord  `yaml:"discord"`
}

// Telegram configures the Telegram adapter.
type Telegram struct {
	Token string `yaml:"token" secret:"true"`
	// APIURL replaces the public Bot API base URL (a self-hosted Bot API
	// server, a test server); empty means the public one.
	APIURL        string   `yaml:"api_url" secret:"url"`
	AllowedUsers  []string `yaml:"allowed_users"` // user ids or @names
	Mode          string   `yaml:"mode"`          // TelegramPolling or TelegramWebhook
	WebhookURL    string   `yaml:"webhook_url" secret:"url"`
	WebhookSecret string   `yaml:"webhook_secret" secret:"true"`
	// GroupTrigger is when a group message is for herald: "mention" (the
	// default: mentioned, replied to, or a command) or "all".
	GroupTrigger string `yaml:"group_trigger"`
	// HomeChannel is the chat ("chat" or "chat:thread") a cron job's
	// report goes to when it is delivered to "telegram".
	HomeChannel string `yaml:"home_channel"`
}

// Telegram update modes.
const (
	TelegramPolling = "polling"
	TelegramWebhook = "webhook"
)

// Group session scopes (platforms.group_sessions).
const (
	GroupSessionsAuto    = adapters.ScopeAuto
	GroupSessionsShared  = adapters.ScopeShared
	GroupSessionsPerUser = adapters.ScopePerUser
)

// Group triggers (platforms.*.group_trigger).
const (
	TriggerMention = "mention"
	TriggerAll     = "all"
)

// Slack configures the Slack adapter: Socket Mode when AppToken is set,
// else the Events API verified with SigningSecret.
type Slack struct {
	BotToken      string   `yaml:"bot_token" secret:"true"`
	AppToken      string   `yaml:"app_token" secret:"true"`
	SigningSecret string   `yaml:"signing_secret" secret:"true"`
	APIURL        string   `yaml:"api_url" secret:"url"` // empty means Slack's Web API
	AllowedUsers  []string `yaml:"allowed_users"`
	HomeChannel   string   `yaml:"home_channel"` // where "slack" delivers: "channel[:thread]"
}

// Discord configures the Discord adapter.
type Discord struct {
	Token        string   `yaml:"token" secret:"true"`
	APIURL       string   `yaml:"api_url" secret:"url"` // empty means Discord's API
	AllowedUsers []string `yaml:"allowed_users"`
	// GuildID registers application commands in one guild, where they
	// appear at once; empty registers them globally.
	GuildID string `yaml:"guild_id"`
	// GroupTrigger is when a guild channel message is for herald:
	// "mention" (the default: mentioned, or a command) or "all".
	GroupTrigger string `yaml:"group_trigger"`
	HomeChannel  string `yaml:"home_channel"` // where "discord" delivers: "channel[:thread]"
	// BackfillWindow is how far back a process that takes the gateway
	// over looks for channels to read the messages of that came while no
	// process held it: those herald received a message in within it.
	BackfillWindow time.Duration `yaml:"backfill_window"`
}

// DefaultDiscordBackfillWindow is platforms.discord.backfill_window's
// default.
const DefaultDiscordBackfillWindow = time.Hour

// Dashboard configures the web dashboard at /ui/ on http.addr.
type Dashboard struct {
	// Enabled serves the dashboard; behind http.api_key when one is set.
	Enabled bool `yaml:"enabled"`
}

// Cron configures scheduled jobs.
type Cron struct {
	// Enabled runs the scheduler in the gateway; jobs can be managed
	// with it off, and wait.
	Enabled bool `yaml:"enabled"`
	// Timezone is the zone of a job's cron expression or time without
	// one of its own; an IANA name.
	Timezone string `yaml:"timezone"`
	// ScriptTimeout bounds one run of a job's script.
	ScriptTimeout time.Duration `yaml:"script_timeout"`
	// ScriptsDir is the only directory the script of a job the agent
	// made may come from; empty means scripts in Home, and a relative
	// path is taken relative to Home. Load writes the full path.
	ScriptsDir string `yaml:"scripts_dir"`
}

// Goal configures /goal.
type Goal struct {
	// MaxTurns is a goal's budget of continuation turns.
	MaxTurns int `yaml:"max_turns"`
	// JudgeTimeout bounds one call of the judge after a turn.
	JudgeTimeout time.Duration `yaml:"judge_timeout"`
}

// Loop configures /loop.
type Loop struct {
	// MinInterval is the least interval a fixed loop may have; at
	// least LoopIntervalFloor.
	MinInterval time.Duration `yaml:"min_interval"`
	// MaxTicks pauses a loop after that many ticks; 0 is no cap.
	MaxTicks int `yaml:"max_ticks"`
}

// LoopIntervalFloor is the least loop.min_interval may be.
const LoopIntervalFloor = 5 * time.Second

// Heartbeat configures /heartbeat.
type Heartbeat struct {
	// MinInterval is the least interval a heartbeat may have; at least
	// HeartbeatIntervalFloor.
	MinInterval time.Duration `yaml:"min_interval"`
}

// HeartbeatIntervalFloor is the least heartbeat.min_interval may be: a
// heartbeat runs a whole turn of the model each time.
const HeartbeatIntervalFloor = 60 * time.Second

// Kanban configures the boards' dispatcher and its lanes.
type Kanban struct {
	// Enabled runs the dispatcher in the gateway; boards can be used
	// with it off (`herald kanban daemon` may dispatch instead).
	Enabled                 bool `yaml:"enabled"`
	DispatchIntervalSeconds int  `yaml:"dispatch_interval_seconds"`
	// ClaimTTLSeconds is how long a claim holds between its worker's
	// heartbeats; a worker that misses them for it is reclaimed.
	ClaimTTLSeconds int `yaml:"claim_ttl_seconds"`
	// FailureLimit failed runs in a row block a card (gave_up); a card's
	// max_retries overrides it.
	FailureLimit int `yaml:"failure_limit"`
	// MaxSpawn bounds the workers one instance runs at once.
	MaxSpawn int `yaml:"max_spawn"`
	// DefaultAssignee is the lane of a card with none; empty leaves such
	// cards waiting, said on the board.
	DefaultAssignee string `yaml:"default_assignee"`
	// ReviewDispatch hands cards in review to a reviewer lane; off,
	// people review them.
	ReviewDispatch bool `yaml:"review_dispatch"`
	// ReviewLane is the lane that reviews; empty: the card's own lane.
	ReviewLane         string                `yaml:"review_lane"`
	AttachmentMaxBytes int64                 `yaml:"attachment_max_bytes"`
	Lanes              map[string]KanbanLane `yaml:"lanes"`
	// CrashGraceSeconds holds a card whose worker crashed back this long
	// before it runs again; 0: none.
	CrashGraceSeconds int `yaml:"crash_grace_seconds"`
	// RateLimitWaitSeconds holds a rate-limited card (exit 75) and its
	// lane back this long when the worker did not say until when.
	RateLimitWaitSeconds int `yaml:"rate_limit_wait_seconds"`
}

// KanbanLane is one lane: the command its workers run, or (the lane
// named herald, or a lane with no command) an in-process worker agent.
type KanbanLane struct {
	Command           string            `yaml:"command"`
	Args              []string          `yaml:"args"`
	Env               map[string]string `yaml:"env"`
	Workdir           string            `yaml:"workdir"`
	MaxConcurrent     int               `yaml:"max_concurrent"`
	ExitZeroCompletes bool              `yaml:"exit_zero_completes"`
	Model             string            `yaml:"model"`
}

// DispatchInterval is dispatch_interval_seconds as a duration.
func (k Kanban) DispatchInterval() time.Duration {
	return time.Duration(k.DispatchIntervalSeconds) * time.Second
}

// ClaimTTL is claim_ttl_seconds as a duration.
func (k Kanban) ClaimTTL() time.Duration { return time.Duration(k.ClaimTTLSeconds) * time.Second }

// CrashGrace is crash_grace_seconds as a duration.
func (k Kanban) CrashGrace() time.Duration { return time.Duration(k.CrashGraceSeconds) * time.Second }

// RateLimitWait is rate_limit_wait_seconds as a duration.
func (k Kanban) RateLimitWait() time.Duration {
	return time.Duration(k.RateLimitWaitSeconds) * time.Second
}

// SendMessage configures the send_message tool.
type SendMessage struct {
	// AllowedTargets are the platform:chat[:thread] targets the agent may
	// send to; the tool refuses any other.
	AllowedTargets []string `yaml:"allowed_targets"`
}

// Delegation configures delegate_task: the sub-agents ("children") an
// agent hands tasks to, which run in the background and report back.
type Delegation struct {
	// MaxConcurrentChildren is how many children one parent may have
	// running at once.
	MaxConcurrentChildren int `yaml:"max_concurrent_children"`
	// MaxSpawnDepth is how deep delegation goes: 1 is flat (children
	// cannot delegate), 2 lets an orchestrator child have workers, …
	MaxSpawnDepth       int  `yaml:"max_spawn_depth"`
	OrchestratorEnabled bool `yaml:"orchestrator_enabled"`
	MaxIterations       int  `yaml:"max_iterations"` // model calls per child
	// ChildTimeoutSeconds bounds one child's run; 0 is none. Load raises
	// a positive value below MinChildTimeoutSeconds to it; use
	// ChildTimeout, which does the same for a config built in code.
	ChildTimeoutSeconds int `yaml:"child_timeout_seconds"`
	// SubagentAutoApprove lets a child run what would otherwise wait for
	// a person's approval (a dangerous command) without asking.
	SubagentAutoApprove bool `yaml:"subagent_auto_approve"`
	// SubagentApprovals is what a child's approval does otherwise:
	// SubagentApprovalsDeny (approvals.unattended decides) or
	// SubagentApprovalsAsk (its parent conversation's person is asked).
	SubagentApprovals string `yaml:"subagent_approvals"`
	// WorktreeIsolation gives each child its own git worktree of
	// tools.workspace.
	WorktreeIsolation bool `yaml:"worktree_isolation"`
	// IndependentCompletions reports each task (or group) of a batch as it
	// ends, instead of one completion when all have.
	IndependentCompletions bool `yaml:"independent_completions"`
	// Model, BaseURL and APIKey are the children's model; what they leave
	// empty comes from the main model (see AuxModel.Fallback).
	Model   string `yaml:"model"`
	BaseURL string `yaml:"base_url" secret:"url"`
	APIKey  string `yaml:"api_key" secret:"true"`
	APIMode string `yaml:"api_mode"` // as model.api_mode
	// RequestOverrides are fields merged into the body of each child's
	// model request (temperature, reasoning_effort, …). Shown with the
	// string values of credential-looking keys masked (an extra header's
	// token, say).
	RequestOverrides map[string]any `yaml:"request_overrides" secret:"keys"`
	// A child that makes no progress for StallQuietSeconds (between tool
	// calls) or StallToolSeconds (inside one) is interrupted, and ends as
	// stalled if it has not stopped StallGraceSeconds later.
	StallQuietSeconds int `yaml:"stall_quiet_seconds"`
	StallToolSeconds  int `yaml:"stall_tool_seconds"`
	StallGraceSeconds int `yaml:"stall_grace_seconds"`
	SummaryMaxChars   int `yaml:"summary_max_chars"` // of a child's summary, kept for its parent
	// ProcessMaxChildren bounds the children one gateway process runs at
	// once, whatever their parents.
	ProcessMaxChildren int `yaml:"process_max_children"`
	// OwnerTTL is how long a process's claim on a running child lasts
	// without a heartbeat; another process then finds the child's owner
	// gone and ends it as unknown.
	OwnerTTL time.Duration `yaml:"owner_ttl"`
}

// ChildTimeout is child_timeout_seconds as a duration, 0 for none, with
// a positive value raised to MinChildTimeoutSeconds.
func (d Delegation) ChildTimeout() time.Duration {
	s := d.ChildTimeoutSeconds
	if s <= 0 {
		return 0
	}
	return time.Duration(max(s, MinChildTimeoutSeconds)) * time.Second
}

// Endpoint is the children's model settings, before any fallback.
func (d Delegation) Endpoint() AuxModel {
	return AuxModel{Model: d.Model, BaseURL: d.BaseURL, APIKey: d.APIKey, APIMode: d.APIMode}
}

// Tools configures the agent's workspace tools.
type Tools struct {
	// Workspace is the directory the workspace tools (files, terminal)
	// work in; empty turns them off. A leading ~ is expanded on load.
	Workspace       string        `yaml:"workspace"`
	TerminalTimeout time.Duration `yaml:"terminal_timeout"` // one terminal command
	// OutputMaxChars is how much of a command's output the model is
	// given; the rest is cut.
	OutputMaxChars int `yaml:"output_max_chars"`
	// DangerousCommands are regular expressions (RE2); a terminal command
	// that one matches anywhere waits for approval, unless a child runs it
	// with delegation.subagent_auto_approve.
	DangerousCommands []string `yaml:"dangerous_commands"`
	// EnvPassthrough names the variables of herald's environment a
	// process it starts (terminal, cron script, kanban lane, MCP server)
	// gets beyond the base set (proc.BaseEnv). herald's own secrets are
	// never given, even named here.
	EnvPassthrough []string `yaml:"env_passthrough"`
}

// Auxiliary holds the model settings of work done beside the
// conversation's own turns.
type Auxiliary struct {
	Review AuxModel `yaml:"review"` // what /review runs on
	Goal   AuxModel `yaml:"goal"`   // what the /goal judge runs on
	// Vision describes images for a model that cannot see them
	// (agent.image_input_mode text, or auto on such a model).
	Vision AuxModel `yaml:"vision"`
}

// Agent tunes how the conversations' agent takes what it is sent.
type Agent struct {
	// ImageInputMode is how an image reaches the model: ImagesNative,
	// ImagesText or ImagesAuto.
	ImageInputMode string `yaml:"image_input_mode"`
}

// The ways an image reaches the model (agent.image_input_mode).
const (
	ImagesAuto   = "auto"   // native when the model takes images, else described
	ImagesNative = "native" // the image itself
	ImagesText   = "text"   // described by auxiliary.vision
)

// Attachments bounds the files people send.
type Attachments struct {
	// MaxBytes is the largest file herald downloads or takes; a larger
	// one is refused with a reply saying so.
	MaxBytes int64 `yaml:"max_bytes"`
}

// DefaultAttachmentMaxBytes is attachments.max_bytes unset: Telegram's
// cap on what a bot downloads.
const DefaultAttachmentMaxBytes = 20 << 20

// STT is the speech-to-text endpoint voice notes and audio are
// transcribed with: OpenAI's /audio/transcriptions API or a server that
// speaks it (Groq, a local whisper server). Unset BaseURL and APIKey: no
// transcription.
type STT struct {
	BaseURL string `yaml:"base_url" secret:"url"`
	Model   string `yaml:"model"`
	APIKey  string `yaml:"api_key" secret:"true"`
}

// Configured reports whether voice notes can be transcribed: an endpoint
// or a key is set.
func (s STT) Configured() bool { return s.BaseURL != "" || s.APIKey != "" }

// AuxModel is a model other than the main one, each field empty for the
// main model's.
type AuxModel struct {
	Model   string `yaml:"model"`
	BaseURL string `yaml:"base_url" secret:"url"`
	APIKey  string `yaml:"api_key" secret:"true"`
	APIMode string `yaml:"api_mode"` // as model.api_mode; empty with the main base URL is the main model's
}

// The model APIs (model.api_mode).
const (
	APIOpenAIChat        = "openai_chat"
	APIAnthropicMessages = "anthropic_messages"
)

// ResolveAPIMode is the API a model's server at baseURL speaks, given
// the mode configured for it: mode when set, else Anthropic's Messages
// API for a base URL ending in /anthropic, else OpenAI's Chat
// Completions.
func ResolveAPIMode(mode, baseURL string) string {
	if mode != "" {
		return mode
	}
	if strings.HasSuffix(strings.TrimRight(baseURL, "/"), "/anthropic") {
		return APIAnthropicMessages
	}
	return APIOpenAIChat
}

// Fallback fills what m leaves empty from main. The main API key comes
// along only with the main base URL: a key is never sent to an endpoint
// it was not configured for, so an AuxModel with a base URL of its own
// and no key sends none.
func (m AuxModel) Fallback(main Model) AuxModel {
	if m.Model == "" {
		m.Model = main.Name
	}
	if m.BaseURL == "" {
		m.BaseURL = main.BaseURL
		if m.APIKey == "" {
			m.APIKey = main.APIKey
		}
		if m.APIMode == "" {
			m.APIMode = main.APIMode
		}
	}
	return m
}

// Delegation defaults and bounds.
const (
	DefaultMaxConcurrentChildren   = 10
	DefaultMaxSpawnDepth           = 1
	MaxSpawnDepth                  = 5
	DefaultDelegationMaxIterations = 50
	// MinChildTimeoutSeconds is the shortest child timeout: less would
	// end most children before their first model call returns.
	MinChildTimeoutSeconds   = 30
	DefaultStallQuietSeconds = 450
	DefaultStallToolSeconds  = 1200
	DefaultStallGraceSeconds = 120
	DefaultSummaryMaxChars   = 24_000
	MinSummaryMaxChars       = 100
	DefaultProcessChildren   = 64
	DefaultOwnerTTL          = 30 * time.Second
	// MinOwnerTTL keeps the heartbeat, every third of the TTL, at a
	// second or more.
	MinOwnerTTL = 3 * time.Second
)

// Defaults that have no home in a domain package.
const (
	DefaultHome         = "~/.herald"
	DefaultRedisURL     = "redis://127.0.0.1:6379/0"
	DefaultRedisPrefix  = "herald:"
	DefaultHTTPAddr     = "127.0.0.1:8642"
	DefaultMaxBodyBytes = 4 << 20
	DefaultModelBaseURL = "http://127.0.0.1:11434/v1"
	DefaultModelTimeout = 5 * time.Minute
	DefaultModelRetries = llm.DefaultMaxRetries
	// MaxModelRetries bounds model.max_retries: more would keep a turn
	// waiting on a failing model for minutes.
	MaxModelRetries      = 10
	DefaultMaxIterations = 90
	DefaultHistoryBudget = 200_000
	DefaultTurnWorkers   = 64
	DefaultDeliveries    = 8
	DefaultDeliveryDrain = 5 * time.Second
	DefaultScriptTimeout = time.Hour
	// SQLiteFile is the database file name inside Home.
	SQLiteFile = "herald.db"
	// ScriptsDir is the directory inside Home the agent's cron jobs'
	// scripts lie in, when cron.scripts_dir is not set.
	ScriptsDir = "scripts"
	// FileName is the config file looked for in Home.
	FileName = "herald.yaml"
)

// Default returns the configuration used where neither the file nor the
// environment says otherwise. It is the one place defaults are set.
func Default() Config {
	return Config{
		Home: DefaultHome,
		Store: Store{
			Backend:       BackendSQLite,
			RedisURL:      DefaultRedisURL,
			RedisPrefix:   DefaultRedisPrefix,
			RedisMode:     RedisSingle,
			MaxEntryBytes: sessions.DefaultMaxEntryBytes,
			DedupeWindow:  sessions.DefaultDedupeWindow,
			LeaseTTL:      sessions.DefaultLeaseTTL,
		},
		HTTP: HTTP{
			Addr:         DefaultHTTPAddr,
			MaxBodyBytes: DefaultMaxBodyBytes,
		},
		Model: Model{
			BaseURL:       DefaultModelBaseURL,
			Timeout:       DefaultModelTimeout,
			MaxRetries:    DefaultModelRetries,
			MaxIterations: DefaultMaxIterations,
			HistoryBudget: DefaultHistoryBudget,
			Strategy:      llm.FillFirst,
			Cooldowns: Cooldowns{
				RateLimit: llm.DefaultRateLimitCooldown,
				Billing:   llm.DefaultBillingCooldown,
				Auth:      llm.DefaultAuthCooldown,
			},
		},
		Workers: Workers{
			Turns:         DefaultTurnWorkers,
			Deliveries:    DefaultDeliveries,
			ShutdownGrace: sessions.DefaultGrace,
			DeliveryDrain: DefaultDeliveryDrain,
		},
		Display: Display{BusyInputMode: BusyInputInterrupt, Streaming: true, StreamEditInterval: DefaultStreamEditInterval},
		Approvals: Approvals{
			Mode:       ApprovalsManual,
			Timeout:    DefaultApprovalTimeout,
			Unattended: ApprovalsUnattendedDeny,
		},
		Delegation: Delegation{
			SubagentApprovals:     SubagentApprovalsDeny,
			MaxConcurrentChildren: DefaultMaxConcurrentChildren,
			MaxSpawnDepth:         DefaultMaxSpawnDepth,
			OrchestratorEnabled:   true,
			MaxIterations:         DefaultDelegationMaxIterations,
			StallQuietSeconds:     DefaultStallQuietSeconds,
			StallToolSeconds:      DefaultStallToolSeconds,
			StallGraceSeconds:     DefaultStallGraceSeconds,
			SummaryMaxChars:       DefaultSummaryMaxChars,
			ProcessMaxChildren:    DefaultProcessChildren,
			OwnerTTL:              DefaultOwnerTTL,
		},
		Tools: Tools{
			TerminalTimeout:   tools.DefaultTerminalTimeout,
			OutputMaxChars:    tools.DefaultOutputMaxChars,
			DangerousCommands: tools.DefaultDangerousCommands(),
		},
		Cron:        Cron{Enabled: true, Timezone: "UTC", ScriptTimeout: DefaultScriptTimeout},
		Dashboard:   Dashboard{Enabled: true},
		Goal:        Goal{MaxTurns: 20, JudgeTimeout: 30 * time.Second},
		Loop:        Loop{MinInterval: 30 * time.Second, MaxTicks: 100},
		Heartbeat:   Heartbeat{MinInterval: 60 * time.Second},
		Agent:       Agent{ImageInputMode: ImagesAuto},
		Attachments: Attachments{MaxBytes: DefaultAttachmentMaxBytes},
		STT:         STT{Model: "whisper-1"},
		Kanban: Kanban{
			Enabled: true, DispatchIntervalSeconds: 60, ClaimTTLSeconds: 900, FailureLimit: 2,
			MaxSpawn: 8, ReviewDispatch: true, AttachmentMaxBytes: 25 << 20,
			CrashGraceSeconds: 30, RateLimitWaitSeconds: 300,
		},
		Platforms: Platforms{
			GroupSessions: GroupSessionsAuto,
			Telegram:      Telegram{Mode: TelegramPolling, GroupTrigger: TriggerMention},
			Discord:       Discord{GroupTrigger: TriggerMention, BackfillWindow: DefaultDiscordBackfillWindow},
		},
	}
}

// CronScriptsDir is where the scripts of the agent's cron jobs must lie
// (cron.scripts_dir), as a full path.
func (c Config) CronScriptsDir() string { return c.inHome(c.Cron.ScriptsDir, ScriptsDir) }

// SQLitePath is the SQLite database file: store.sqlite_path, resolved
// against home when empty or relative.
func (c Config) SQLitePath() string { return c.inHome(c.Store.SQLitePath, SQLiteFile) }

// inHome is the path p resolved against home: name in home when p is
// empty, p itself when absolute.
func (c Config) inHome(p, name string) string {
	switch {
	case p == "":
		return filepath.Join(c.Home, name)
	case filepath.IsAbs(p):
		return p
	default:
		return filepath.Join(c.Home, p)
	}
}

// IsLoopback reports whether http.addr listens on loopback only. An empty
// host (":8642") listens on every interface, and a host name other than
// localhost may resolve anywhere, so both count as public.
func (c Config) IsLoopback() bool {
	host, _, err := net.SplitHostPort(c.HTTP.Addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Limits are the store limits the sessions and outbox stores take.
func (s Store) Limits() sessions.Limits {
	return sessions.Limits{MaxEntryBytes: s.MaxEntryBytes, DedupeWindow: s.DedupeWindow, TimelineMax: s.TimelineMaxItems}
}

// MCPServer is one Model Context Protocol server: a command herald
// starts (stdio) or a URL it connects to (streamable HTTP), exactly one
// of the two. Values of env and headers may name environment variables
// as ${VAR}, expanded when herald connects.
type MCPServer struct {
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env" secret:"values"`
	Cwd     string            `yaml:"cwd"`
	URL     string            `yaml:"url" secret:"url"`
	Headers map[string]string `yaml:"headers" secret:"values"`
	// Enabled false never connects; unset is true.
	Enabled *bool `yaml:"enabled"`
	// Timeout bounds one tool call; 0: DefaultMCPTimeout.
	Timeout time.Duration `yaml:"timeout"`
	// ConnectTimeout bounds connecting and listing the tools; 0:
	// DefaultMCPConnectTimeout.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	Tools          MCPTools      `yaml:"tools"`
}

// MCPTools filters a server's tools by name (path.Match globs): with
// Include, only the tools it matches; then without those Exclude
// matches, unless Include names them too (include wins).
type MCPTools struct {
	Include []string `yaml:"include"`
	Exclude []string `yaml:"exclude"`
}

// The MCP servers' defaults.
const (
	DefaultMCPTimeout        = 120 * time.Second
	DefaultMCPConnectTimeout = 30 * time.Second
)

// mcpVariable is a ${VAR} reference in an MCP server's env or header
// value.
var mcpVariable = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// ExpandVars replaces each ${VAR} in s with lookup(VAR); an unset
// variable is an error naming it, not an empty value a server would
// reject obscurely.
func ExpandVars(s string, lookup Lookup) (string, error) {
	var missing []string
	out := mcpVariable.ReplaceAllStringFunc(s, func(ref string) string {
		name := mcpVariable.FindStringSubmatch(ref)[1]
		v, ok := lookup(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, nil
}

// Secrets are the server's credentials: the values of its env and
// headers under a credential's name (proc.Sensitive: API_TOKEN,
// Authorization), and those of the variables they name as lookup has
// them (but the base set every process gets, proc.BaseEnv: a variable
// is named to keep its value out of the file, so ${GH_PAT} is a secret,
// ${HOME} is not).
func (s MCPServer) Secrets(lookup Lookup) []string {
	var out []string
	for _, m := range []map[string]string{s.Env, s.Headers} {
		for key, v := range m {
			if proc.Sensitive(key) && !mcpVariable.MatchString(v) {
				out = append(out, v)
			}
		}
	}
	return append(out, s.referenced(lookup)...)
}

// referenced are the values of the variables s's env and headers name,
// as Secrets takes them.
func (s MCPServer) referenced(lookup Lookup) []string {
	var out []string
	for _, m := range []map[string]string{s.Env, s.Headers} {
		for _, v := range m {
			for _, ref := range mcpVariable.FindAllStringSubmatch(v, -1) {
				if proc.Base(ref[1]) {
					continue
				}
				if val, ok := lookup(ref[1]); ok && val != "" {
					out = append(out, val)
				}
			}
		}
	}
	return out
}

// On reports whether herald connects to the server.
func (s MCPServer) On() bool { return s.Enabled == nil || *s.Enabled }

// CallTimeout is timeout, or its default.
func (s MCPServer) CallTimeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultMCPTimeout
}

// DialTimeout is connect_timeout, or its default.
func (s MCPServer) DialTimeout() time.Duration {
	if s.ConnectTimeout > 0 {
		return s.ConnectTimeout
	}
	return DefaultMCPConnectTimeout
}
