package discord

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/heraldgw/herald/internal/clock"
)

// Discord's gateway sends an event once, to the connection of the
// session it belongs to, and replays missed ones only to a RESUME of that
// session. What came while no process held the gateway (between an
// owner's death and the takeover, or while a Run could not resume) comes
// to no one. So the adapter keeps, per channel, the id of the last
// message it received (adapters.Cursors, in the store), and a process
// that starts a new gateway session reads, in each channel with a cursor
// put within Config.BackfillWindow, the messages after it (GET
// /channels/{id}/messages?after=), handing those for herald to the inbox
// as if they had come over the gateway. The platform message id dedupes
// any it already had.

// backfillPage is how many messages one read asks for: Discord's most.
const backfillPage = 100

// cursorEvery spaces the puts of one channel's cursor: a cursor that lags
// only makes a backfill read again messages the dedupe keys drop.
const cursorEvery = time.Second

// cursor is where receiving got to in a channel: the channel's guild
// ("" for a DM) and the last message id, kept as "<guild>:<id>".
type cursor struct {
	guild, last string
}

func (c cursor) String() string { return c.guild + ":" + c.last }

func parseCursor(v string) (cursor, bool) {
	guild, last, ok := strings.Cut(v, ":")
	if !ok || !isSnowflake(last) || (guild != "" && !isSnowflake(guild)) {
		return cursor{}, false
	}
	return cursor{guild: guild, last: last}, true
}

// later reports whether snowflake a is after b.
func later(a, b string) bool {
	x, _ := strconv.ParseUint(a, 10, 64)
	y, _ := strconv.ParseUint(b, 10, 64)
	return x > y
}

// cursors is this process's view of the channels' cursors: the last
// message received per channel and when its cursor was put.
type cursors struct {
	mu   sync.Mutex
	last map[string]cursor
	put  map[string]time.Time
	// behind are the channels whose stored cursor is keepFrom's, just
	// before a message not yet delivered: the next received puts at once.
	behind map[string]bool
}

func newCursors() *cursors {
	return &cursors{last: map[string]cursor{}, put: map[string]time.Time{}, behind: map[string]bool{}}
}

// had reports whether message id of channel was received already by
// this process: a backfill that read past the end of what came while
// away took it before its gateway event came.
func (a *Adapter) had(channel, id string) bool {
	if channel == "" {
		return false
	}
	c := a.cursors
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.last[channel]
	return ok && !c.behind[channel] && !later(id, last.last)
}

// keepFrom makes sure the store has a cursor for channel that a backfill
// would read message id from, before the message is delivered: when this
// process has put none for the channel yet, it puts one just before id.
// So a message whose delivery never went through (the process lost the
// gateway or died first) is read again by the next backfill, even in a
// channel herald never received in before. channel "" (an application
// command, which no backfill reads) needs none.
func (a *Adapter) keepFrom(ctx context.Context, channel, guild, id string) error {
	if a.opts.Cursors == nil || channel == "" {
		return nil
	}
	c := a.cursors
	c.mu.Lock()
	_, put := c.put[channel]
	c.mu.Unlock()
	if put {
		return nil
	}
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 {
		return nil
	}
	before := cursor{guild: guild, last: strconv.FormatUint(n-1, 10)}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := a.opts.Cursors.PutCursor(pctx, Platform, channel, before.String()); err != nil {
		return err
	}
	c.mu.Lock()
	c.put[channel] = a.clock.Now()
	c.behind[channel] = true
	if had, ok := c.last[channel]; !ok || later(before.last, had.last) {
		c.last[channel] = before
	}
	c.mu.Unlock()
	return nil
}

// received notes message id of channel as received (delivered, or
// refused for good), and puts the channel's cursor in the store unless
// it was put within cursorEvery. A put that fails is logged; the next
// message puts it again.
func (a *Adapter) received(ctx context.Context, channel, guild, id string) {
	if a.opts.Cursors == nil || channel == "" {
		return
	}
	c := a.cursors
	now := a.clock.Now()
	c.mu.Lock()
	if had, ok := c.last[channel]; ok && !later(id, had.last) {
		c.mu.Unlock()
		return
	}
	cur := cursor{guild: guild, last: id}
	c.last[channel] = cur
	due := c.behind[channel] || now.Sub(c.put[channel]) >= cursorEvery
	if due {
		c.put[channel] = now
		delete(c.behind, channel)
	}
	c.mu.Unlock()
	if !due {
		return
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := a.opts.Cursors.PutCursor(pctx, Platform, channel, cur.String()); err != nil {
		a.log.Warn("could not keep where receiving got to in a channel; a takeover reads it from further back", "channel", channel, "err", err)
		c.mu.Lock()
		delete(c.put, channel)
		c.mu.Unlock()
	}
}

// backfill reads, in each channel with a cursor put within the window,
// the messages after the cursor and handles each as a MESSAGE_CREATE, in
// the order they were sent. It runs on the gateway's read goroutine, at
// READY, so the events of the new session wait behind it and a channel's
// messages reach the inbox in order. A channel the bot may no longer
// read is skipped; another failure is retried with backoff while Run
// runs.
func (l *listener) backfill() {
	a := l.a
	if a.opts.Cursors == nil {
		return
	}
	var cs map[string]string
	for fails := 1; ; fails++ {
		ctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
		var err error
		cs, err = a.opts.Cursors.Cursors(ctx, Platform, a.opts.Config.BackfillWindow)
		cancel()
		if err == nil {
			break
		}
		wait := a.retry.Wait(fails)
		a.log.Warn("could not read where receiving got to; retrying the backfill", "err", err, "retry_in_ms", wait.Milliseconds())
		if !clock.Sleep(l.ctx, wait) {
			return
		}
	}
	channels := make([]string, 0, len(cs))
	for ch := range cs {
		channels = append(channels, ch)
	}
	slices.Sort(channels)
	read := 0
	for _, ch := range channels {
		cur, ok := parseCursor(cs[ch])
		if !ok || !isSnowflake(ch) {
			a.log.Warn("a channel's cursor is not one herald writes; not reading it", "channel", ch, "cursor", cs[ch])
			continue
		}
		n, ok := l.backfillChannel(ch, cur)
		read += n
		if !ok {
			return
		}
	}
	a.log.Info("read the messages that came while no process held the gateway", "channels", len(channels), "messages", read)
}

// backfillChannel reads channel's messages after cur, page by page, and
// handles them; it returns how many it read, and false when Run ended.
func (l *listener) backfillChannel(channel string, cur cursor) (int, bool) {
	a := l.a
	after, read := cur.last, 0
	for fails := 0; ; {
		ctx, cancel := context.WithTimeout(l.ctx, 30*time.Second)
		page, err := a.rest.ChannelMessages(channel, backfillPage, "", after, "", discordgo.WithContext(ctx))
		cancel()
		if l.ctx.Err() != nil {
			return read, false
		}
		if err != nil {
			var re *discordgo.RESTError
			if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 &&
				re.Response.StatusCode != http.StatusTooManyRequests {
				a.log.Warn("cannot read a channel's messages; not backfilling it", "channel", channel, "err", err)
				return read, true
			}
			fails++
			wait := a.retry.Wait(fails)
			a.log.Warn("could not read a channel's messages; retrying", "channel", channel, "err", err, "retry_in_ms", wait.Milliseconds())
			if !clock.Sleep(l.ctx, wait) {
				return read, false
			}
			continue
		}
		fails = 0
		// Discord answers newest first; they are handled oldest first.
		slices.SortFunc(page, func(x, y *discordgo.Message) int {
			switch {
			case later(x.ID, y.ID):
				return 1
			case later(y.ID, x.ID):
				return -1
			}
			return 0
		})
		for _, m := range page {
			if m == nil || !later(m.ID, after) {
				continue
			}
			after = m.ID
			read++
			// A REST message carries no guild id; the cursor has it.
			m.GuildID = cur.guild
			raw, err := json.Marshal(m)
			if err != nil {
				continue
			}
			l.message(raw)
		}
		if len(page) < backfillPage {
			return read, true
		}
	}
}
