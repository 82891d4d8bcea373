package delivery

import (
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// maxOldNames bounds the names a worker keeps alive besides its own: past
// it the oldest is let go, its heartbeat left to run out.
const maxOldNames = 16

// names is the name the worker claims under now, and the names it
// claimed under before.
//
// The store gives a worker the messages behind those it holds (a claim
// takes them, a commit hands them over), trusting that the worker sends
// what it holds in order. A call that may have taken messages for the
// worker and whose answer never came (the connection dropped, a Redis
// primary died before replying) breaks that trust: the store shows them
// held by the worker, which does not know them, and would give out the
// messages behind them, to be sent first. So after such a call the worker
// claims under a new name: to the store the messages it may hold are then
// another worker's, and those behind them wait until that claim runs
// out. The old name keeps its heartbeat until every claim made under it
// has run out, so that the messages the worker knows it holds under it
// are not taken from it meanwhile.
type names struct {
	base     string
	claimTTL time.Duration
	clock    clock.Clock
	log      *slog.Logger

	mu      sync.Mutex
	n       int
	current string
	old     []oldName // oldest first
}

// oldName is a name claimed under before, kept alive until until.
type oldName struct {
	name  string
	until time.Time
}

func newNames(base string, claimTTL time.Duration, clk clock.Clock, log *slog.Logger) *names {
	return &names{base: base, claimTTL: claimTTL, clock: clk, log: log, current: base}
}

// now is the name to claim and take handoffs under.
func (ns *names) now() string {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.current
}

// alive is the names whose heartbeat is kept at now: the current one and
// the old ones some claim may still be held under.
func (ns *names) alive(now time.Time) []string {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	kept := ns.old[:0]
	for _, o := range ns.old {
		if now.Before(o.until) {
			kept = append(kept, o)
		}
	}
	ns.old = kept
	out := make([]string, 0, len(ns.old)+1)
	for _, o := range ns.old {
		out = append(out, o.name)
	}
	return append(out, ns.current)
}

// after takes the outcome of a call made under name (a claim, or a
// commit handing messages over): when it failed and may have been
// carried out all the same, the worker moves to a new name, unless it
// moved since.
func (ns *names) after(name, call string, err error) {
	if !uncertain(err) {
		return
	}
	ns.mu.Lock()
	if name != ns.current {
		ns.mu.Unlock()
		return
	}
	ns.old = append(ns.old, oldName{name: name, until: ns.clock.Now().Add(ns.claimTTL + claimMargin)})
	if len(ns.old) > maxOldNames {
		ns.old = ns.old[1:]
	}
	ns.n++
	ns.current = ns.base + "." + strconv.Itoa(ns.n)
	current := ns.current
	ns.mu.Unlock()
	ns.log.Warn("a store call that may have given this worker messages failed; it claims under a new name, and the messages behind those it may hold wait until that claim runs out",
		"call", call, "old_name", name, "name", current, "err", err)
}

// uncertain reports whether a store call that failed with err may have
// been carried out all the same: only errors that say the store refused
// it are certain.
func uncertain(err error) bool {
	switch {
	case err == nil:
		return false
	case errs.Is(err, errs.Invalid), errs.Is(err, errs.NotFound), errs.Is(err, errs.LeaseLost),
		errs.Is(err, errs.Conflict), errs.Is(err, errs.TooLarge), errs.Is(err, errs.Closed):
		return false
	}
	return true
}
