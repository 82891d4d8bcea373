package telegram

import (
	"context"
	"slices"
	"strings"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/sessions"
)

// maxCommandDescription is setMyCommands' limit on a description.
const maxCommandDescription = 256

// registerCommands sets the bot's command menu from the shared commands.
// A failure is logged: the commands still work when typed, only the
// menu is missing, so it does not hold up receiving.
func (a *Adapter) registerCommands(ctx context.Context) {
	cmds := botCommands(a.commands)
	if len(cmds) == 0 {
		return
	}
	if _, err := a.bot.SetMyCommands(ctx, &bot.SetMyCommandsParams{Commands: cmds}); err != nil {
		if ctx.Err() == nil {
			a.log.Warn("setMyCommands failed; the command menu is not updated", "err", a.redact(err))
		}
		return
	}
	a.log.Info("telegram command menu set", "commands", len(cmds))
}

// botCommands is the menu for cmds: names Telegram accepts (1 to 32 of
// a-z, 0-9 and _; a command whose name has '-' is offered by an alias
// it accepts), each described by its summary and its arguments.
func botCommands(cmds []adapters.CommandInfo) []models.BotCommand {
	var out []models.BotCommand
	for _, c := range cmds {
		names := append([]string{c.Name}, c.Aliases...)
		i := slices.IndexFunc(names, validCommand)
		if i < 0 {
			continue
		}
		name := names[i]
		desc := strings.TrimSpace(c.Summary)
		if desc == "" {
			desc = c.Name
		}
		if c.Args != "" {
			desc += " (" + c.Args + ")"
		}
		if r := []rune(desc); len(r) > maxCommandDescription {
			desc = string(r[:maxCommandDescription-1]) + "…"
		}
		out = append(out, models.BotCommand{Command: name, Description: desc})
	}
	return out
}

// validCommand reports a name Telegram accepts as a command: the same
// names the router reads as commands, in lower case, without '-'.
func validCommand(name string) bool {
	n, _, ok := sessions.ParseCommand("/" + name)
	return ok && n == name && !strings.Contains(name, "-")
}
