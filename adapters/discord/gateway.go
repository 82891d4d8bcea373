package discord

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// intents are the gateway events herald asks for: guild and DM messages
// with their content, and guilds, whose channel and thread lists let a
// thread's parent be known without a REST call. Message content is a
// privileged intent: it must be enabled for the bot in Discord's
// developer portal, else Discord closes the gateway with 4014.
const intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages |
	discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent

// deferWithin bounds the deferral of an application command, and the
// delivery and answer of a press: Discord drops an interaction not
// answered within 3 s. deliverPressWithin is the delivery's share.
const (
	deferWithin        = 2500 * time.Millisecond
	deliverPressWithin = 2 * time.Second
)

// deliverTimeout bounds one Deliver. Discord does not send a gateway
// event again, so a failed one is tried again, spaced by deliverRetry,
// until the inbox takes it (see listener.deliver).
const (
	deliverTimeout  = 10 * time.Second
	deliverAttempts = 4
)

var deliverRetry = adapters.Backoff{Min: 200 * time.Millisecond, Max: 2 * time.Second}

// Run holds the gateway connection until ctx ends: it opens it (again
// and again with backoff while that fails), registers the application
// commands, and delivers what is addressed to herald. After a disconnect
// it opens the connection again, which resumes the session: the events
// missed meanwhile are replayed. A new session (the first, or one that
// could not resume) first reads what came while no session was
// connected (backfill.go). Errors: Invalid when Discord refuses the token
// or the intents, which no retry mends.
func (a *Adapter) Run(ctx context.Context, inbox adapters.Inbox) error {
	a.opts.Access.LogStart(a.log)
	gw := a.session()
	gw.Identify.Intents = intents
	// Run reconnects rather than discordgo: discordgo's reconnect loop can
	// outlive Close (a heartbeat that fails after it reconnects), and would
	// then hold the gateway after Run ended and the lease went to another
	// process.
	gw.ShouldReconnectOnError = false
	// Events are handled one at a time in the order Discord sent them, so
	// messages of one channel reach the queue in order.
	gw.SyncEvents = true
	l := &listener{a: a, ctx: ctx, inbox: inbox, gw: gw, lost: make(chan struct{}, 1)}
	gw.AddHandler(l.ready)
	gw.AddHandler(l.disconnected)
	gw.AddHandler(l.event)
	defer l.backfills.Wait()

	// Registration retries on its own, never holding up a reconnect.
	var registering sync.WaitGroup
	defer registering.Wait()
	for first := true; ; first = false {
		opened, err := a.open(ctx, gw)
		if !opened {
			return err
		}
		if first {
			a.log.Info("connected to the Discord gateway")
			registering.Go(func() { a.registerCommands(ctx) })
		} else {
			a.log.Info("reconnected to the Discord gateway")
		}
		select {
		case <-ctx.Done():
			if err := gw.Close(); err != nil {
				a.log.Warn("closing the Discord gateway", "err", err)
			}
			return nil
		case <-l.lost:
			a.log.Warn("lost the Discord gateway connection; reconnecting")
		}
	}
}

// open opens gw, retrying with backoff until it works, ctx ends (false,
// nil) or Discord refuses the configuration (false, the error). Only the
// gateway's owner connects: each try checks the ownership first.
func (a *Adapter) open(ctx context.Context, gw *discordgo.Session) (bool, error) {
	for fails := 1; ; fails++ {
		err := adapters.CheckOwner(ctx)
		if err == nil {
			err = gw.Open()
		}
		if errors.Is(err, discordgo.ErrWSAlreadyOpen) {
			// A stale disconnect signal (two closes of one connection).
			err = nil
		}
		if err == nil {
			if ctx.Err() != nil {
				_ = gw.Close()
				return false, nil
			}
			return true, nil
		}
		if fatal := refused(err); fatal != nil {
			a.log.Error("Discord refused the bot's configuration", "err", fatal)
			return false, fatal
		}
		wait := a.retry.Wait(fails)
		a.log.Warn("could not open the Discord gateway; retrying", "err", err, "retry_in_ms", wait.Milliseconds())
		if !clock.Sleep(ctx, wait) {
			return false, nil
		}
	}
}

// refused is an Invalid error when err says the token or the intents are
// wrong, else nil.
func refused(err error) error {
	const op = "discord.Run"
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusUnauthorized {
		return errs.E(op, errs.Invalid, "Discord refused the bot token (401); check platforms.discord.token")
	}
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch ce.Code {
		case 4004:
			return errs.E(op, errs.Invalid, "the gateway refused the bot token (4004); check platforms.discord.token")
		case 4013, 4014:
			return errs.E(op, errs.Invalid, "the gateway refused the intents (%d): enable the Message Content intent for the bot in Discord's developer portal", ce.Code)
		}
	}
	return nil
}

// listener handles one Run's gateway events. With SyncEvents its methods
// run on discordgo's read goroutine, one event at a time.
type listener struct {
	a     *Adapter
	ctx   context.Context
	inbox adapters.Inbox
	gw    *discordgo.Session
	lost  chan struct{} // a disconnect, for Run to reconnect

	// backfilled is closed when the backfill of the latest new session
	// is done; events wait for it, so a channel's messages reach the
	// inbox in order. backfills is the backfills running.
	mu         sync.Mutex
	backfilled chan struct{}
	backfills  sync.WaitGroup
}

func (l *listener) ready(_ *discordgo.Session, r *discordgo.Ready) {
	var bot, app string
	if r.User != nil {
		bot = r.User.ID
	}
	if r.Application != nil {
		app = r.Application.ID
	}
	l.a.setIDs(bot, app)
	// A new session: what came while none was connected is read from
	// the channels, before the session's own events, which wait for it.
	// It runs beside the read goroutine, since discordgo handles READY
	// inside Open, before its heartbeats start.
	done := make(chan struct{})
	l.mu.Lock()
	prev := l.backfilled
	l.backfilled = done
	l.mu.Unlock()
	l.backfills.Go(func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		l.backfill()
	})
}

// waitBackfill waits for the latest backfill to be done, or Run to end.
func (l *listener) waitBackfill() {
	l.mu.Lock()
	done := l.backfilled
	l.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-l.ctx.Done():
	}
}

// disconnected tells Run the connection is gone: discordgo closed it
// after a read error, a missed heartbeat ACK or Discord's request to
// reconnect.
func (l *listener) disconnected(*discordgo.Session, *discordgo.Disconnect) {
	select {
	case l.lost <- struct{}{}:
	default:
	}
}

func (l *listener) event(_ *discordgo.Session, e *discordgo.Event) {
	if e.Type == "MESSAGE_CREATE" || e.Type == "INTERACTION_CREATE" {
		l.waitBackfill()
	}
	switch e.Type {
	case "MESSAGE_CREATE":
		l.message(e.RawData)
	case "INTERACTION_CREATE":
		l.interaction(e.RawData)
	}
}

func (l *listener) env() env {
	bot, _ := l.a.ids()
	return env{botID: bot, trigger: l.a.opts.Config.GroupTrigger, scope: l.a.opts.GroupSessions, threadParent: l.threadParent}
}

func (l *listener) message(raw []byte) {
	ev, why := parseMessage(raw, l.env())
	if why != "" {
		l.a.log.Debug("message not for herald", "reason", string(why))
		return
	}
	if !l.a.opts.Access.Allows(ev.in.Sender, ev.userName) {
		l.a.opts.Access.LogRefused(l.a.log, ev.in.Sender, ev.userName)
		return
	}
	l.deliver(ev.in, ev.channelID, ev.guildID)
}

// interaction defers an application command, then delivers it. The
// deferral comes first: an answer the router gives at once (/status)
// could otherwise reach Discord before the deferral, and a follow-up to
// an interaction not yet answered is refused.
//
// A press of a button (parsePress) goes its own way (press).
func (l *listener) interaction(raw []byte) {
	ev, why := parsePress(raw, l.env())
	pressed := why != skipNotPress
	if !pressed {
		ev, why = parseInteraction(raw, l.env())
	}
	if why != "" {
		l.a.log.Debug("interaction not for herald", "reason", string(why))
		return
	}
	it := &discordgo.Interaction{ID: ev.reply.id, AppID: ev.reply.app, Token: ev.reply.token}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), deferWithin)
	defer cancel()
	if !l.a.opts.Access.Allows(ev.in.Sender, ev.userName) {
		l.refuse(ctx, it, ev)
		return
	}
	if pressed {
		l.press(ctx, it, ev)
		return
	}
	err := l.a.rest.InteractionRespond(it, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource},
		discordgo.WithContext(ctx))
	if err != nil {
		l.a.log.Warn("could not defer a command; its answer will go to the channel", "interaction", it.ID, "err", err)
	}
	l.deliver(ev.in, "", "")
}

// refuse answers the interaction it of a sender the allow-list does not
// serve, so they see why rather than "did not respond".
func (l *listener) refuse(ctx context.Context, it *discordgo.Interaction, ev event) {
	l.a.opts.Access.LogRefused(l.a.log, ev.in.Sender, ev.userName)
	err := l.a.rest.InteractionRespond(it, &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: notAllowed, Flags: discordgo.MessageFlagsEphemeral},
	}, discordgo.WithContext(ctx))
	if err != nil {
		l.a.log.Warn("could not answer a refused interaction", "interaction", it.ID, "err", err)
	}
}

// notAllowed is what a sender the allow-list does not serve is told.
const notAllowed = "You are not on this bot's allow-list."

// press delivers a press of a button, then answers its interaction it
// with a deferred update (the message stays as it is until herald edits it),
// all within Discord's 3 s. The answer goes whether or not the press was
// queued, so Discord shows the person no error: a press not queued is
// logged, and the person may press again. Presses are not tried again,
// as messages are: a late one would answer an interaction Discord has
// given up on.
func (l *listener) press(ctx context.Context, it *discordgo.Interaction, ev event) {
	dctx, dcancel := context.WithTimeout(ctx, deliverPressWithin)
	err := l.inbox.Deliver(dctx, ev.in)
	dcancel()
	switch {
	case adapters.Refused(err):
		l.a.log.Error("the router refused a press; it is dropped", "conv", ev.in.Conv, "sender", ev.in.Sender, "err", err)
	case err != nil:
		l.a.log.Warn("could not queue a press; it is dropped, and may be pressed again", "conv", ev.in.Conv, "sender", ev.in.Sender, "err", err)
	}
	err = l.a.rest.InteractionRespond(it, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate},
		discordgo.WithContext(ctx))
	if err != nil {
		l.a.log.Warn("could not answer a press", "interaction", it.ID, "err", err)
	}
}

// deliver hands in, a message of channel (in guild, "" for a DM), to the
// inbox, retrying a failure with backoff until the inbox takes it:
// Discord never sends a gateway event again, so a store that is down for
// a while must not cost the message. The events after this one wait, in
// Discord's buffer and the connection; if the wait outlasts discordgo's
// heartbeat check the connection is opened again and resumed, which
// replays them. Before the first try the channel's cursor is made to
// cover the message (keepFrom), so once Run has ended (the process is
// stopping or lost the gateway) a message still not taken is left to the
// next owner's backfill, which reads it again. An application command
// (channel "") is not backfilled: once Run ended it is tried
// deliverAttempts more times, then dropped, logged. A message the router
// refuses for good (Invalid, TooLarge) is dropped at once. The dedupe key
// keeps a replay or a backfill from making a second turn.
func (l *listener) deliver(in sessions.Inbound, channel, guild string) {
	if l.a.had(channel, in.MessageID) {
		return
	}
	afterEnd := 0
	kept := false
	for attempt := 1; ; attempt++ {
		err := l.a.keepFrom(l.ctx, channel, guild, in.MessageID)
		if err == nil {
			kept = channel != "" && l.a.opts.Cursors != nil
			ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), deliverTimeout)
			err = l.inbox.Deliver(ctx, in)
			cancel()
		}
		if err == nil || adapters.Refused(err) {
			if err != nil {
				l.a.log.Error("the router refused a Discord message; it is dropped", "conv", in.Conv, "sender", in.Sender, "err", err)
			}
			l.a.received(l.ctx, channel, guild, in.MessageID)
			return
		}
		if l.ctx.Err() != nil {
			if kept {
				l.a.log.Warn("could not queue a Discord message before the gateway was given up; the next backfill reads it again", "conv", in.Conv, "err", err)
				return
			}
			if afterEnd++; afterEnd >= deliverAttempts {
				l.a.log.Error("could not queue a Discord message; it is dropped", "conv", in.Conv, "sender", in.Sender, "err", err)
				return
			}
		}
		wait := l.a.deliverRetry.Wait(attempt)
		l.a.log.Warn("could not queue a Discord message; retrying", "conv", in.Conv, "err", err, "attempt", attempt, "retry_in_ms", wait.Milliseconds())
		time.Sleep(wait) // on the read goroutine on purpose: later events wait their turn
	}
}

// threadParent tells whether a guild channel is a thread and which
// channel it belongs to: from the gateway's state (filled by the Guilds
// intent), else from GET /channels/{id}, remembered per channel.
func (l *listener) threadParent(channelID string) (string, bool) {
	if c, err := l.gw.State.Channel(channelID); err == nil {
		return c.ParentID, c.IsThread()
	}
	if parent, isThread, ok := l.a.threads.get(channelID); ok {
		return parent, isThread
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), 5*time.Second)
	defer cancel()
	c, err := l.a.rest.Channel(channelID, discordgo.WithContext(ctx))
	if err != nil {
		var re *discordgo.RESTError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 && re.Response.StatusCode != http.StatusTooManyRequests {
			// The bot may not read the channel: take it as a plain one, for good.
			l.a.threads.put(channelID, "", false)
		} else {
			l.a.log.Warn("could not tell whether a channel is a thread; taking it as a channel", "channel", channelID, "err", err)
		}
		return "", false
	}
	l.a.threads.put(channelID, c.ParentID, c.IsThread())
	return c.ParentID, c.IsThread()
}
