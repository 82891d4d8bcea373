package sessions

import (
	"context"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
)

// Command is a chat command: a message whose text starts with "/name".
//
// An out-of-band command is answered by its Handle, in the router, as
// soon as the message arrives: it never waits behind a running turn. A
// command that is not out-of-band is queued like a message (the
// conversation's busy-input mode applies) as a control entry, and the
// turn worker calls its Run, under the conversation's lease, when the
// entry's turn comes. An out-of-band command may queue a control entry
// of its own too (CommandCall.Queue): /new stops the running turn at once
// and clears the history at the next turn boundary, so nothing the
// stopped turn commits survives the fresh start.
type Command struct {
	Name    string   // lower case, without the slash
	Aliases []string // other names, lower case, without the slash
	Args    string   // how the arguments read in /help, e.g. "MESSAGE"; empty for none
	Summary string   // one line for /help
	// OutOfBand: Handle answers at once, even while a turn runs.
	// Otherwise the message is queued and Run answers it at its turn.
	OutOfBand bool
	// Handle answers an out-of-band command in the router; nil for a
	// command that is not out-of-band. A platform may deliver a message
	// again: Reply and Queue do nothing for a redelivery, and a Handle
	// that does more (sends a signal) does it after them, only when
	// c.Redelivered() is false.
	Handle func(ctx context.Context, c *CommandCall) error
	// Run runs a control entry of this command at a turn boundary.
	Run func(ctx context.Context, t *ControlTurn) error
}

// Commands is a registry of chat commands, by name and alias. It is safe
// for concurrent use; the router and the turn worker share one.
type Commands struct {
	mu     sync.RWMutex
	byName map[string]*Command // names and aliases
	order  []string            // names in registration order, for /help
	status []StatusFunc
	stops  []StopFunc
}

// StatusFunc is another part's line in /status for a conversation (its
// background work, say); "" adds none. It must answer quickly: /status
// is answered at once, even while a turn runs.
type StatusFunc func(ctx context.Context, conv string) string

// MetaStatus is the StatusFunc of a line that line draws from the
// conversation's metadata, read with meta; none when it cannot be read.
func MetaStatus(meta func(ctx context.Context, conv string) (map[string]string, error), line func(meta map[string]string) string) StatusFunc {
	return func(ctx context.Context, conv string) string {
		m, err := meta(ctx, conv)
		if err != nil {
			return ""
		}
		return line(m)
	}
}

// AddStatus adds f's line to every /status answer, after the turn's.
func (c *Commands) AddStatus(f StatusFunc) {
	c.mu.Lock()
	c.status = append(c.status, f)
	c.mu.Unlock()
}

// StopFunc is what else than the running turn a /stop of a
// conversation stops, said by the part that runs it ("2 background
// sub-agents (sub_1, sub_2)"); "" for nothing. It must answer quickly:
// /stop is answered at once.
type StopFunc func(ctx context.Context, conv string) string

// AddStop adds f's part to every /stop answer, after the turn's.
func (c *Commands) AddStop(f StopFunc) {
	c.mu.Lock()
	c.stops = append(c.stops, f)
	c.mu.Unlock()
}

// stopParts are the parts the added StopFuncs give for conv.
func (c *Commands) stopParts(ctx context.Context, conv string) []string {
	c.mu.RLock()
	fs := slices.Clone(c.stops)
	c.mu.RUnlock()
	return said(ctx, conv, fs)
}

// statusLines are the lines the added StatusFuncs give for conv.
func (c *Commands) statusLines(ctx context.Context, conv string) []string {
	c.mu.RLock()
	fs := slices.Clone(c.status)
	c.mu.RUnlock()
	return said(ctx, conv, fs)
}

// said is what fs say of conv, leaving out those that say nothing.
func said[F ~func(context.Context, string) string](ctx context.Context, conv string, fs []F) []string {
	var out []string
	for _, f := range fs {
		if text := f(ctx, conv); text != "" {
			out = append(out, text)
		}
	}
	return out
}

// NewCommands returns an empty registry.
func NewCommands() *Commands {
	return &Commands{byName: map[string]*Command{}}
}

// Register adds cmd, replacing a command registered under the same name
// (a later issue's command replaces its placeholder).
// Errors: Invalid (a bad name, no handler), Conflict (a name or alias
// that belongs to another command).
func (c *Commands) Register(cmd Command) error {
	const op = "sessions.Commands.Register"
	names := append([]string{cmd.Name}, cmd.Aliases...)
	for _, n := range names {
		if !validCommandName(n) {
			return errs.E(op, errs.Invalid, "command name %q must be lower-case letters, digits, '_' or '-' (not first)", n)
		}
	}
	if cmd.OutOfBand && cmd.Handle == nil {
		return errs.E(op, errs.Invalid, "out-of-band command /%s has no Handle", cmd.Name)
	}
	if !cmd.OutOfBand && (cmd.Run == nil || cmd.Handle != nil) {
		return errs.E(op, errs.Invalid, "queued command /%s needs a Run and no Handle", cmd.Name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.byName[cmd.Name]
	if old != nil && old.Name != cmd.Name {
		return errs.E(op, errs.Conflict, "/%s is already an alias of /%s", cmd.Name, old.Name)
	}
	for _, a := range cmd.Aliases {
		if other := c.byName[a]; other != nil && other.Name != cmd.Name {
			return errs.E(op, errs.Conflict, "alias /%s already names /%s", a, other.Name)
		}
	}
	if old != nil {
		for _, a := range old.Aliases {
			delete(c.byName, a)
		}
	} else {
		c.order = append(c.order, cmd.Name)
	}
	cmd.Aliases = slices.Clone(cmd.Aliases)
	stored := &cmd
	for _, n := range names {
		c.byName[n] = stored
	}
	return nil
}

// Lookup finds a command by name or alias.
func (c *Commands) Lookup(name string) (Command, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cmd, ok := c.byName[name]
	if !ok {
		return Command{}, false
	}
	return *cmd, true
}

// List returns the commands in registration order.
func (c *Commands) List() []Command {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Command, 0, len(c.order))
	for _, n := range c.order {
		out = append(out, *c.byName[n])
	}
	return out
}

// validCommandName reports a name of lower-case letters, digits, '_'
// and '-', not starting with '-', of at most 32 bytes (/reload-mcp).
func validCommandName(n string) bool {
	if n == "" || len(n) > 32 || n[0] == '-' {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// ParseCommand reads "/name args" at the start of text. The name is
// matched case-insensitively, and a bot mention after it ("/stop@herald_bot",
// as Telegram sends in groups) is dropped. ok is false when text does
// not start with a slash and a name.
func ParseCommand(text string) (name, args string, ok bool) {
	s := strings.TrimLeftFunc(text, unicode.IsSpace)
	if !strings.HasPrefix(s, "/") {
		return "", "", false
	}
	s = s[1:]
	end := strings.IndexFunc(s, unicode.IsSpace)
	if end < 0 {
		end = len(s)
	}
	word, rest := s[:end], s[end:]
	if at := strings.IndexByte(word, '@'); at >= 0 {
		word = word[:at]
	}
	word = strings.ToLower(word)
	if !validCommandName(word) {
		return "", "", false
	}
	return word, strings.TrimSpace(rest), true
}

// CommandCall is one command message as its Handle sees it.
type CommandCall struct {
	Router *Router
	In     Inbound       // the message as the adapter delivered it
	Name   string        // the command's registered name (an alias is resolved)
	Args   string        // the text after the command, trimmed
	Target outbox.Target // where answers go

	redelivered bool // what the call queued or answered was a redelivery's
}

// Redelivered reports whether a Reply, Queue or routed message of this
// call found the message seen before: it was handled the first time.
func (c *CommandCall) Redelivered() bool { return c.redelivered }

// seen records what a call into the router reported and passes its error
// on.
func (c *CommandCall) seen(dup bool, err error) error {
	c.redelivered = c.redelivered || dup
	return err
}

// Reply answers the command at once through the outbox, as a message of
// kind KindCommand replying to the command's message. A redelivered
// message is not answered again.
func (c *CommandCall) Reply(ctx context.Context, text string) error {
	return c.seen(c.Router.notify(ctx, c.In, c.Target, text))
}

// Queue queues the command's message as a control entry with priority
// prio, for the command's Run at its turn. It touches no running turn.
// A redelivered message queues nothing.
func (c *CommandCall) Queue(ctx context.Context, prio Priority) error {
	return c.seen(c.Router.appendControl(ctx, c.In, c.Name, prio))
}

// route routes in as the router does a message, in mode, for a command
// that runs a message of its own (/queue, /steer).
func (c *CommandCall) route(ctx context.Context, in Inbound, mode BusyInputMode) error {
	return c.seen(c.Router.route(ctx, &in, mode))
}

// ControlTurn is a control entry's turn: what a Command's Run sees. The
// worker holds the conversation's lease while Run runs and commits the
// replies with the entry's ack.
type ControlTurn struct {
	Store  Store
	Lease  Lease
	Entry  Entry
	Name   string        // the command's name
	Args   string        // the text after the command
	Target outbox.Target // where replies go

	replies []string
	meta    map[string]string
	clear   bool
}

// ClearHistory empties the conversation's history with the entry's ack,
// in the same fenced step (Finish.DropHistory): a turn that lost its
// lease clears nothing.
func (t *ControlTurn) ClearHistory() { t.clear = true }

// Reply adds a notice sent when the control entry is acked.
func (t *ControlTurn) Reply(text string) { t.replies = append(t.replies, text) }

// SetMeta writes a metadata key of the conversation with the entry's ack,
// in the same fenced step (Finish.Meta); an empty value deletes it.
func (t *ControlTurn) SetMeta(key, value string) {
	if t.meta == nil {
		t.meta = map[string]string{}
	}
	t.meta[key] = value
}
