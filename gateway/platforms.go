package gateway

import (
	"log/slog"

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
// is and names its platform in its lines itself.
func platformAdapters(cfg config.Platforms, given map[string]bool, cmds *sessions.Commands, log *slog.Logger) ([]adapters.Adapter, error) {
	var infos []adapters.CommandInfo
	for _, c := range cmds.List() {
		infos = append(infos, adapters.CommandInfo{Name: c.Name, Args: c.Args, Summary: c.Summary})
	}
	access := func(platform string, allowed []string) *adapters.Access {
		return adapters.NewAccess(platform, allowed, cfg.AllowAllUsers)
	}
	var out []adapters.Adapter
	if t := cfg.Telegram; t.Token != "" && !given[telegram.Platform] {
		a, err := telegram.New(telegram.Options{
			Config:        t,
			Access:        access("telegram", t.AllowedUsers),
			GroupSessions: cfg.GroupSessions,
			Commands:      infos,
			Logger:        log,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if s := cfg.Slack; s.BotToken != "" && !given[slack.Platform] {
		a, err := slack.New(slack.Options{
			Config:        s,
			Access:        access("slack", s.AllowedUsers),
			GroupSessions: cfg.GroupSessions,
			Commands:      infos,
			Logger:        log,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if d := cfg.Discord; d.Token != "" && !given[discord.Platform] {
		a, err := discord.New(discord.Options{
			Config:        d,
			Access:        access("discord", d.AllowedUsers),
			GroupSessions: cfg.GroupSessions,
			Commands:      infos,
			Logger:        log,
		})
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
