package slack

import (
	"context"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/heraldgw/herald/adapters"
)

// commandDeadline bounds the delivery of a slash command: Slack wants its
// answer within 3 s and shows the user an error after that.
const commandDeadline = 2500 * time.Millisecond

// commandFailed is what the user sees when a slash command could not be
// queued. Slack never retries a slash command, so saying so is all that
// keeps it from vanishing.
const commandFailed = "herald could not take that command just now; please try again."

// commandRefused is what the user sees when the router refused a slash
// command for good (too long, or not a command it can take): trying
// again would not help.
const commandRefused = "herald cannot take that command."

// deliver hands r to inbox unless it is skipped or its sender is not
// served. A nil error means Slack may be told the event arrived: it was
// queued, skipped, or refused for good. An error means it may be
// queued at a retry.
//
// The router refuses some messages for good (Invalid, TooLarge): those
// are logged and dropped, since a retry by Slack would be refused the
// same way, and Slack turns off the event subscription of an app that
// keeps failing. refused reports such a drop, so that a slash command's
// user is told.
func (a *Adapter) deliver(ctx context.Context, inbox adapters.Inbox, r inbound) (refused bool, err error) {
	if r.Skip != "" {
		a.log.Debug("event skipped", "why", r.Skip)
		return false, nil
	}
	if !a.opts.Access.Allows(r.In.Sender, r.UserName) {
		a.opts.Access.LogRefused(a.log, r.In.Sender, r.UserName)
		return false, nil
	}
	switch err := inbox.Deliver(ctx, r.In); {
	case err == nil:
		return false, nil
	case adapters.Refused(err):
		a.log.Error("the router refused a message; it is dropped", "conv", r.In.Conv, "message_id", r.In.MessageID, "err", err)
		return true, nil
	default:
		a.log.Warn("delivery failed; Slack will be asked to retry", "conv", r.In.Conv, "message_id", r.In.MessageID, "err", err)
		return false, err
	}
}

// takeCommand delivers a slash command within commandDeadline and returns
// the text to show its user: empty when it was taken (the answer follows
// in the channel), commandFailed when not.
//
// Delivering before the ack, with a deadline under Slack's 3 s, loses
// less than acking first: the router only appends to the queue, which
// takes milliseconds, and a failure is then told to the user, who can
// repeat the command. Acked first, a command whose delivery failed would
// vanish without a word, since Slack does not retry commands.
func (a *Adapter) takeCommand(ctx context.Context, inbox adapters.Inbox, c slackapi.SlashCommand) string {
	ctx, cancel := context.WithTimeout(ctx, a.commandDeadline)
	defer cancel()
	refused, err := a.deliver(ctx, inbox, parseSlashCommand(c, a.opts.GroupSessions))
	switch {
	case err != nil:
		return commandFailed
	case refused:
		return commandRefused
	}
	return ""
}

// bot returns the bot's ids, or zero ones before auth.test answered
// (the bot's messages are then still told by their bot_id).
func (a *Adapter) bot() identity {
	if id := a.self.Load(); id != nil {
		return *id
	}
	return identity{}
}
