package discord

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
)

// registerCommands replaces the bot's application commands with
// Options.Commands, in Config.GuildID when set (they show at once there)
// else globally, retrying with backoff until it works or ctx ends. With
// no commands it leaves Discord's list alone rather than wipe it.
func (a *Adapter) registerCommands(ctx context.Context) {
	cmds := applicationCommands(a.opts.Commands)
	if len(cmds) == 0 {
		return
	}
	guild := a.opts.Config.GuildID
	for fails := 1; ; fails++ {
		_, app := a.ids()
		_, err := a.rest.ApplicationCommandBulkOverwrite(app, guild, cmds, discordgo.WithContext(ctx))
		if err == nil {
			a.log.Info("registered the application commands", "commands", len(cmds), "guild", guild)
			return
		}
		wait := a.retry.Wait(fails)
		a.log.Warn("could not register the application commands; retrying", "err", err, "retry_in_ms", wait.Milliseconds())
		if !clock.Sleep(ctx, wait) {
			return
		}
	}
}

// applicationCommands are herald's commands as Discord's chat input
// commands. A command with arguments takes them as one string option,
// named after its Args ("MESSAGE" → message), required unless Args is
// bracketed ("[FOCUS]") or names no word ("…").
func applicationCommands(cmds []adapters.CommandInfo) []*discordgo.ApplicationCommand {
	var out []*discordgo.ApplicationCommand
	for _, c := range cmds {
		if !commandName(c.Name) {
			continue
		}
		ac := &discordgo.ApplicationCommand{
			Type:        discordgo.ChatApplicationCommand,
			Name:        c.Name,
			Description: clip(firstNonEmpty(c.Summary, c.Name), 100),
			Options:     []*discordgo.ApplicationCommandOption{},
		}
		if c.Args != "" {
			name := optionName(c.Args)
			ac.Options = append(ac.Options, &discordgo.ApplicationCommandOption{
				Type:        discordgo.ApplicationCommandOptionString,
				Name:        firstNonEmpty(name, "args"),
				Description: clip(c.Args, 100),
				Required:    name != "" && !strings.HasPrefix(strings.TrimSpace(c.Args), "["),
			})
		}
		out = append(out, ac)
	}
	return out
}

// optionName is args lower-cased, kept to the characters Discord allows
// in an option name, at most 32 of them.
func optionName(args string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(args) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			b.WriteRune(r)
		}
	}
	return clip(b.String(), 32)
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// clip cuts s to n characters.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
