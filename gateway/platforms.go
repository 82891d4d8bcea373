package gateway

import (
	"log/slog"
	"slices"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/discord"
	"github.com/heraldgw/herald/adapters/slack"
	"github.com/heraldgw/herald/adapters/telegram"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/sessions"
)

// platformAdapters makes the chat platform adapters cfg turns on: each
// one whose token is set and that is not among given. The commands are
// listed to the platforms as they are registered in cmds, so a platform's
// menu shows what the shared router answers. Each adapter gets log as it
// is and names its platform in its lines itself. cursors keep where
// Discord's receiving got to, for its backfill after a takeover.
func platformAdapters(cfg config.Platforms, given map[string]bool, cmds *sessions.Commands, cursors adapters.Cursors, log *slog.Logger) ([]adapters.Adapter, error) {
	var infos []adapters.CommandInfo
	for _, c := range cmds.List() {
		infos = append(infos, adapters.CommandInfo{Name: c.Name, Aliases: c.Aliases, Args: c.Args, Summary: c.Summary})
	}
	access := func(platform string, allowed []string) *adapters.Access {
		return adapters.NewAccess(platform, allowed, cfg.AllowAllUsers)
	}
	on := platformsOn(cfg)
	makers := []struct {
		platform string
		on       bool // its token is set
		make     func() (adapters.Adapter, error)
	}{
		{telegram.Platform, on[telegram.Platform], func() (adapters.Adapter, error) {
			return telegram.New(telegram.Options{Config: cfg.Telegram, Access: access(telegram.Platform, cfg.Telegram.AllowedUsers),
				GroupSessions: cfg.GroupSessions, Commands: infos, Logger: log})
		}},
		{slack.Platform, on[slack.Platform], func() (adapters.Adapter, error) {
			return slack.New(slack.Options{Config: cfg.Slack, Access: access(slack.Platform, cfg.Slack.AllowedUsers),
				GroupSessions: cfg.GroupSessions, Commands: infos, Logger: log})
		}},
		{discord.Platform, on[discord.Platform], func() (adapters.Adapter, error) {
			return discord.New(discord.Options{Config: cfg.Discord, Access: access(discord.Platform, cfg.Discord.AllowedUsers),
				GroupSessions: cfg.GroupSessions, Commands: infos, Logger: log, Cursors: cursors})
		}},
	}
	var out []adapters.Adapter
	for _, m := range makers {
		if !m.on || given[m.platform] {
			continue
		}
		a, err := m.make()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// platformsOn says which chat platforms cfg turns on: those whose token
// is set.
func platformsOn(cfg config.Platforms) map[string]bool {
	return map[string]bool{
		telegram.Platform: cfg.Telegram.Token != "",
		slack.Platform:    cfg.Slack.BotToken != "",
		discord.Platform:  cfg.Discord.Token != "",
	}
}

// ConfiguredPlatforms lists the chat platforms cfg turns on, sorted.
func ConfiguredPlatforms(cfg config.Platforms) []string {
	var out []string
	for p, on := range platformsOn(cfg) {
		if on {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
