package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/outbox"
)

// Problem is one thing wrong with the configuration, tied to the key it
// is about.
type Problem struct {
	Key  string // dotted config key, e.g. "store.backend"; empty for the file as a whole
	Msg  string
	Line int // line in the config file, 0 when the problem is not from a file line
}

func (p Problem) String() string {
	s := p.Msg
	if p.Key != "" {
		s = p.Key + ": " + s
	}
	if p.Line > 0 {
		s += fmt.Sprintf(" (line %d)", p.Line)
	}
	return s
}

// Problems is every problem found at once. `herald config check` prints
// one per line; as an error it reads as one line.
type Problems []Problem

func (ps Problems) Error() string {
	switch len(ps) {
	case 0:
		return "no problems"
	case 1:
		return ps[0].String()
	}
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return fmt.Sprintf("%d problems: %s", len(ps), strings.Join(lines, "; "))
}

// Validate checks the values, not the file: it is what Load runs last, and
// what a config built in code can run. The error is Invalid and carries
// Problems naming every bad key.
func (c Config) Validate() error {
	if ps := c.problems(); len(ps) > 0 {
		return errs.Wrap("config.Validate", errs.Invalid, ps)
	}
	return nil
}

// Messages never quote a secret or a URL that may carry a password: the
// problems are printed and logged.
func (c Config) problems() Problems {
	var v validator
	if strings.TrimSpace(c.Home) == "" {
		v.add("home", "must be set")
	}
	c.Store.check(&v)
	c.checkHTTP(&v)
	c.Model.check(&v)
	v.positive("workers.turns", int64(c.Workers.Turns))
	v.positive("workers.deliveries", int64(c.Workers.Deliveries))
	v.positiveDuration("workers.shutdown_grace", c.Workers.ShutdownGrace)
	v.positiveDuration("workers.delivery_drain", c.Workers.DeliveryDrain)
	switch c.Display.BusyInputMode {
	case BusyInputInterrupt, BusyInputQueue, BusyInputSteer:
	default:
		v.add("display.busy_input_mode", "unknown mode %s (interrupt, queue or steer)", quote(c.Display.BusyInputMode))
	}
	if c.Display.StreamEditInterval < MinStreamEditInterval {
		v.add("display.stream_edit_interval", "must be at least %s (the platforms refuse faster edits), got %s",
			MinStreamEditInterval, c.Display.StreamEditInterval)
	}
	switch c.Platforms.GroupSessions {
	case GroupSessionsAuto, GroupSessionsShared, GroupSessionsPerUser:
	default:
		v.add("platforms.group_sessions", "unknown scope %s (auto, shared or per_user)", quote(c.Platforms.GroupSessions))
	}
	v.trigger("platforms.telegram.group_trigger", c.Platforms.Telegram.GroupTrigger)
	v.trigger("platforms.discord.group_trigger", c.Platforms.Discord.GroupTrigger)
	c.Approvals.check(&v)
	switch c.Delegation.SubagentApprovals {
	case SubagentApprovalsDeny, SubagentApprovalsAsk:
	default:
		v.add("delegation.subagent_approvals", "unknown rule %s (deny or ask)", quote(c.Delegation.SubagentApprovals))
	}
	c.Platforms.Telegram.check(&v)
	c.Platforms.Slack.check(&v)
	c.Platforms.Discord.check(&v)
	v.names("send_message.allowed_targets", c.SendMessage.AllowedTargets)
	for i, t := range c.SendMessage.AllowedTargets {
		if msg := checkTarget(strings.TrimSpace(t)); msg != "" {
			v.add(fmt.Sprintf("send_message.allowed_targets[%d]", i), "%s %s", quote(t), msg)
		}
	}
	c.Delegation.check(&v)
	c.Tools.check(&v)
	c.checkMCP(&v)
	v.optionalHTTPURL("auxiliary.review.base_url", c.Auxiliary.Review.BaseURL)
	v.optionalHTTPURL("auxiliary.goal.base_url", c.Auxiliary.Goal.BaseURL)
	v.apiMode("auxiliary.review.api_mode", c.Auxiliary.Review.APIMode)
	v.apiMode("auxiliary.goal.api_mode", c.Auxiliary.Goal.APIMode)
	v.optionalHTTPURL("auxiliary.vision.base_url", c.Auxiliary.Vision.BaseURL)
	v.apiMode("auxiliary.vision.api_mode", c.Auxiliary.Vision.APIMode)
	switch c.Agent.ImageInputMode {
	case ImagesAuto, ImagesNative, ImagesText:
	default:
		v.add("agent.image_input_mode", "want %s, %s or %s, got %q", ImagesAuto, ImagesNative, ImagesText, c.Agent.ImageInputMode)
	}
	v.positive("attachments.max_bytes", c.Attachments.MaxBytes)
	if c.Attachments.MaxBytes > maxAttachmentBytes {
		v.add("attachments.max_bytes", "at most %d (64 MiB), got %d", int64(maxAttachmentBytes), c.Attachments.MaxBytes)
	}
	v.optionalHTTPURL("stt.base_url", c.STT.BaseURL)
	if c.STT.Configured() && strings.TrimSpace(c.STT.Model) == "" {
		v.add("stt.model", "empty: name the transcription model (whisper-1 on OpenAI)")
	}
	v.apiMode("delegation.api_mode", c.Delegation.APIMode)
	v.positive("goal.max_turns", int64(c.Goal.MaxTurns))
	v.positiveDuration("goal.judge_timeout", c.Goal.JudgeTimeout)
	if c.Loop.MinInterval < LoopIntervalFloor {
		v.add("loop.min_interval", "is %s; it may not be below %s", c.Loop.MinInterval, LoopIntervalFloor)
	}
	if c.Loop.MaxTicks < 0 {
		v.add("loop.max_ticks", "is %d; 0 is no cap, and it may not be negative", c.Loop.MaxTicks)
	}
	if c.Heartbeat.MinInterval < HeartbeatIntervalFloor {
		v.add("heartbeat.min_interval", "is %s; it may not be below %s", c.Heartbeat.MinInterval, HeartbeatIntervalFloor)
	}
	c.Cron.check(&v)
	c.Kanban.check(&v)
	for _, h := range []struct{ platform, home string }{
		{"telegram", c.Platforms.Telegram.HomeChannel},
		{"slack", c.Platforms.Slack.HomeChannel},
		{"discord", c.Platforms.Discord.HomeChannel},
	} {
		if chat, _, _ := strings.Cut(h.home, ":"); h.home != "" && strings.TrimSpace(chat) == "" {
			v.add("platforms."+h.platform+".home_channel", "%s has no chat: use chat or chat:thread", quote(h.home))
		}
	}
	return v.problems
}

func (c Cron) check(v *validator) {
	if c.Timezone != "" {
		if _, err := time.LoadLocation(c.Timezone); err != nil {
			v.add("cron.timezone", "unknown timezone %s (an IANA name like Europe/Berlin)", quote(c.Timezone))
		}
	}
	v.positiveDuration("cron.script_timeout", c.ScriptTimeout)
}

func (k Kanban) check(v *validator) {
	v.positive("kanban.dispatch_interval_seconds", int64(k.DispatchIntervalSeconds))
	v.positive("kanban.claim_ttl_seconds", int64(k.ClaimTTLSeconds))
	v.positive("kanban.failure_limit", int64(k.FailureLimit))
	v.positive("kanban.max_spawn", int64(k.MaxSpawn))
	v.positive("kanban.attachment_max_bytes", k.AttachmentMaxBytes)
	v.positive("kanban.rate_limit_wait_seconds", int64(k.RateLimitWaitSeconds))
	if k.CrashGraceSeconds < 0 {
		v.add("kanban.crash_grace_seconds", "may not be negative, got %d", k.CrashGraceSeconds)
	}
	for _, name := range slices.Sorted(maps.Keys(k.Lanes)) {
		l := k.Lanes[name]
		key := "kanban.lanes." + name
		if name != strings.ToLower(strings.TrimSpace(name)) || name == "" {
			v.add(key, "a lane's name is lower-case, without spaces around it")
		}
		if l.MaxConcurrent < 0 {
			v.add(key+".max_concurrent", "may not be negative, got %d", l.MaxConcurrent)
		}
		if l.Command == "" && (len(l.Args) > 0 || l.Workdir != "" || l.ExitZeroCompletes) {
			v.add(key+".command", "is needed for args, workdir and exit_zero_completes (a lane without one runs herald's own worker agent)")
		}
	}
	lanes := func(key, lane string) {
		if lane = strings.ToLower(strings.TrimSpace(lane)); lane == "" || lane == "herald" {
			return
		}
		if _, ok := k.Lanes[lane]; !ok {
			v.add(key, "names lane %s, which kanban.lanes does not have", quote(lane))
		}
	}
	lanes("kanban.default_assignee", k.DefaultAssignee)
	lanes("kanban.review_lane", k.ReviewLane)
}

// reservedOverrides are request fields herald sets itself, each with
// what to do instead; "%s" is the section whose model key to set.
var reservedOverrides = map[string]string{
	"model":    "set %s instead",
	"messages": "herald sets it",
	"tools":    "herald sets it",
	"stream":   "herald sets it",
}

// overrides refuses the request overrides of section (model,
// delegation) that name a field herald sets itself.
func (v *validator) overrides(section string, o map[string]any) {
	modelKey := section + ".model"
	if section == "model" {
		modelKey = "model.name"
	}
	for _, k := range slices.Sorted(maps.Keys(o)) {
		if why, ok := reservedOverrides[k]; ok {
			if strings.Contains(why, "%s") {
				why = fmt.Sprintf(why, modelKey)
			}
			v.add(section+".request_overrides."+k, "cannot be overridden: %s", why)
		}
	}
}

func (d Delegation) check(v *validator) {
	v.positive("delegation.max_concurrent_children", int64(d.MaxConcurrentChildren))
	if d.MaxSpawnDepth < 1 || d.MaxSpawnDepth > MaxSpawnDepth {
		v.add("delegation.max_spawn_depth", "must be from 1 (flat) to %d, got %d", MaxSpawnDepth, d.MaxSpawnDepth)
	}
	v.positive("delegation.max_iterations", int64(d.MaxIterations))
	if d.ChildTimeoutSeconds < 0 {
		v.add("delegation.child_timeout_seconds", "must be 0 (none) or more, got %d", d.ChildTimeoutSeconds)
	}
	v.optionalHTTPURL("delegation.base_url", d.BaseURL)
	v.overrides("delegation", d.RequestOverrides)
	v.positive("delegation.stall_quiet_seconds", int64(d.StallQuietSeconds))
	v.positive("delegation.stall_tool_seconds", int64(d.StallToolSeconds))
	v.positive("delegation.stall_grace_seconds", int64(d.StallGraceSeconds))
	if d.SummaryMaxChars < MinSummaryMaxChars {
		v.add("delegation.summary_max_chars", "must be at least %d, got %d", MinSummaryMaxChars, d.SummaryMaxChars)
	}
	v.positive("delegation.process_max_children", int64(d.ProcessMaxChildren))
	if d.OwnerTTL < MinOwnerTTL {
		v.add("delegation.owner_ttl", "must be at least %s, got %s", MinOwnerTTL, d.OwnerTTL)
	}
}

func (t Tools) check(v *validator) {
	// Relative would mean relative to wherever herald was started from,
	// which is not where a reader of the config would look.
	if t.Workspace != "" && !filepath.IsAbs(t.Workspace) {
		v.add("tools.workspace", "must be an absolute path (or start with ~/), got %s", quote(t.Workspace))
	}
	v.positiveDuration("tools.terminal_timeout", t.TerminalTimeout)
	v.positive("tools.output_max_chars", int64(t.OutputMaxChars))
	for i, p := range t.DangerousCommands {
		key := fmt.Sprintf("tools.dangerous_commands[%d]", i)
		if strings.TrimSpace(p) == "" {
			// An empty pattern matches every command.
			v.add(key, "must not be empty")
		} else if _, err := regexp.Compile(p); err != nil {
			v.add(key, "%s is not a regular expression: %s", quote(p), strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
	}
	for i, name := range t.EnvPassthrough {
		if name == "" || strings.ContainsAny(name, "= \t\n") {
			v.add(fmt.Sprintf("tools.env_passthrough[%d]", i), "%s is not a variable's name", quote(name))
		}
	}
}

func (s Store) check(v *validator) {
	switch s.Backend {
	case BackendSQLite, BackendRedis:
	default:
		v.add("store.backend", "unknown backend %s (sqlite or redis)", quote(s.Backend))
	}
	switch {
	case s.RedisURL != "":
		if msg := checkRedisURL(s.RedisURL); msg != "" {
			v.add("store.redis_url", "%s", msg)
		}
	case s.Backend == BackendRedis:
		v.add("store.redis_url", "must be set when store.backend is redis")
	}
	switch s.RedisMode {
	case RedisSingle, "":
	case RedisCluster:
		if s.Backend != BackendRedis {
			v.add("store.redis_mode", "cluster needs store.backend redis, not %s", quote(s.Backend))
		}
	default:
		v.add("store.redis_mode", "unknown mode %s (single or cluster)", quote(s.RedisMode))
	}
	if s.RedisWaitReplicas < 0 {
		v.add("store.redis_wait_replicas", "must be 0 (act at once) or more, got %d", s.RedisWaitReplicas)
	}
	v.positive("store.max_entry_bytes", int64(s.MaxEntryBytes))
	v.positiveDuration("store.dedupe_window", s.DedupeWindow)
	v.positiveDuration("store.lease_ttl", s.LeaseTTL)
	if s.HistoryMaxMessages < 0 {
		v.add("store.history_max_messages", "must be 0 (keep all) or more, got %d", s.HistoryMaxMessages)
	}
	if s.TimelineMaxItems < 0 {
		v.add("store.timeline_max_items", "must be 0 (keep all) or more, got %d", s.TimelineMaxItems)
	}
}

func (c Config) checkHTTP(v *validator) {
	h := c.HTTP
	if msg := checkHostPort(h.Addr); msg != "" {
		v.add("http.addr", "%s", msg)
	} else if !c.IsLoopback() && h.APIKey == "" {
		v.add("http.api_key", "must be set when http.addr (%s) is not loopback", h.Addr)
	}
	v.positive("http.max_body_bytes", h.MaxBodyBytes)
	if h.MetricsAddr != "" {
		if msg := checkHostPort(h.MetricsAddr); msg != "" {
			v.add("http.metrics_addr", "%s", msg)
		} else if h.MetricsAddr == h.Addr && !strings.HasSuffix(h.Addr, ":0") {
			v.add("http.metrics_addr", "is http.addr (%s); give the metrics an address of their own, or leave it empty", h.Addr)
		}
	}
}

// checkHostPort says what is wrong with a listen address, or "".
func checkHostPort(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("want host:port like %q, got %s", DefaultHTTPAddr, quote(addr))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("port %s is not a number from 0 to 65535", quote(port))
	}
	return ""
}

func (m Model) check(v *validator) {
	if m.BaseURL == "" {
		v.add("model.base_url", "must be set")
	} else if msg := checkHTTPURL(m.BaseURL); msg != "" {
		v.add("model.base_url", "%s", msg)
	}
	v.positiveDuration("model.timeout", m.Timeout)
	if m.MaxRetries < 0 || m.MaxRetries > MaxModelRetries {
		v.add("model.max_retries", "must be from 0 to %d, got %d", MaxModelRetries, m.MaxRetries)
	}
	v.positive("model.max_iterations", int64(m.MaxIterations))
	v.positive("model.history_budget", int64(m.HistoryBudget))
	v.apiMode("model.api_mode", m.APIMode)
	v.overrides("model", m.RequestOverrides)
	if m.MaxTokens < 0 {
		v.add("model.max_tokens", "must be 0 (the default) or more, got %d", m.MaxTokens)
	}
	for _, name := range slices.Sorted(maps.Keys(m.Prices)) {
		p := m.Prices[name]
		if p.Input < 0 || p.Output < 0 {
			v.add("model.prices."+name, "input and output are prices per million tokens, 0 or more; got %v and %v", p.Input, p.Output)
		}
	}
	v.credentials("model.credentials", m.Credentials)
	if !slices.Contains(llm.Strategies, m.Strategy) {
		v.add("model.strategy", "want one of %s, got %s", strings.Join(llm.Strategies, ", "), quote(m.Strategy))
	}
	v.positiveDuration("model.cooldowns.rate_limit", m.Cooldowns.RateLimit)
	v.positiveDuration("model.cooldowns.billing", m.Cooldowns.Billing)
	v.positiveDuration("model.cooldowns.auth", m.Cooldowns.Auth)
	for i, f := range m.Fallbacks {
		key := fmt.Sprintf("model.fallbacks[%d]", i)
		if f.BaseURL == "" {
			v.add(key+".base_url", "must be set")
		} else if msg := checkHTTPURL(f.BaseURL); msg != "" {
			v.add(key+".base_url", "%s", msg)
		}
		if f.Model == "" {
			v.add(key+".model", "must be set")
		}
		v.apiMode(key+".api_mode", f.APIMode)
		v.credentials(key+".credentials", f.Credentials)
	}
}

// credentials refuses a pool's key that is empty.
func (v *validator) credentials(key string, creds []Credential) {
	for i, c := range creds {
		if strings.TrimSpace(c.Key) == "" {
			v.add(fmt.Sprintf("%s[%d].key", key, i), "must be set")
		}
	}
}

func (t Telegram) check(v *validator) {
	v.optionalHTTPURL("platforms.telegram.api_url", t.APIURL)
	v.names("platforms.telegram.allowed_users", t.AllowedUsers)
	switch t.Mode {
	case TelegramPolling:
	case TelegramWebhook:
		if t.WebhookURL == "" {
			v.add("platforms.telegram.webhook_url", "must be set when mode is webhook")
		}
		if t.WebhookSecret == "" {
			v.add("platforms.telegram.webhook_secret", "must be set when mode is webhook")
		}
	default:
		v.add("platforms.telegram.mode", "unknown mode %s (polling or webhook)", quote(t.Mode))
	}
	v.optionalHTTPURL("platforms.telegram.webhook_url", t.WebhookURL)
	if t.WebhookSecret != "" && !validWebhookSecret(t.WebhookSecret) {
		// Telegram's setWebhook refuses any other secret; better to say
		// so here than at startup against the live API.
		v.add("platforms.telegram.webhook_secret", "must be 1 to 256 characters of A-Z, a-z, 0-9, _ and -")
	}
}

func (v *validator) trigger(key, t string) {
	switch t {
	case TriggerMention, TriggerAll:
	default:
		v.add(key, "unknown trigger %s (mention or all)", quote(t))
	}
}

func validWebhookSecret(s string) bool {
	if len(s) > 256 {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

func (s Slack) check(v *validator) {
	v.optionalHTTPURL("platforms.slack.api_url", s.APIURL)
	v.names("platforms.slack.allowed_users", s.AllowedUsers)
	switch {
	case s.BotToken == "" && (s.AppToken != "" || s.SigningSecret != ""):
		// Both Socket Mode and the Events API post replies with the bot
		// token; without it the adapter could listen but never answer.
		v.add("platforms.slack.bot_token", "must be set when app_token or signing_secret is")
	case s.BotToken != "" && s.AppToken == "" && s.SigningSecret == "":
		v.add("platforms.slack.signing_secret", "must be set for the Events API (or set app_token for Socket Mode)")
	}
}

func (d Discord) check(v *validator) {
	v.optionalHTTPURL("platforms.discord.api_url", d.APIURL)
	v.names("platforms.discord.allowed_users", d.AllowedUsers)
	v.positiveDuration("platforms.discord.backfill_window", d.BackfillWindow)
	if d.GuildID != "" {
		if _, err := strconv.ParseUint(d.GuildID, 10, 64); err != nil {
			v.add("platforms.discord.guild_id", "want a numeric guild id, got %s", quote(d.GuildID))
		}
	}
}

// checkRedisURL returns what is wrong with a Redis URL, or "". It never
// quotes the URL, which may carry a password.
func checkRedisURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "malformed URL"
	}
	switch u.Scheme {
	case "redis", "rediss":
		if u.Host == "" {
			return "malformed URL: no host"
		}
		if db := strings.TrimPrefix(u.Path, "/"); db != "" {
			if _, err := strconv.Atoi(db); err != nil {
				return "malformed URL: the path must be a database number like /0"
			}
		}
	case "unix":
		if u.Path == "" {
			return "malformed URL: no socket path"
		}
	case "":
		return "malformed URL: want redis://host:port/db, rediss:// or unix://"
	default:
		return fmt.Sprintf("malformed URL: scheme %s is not redis, rediss or unix", quote(u.Scheme))
	}
	return ""
}

// checkHTTPURL returns what is wrong with an http(s) URL, or "", without
// quoting it.
func checkHTTPURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "malformed URL"
	}
	switch u.Scheme {
	case "http", "https":
	case "":
		return "malformed URL: want http:// or https://"
	default:
		return fmt.Sprintf("malformed URL: scheme %s is not http or https", quote(u.Scheme))
	}
	if u.Host == "" {
		return "malformed URL: no host"
	}
	return ""
}

type validator struct {
	problems Problems
}

// maxAttachmentBytes bounds attachments.max_bytes: what the store keeps
// of one file (media.MaxFileBytes).
const maxAttachmentBytes = 64 << 20

func (v *validator) add(key, format string, args ...any) {
	v.problems = append(v.problems, Problem{Key: key, Msg: fmt.Sprintf(format, args...)})
}

// apiMode refuses a model API herald does not speak.
func (v *validator) apiMode(key, mode string) {
	switch mode {
	case "", APIOpenAIChat, APIAnthropicMessages:
	default:
		v.add(key, "want %s or %s, got %q", APIOpenAIChat, APIAnthropicMessages, mode)
	}
}

func (v *validator) positive(key string, n int64) {
	if n <= 0 {
		v.add(key, "must be positive, got %d", n)
	}
}

func (v *validator) positiveDuration(key string, d time.Duration) {
	if d <= 0 {
		v.add(key, "must be positive, got %s", d)
	}
}

func (v *validator) optionalHTTPURL(key, raw string) {
	if raw == "" {
		return
	}
	if msg := checkHTTPURL(raw); msg != "" {
		v.add(key, "%s", msg)
	}
}

// names checks a list of ids or targets: no empty items, no blanks inside
// an item (a sign of a space-separated list where commas were meant).
func (v *validator) names(key string, items []string) {
	for i, s := range items {
		switch {
		case strings.TrimSpace(s) == "":
			v.add(fmt.Sprintf("%s[%d]", key, i), "must not be empty")
		case strings.ContainsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }):
			v.add(fmt.Sprintf("%s[%d]", key, i), "%s has blanks in it (separate items with commas)", quote(s))
		}
	}
}

// checkTarget says what is wrong with one allowed target, which is
// platform:chat[:thread] or platform:* (every chat of a platform).
func checkTarget(s string) string {
	if s == "" {
		return "" // reported by names
	}
	if p, ok := strings.CutSuffix(s, ":*"); ok && p != "" && !strings.Contains(p, ":") {
		return ""
	}
	if t, err := outbox.ParseTarget(s); err != nil || t.Chat == "*" {
		return "is neither platform:chat[:thread] nor platform:*"
	}
	return ""
}

func quote(s string) string { return strconv.Quote(s) }
