package bench

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldgw/herald/sessions/agent"
)

// turnTimes is told when the gateway's steps happen, by the model as it
// is called and answers and by the lines the gateway logs, and keeps
// what the phase under way measures: in the dispatch phase, each turn's
// times; in the fan-out, the fanPhase's.
type turnTimes struct {
	users sync.Map // agent.ModelUser(conv) → conv: the conversations watched
	fan   atomic.Pointer[fanPhase]

	mu      sync.Mutex
	turns   map[string]*convTurn     // conv → its running turn's times
	waiting map[string]chan turnTime // conv → its next commit's times
}

// convTurn is what the model saw of a conversation's running turn.
type convTurn struct {
	first    time.Time     // its first model call
	toolAt   time.Time     // the model's answer with a tool call
	tool     time.Duration // from that answer to the model asked with the tool's result
	answered time.Time     // the model's latest answer
}

// turnTime is one turn's time, from its first model call to its commit
// returning, with two parts of it: its tool call and its end.
type turnTime struct {
	total, tool, commit time.Duration
}

func newTurnTimes() *turnTimes {
	return &turnTimes{turns: map[string]*convTurn{}, waiting: map[string]chan turnTime{}}
}

// logged are the gateway's log lines the record is told of.
func (t *turnTimes) logged() map[string]func(logged) {
	return map[string]func(logged){
		"turn finished":        func(l logged) { t.committed(l.str("conv"), l.at) },
		"sub-agent started":    func(l logged) { t.childStarted(l.str("subagent"), l.str("conv")) },
		"sub-agent ended":      func(l logged) { t.childEnded(l.str("subagent"), l.str("completion") == "true", l.at) },
		"completion delivered": func(l logged) { t.delivered(l.str("conv"), l.at) },
	}
}

// watch makes the model's calls of convs known by their conversation.
func (t *turnTimes) watch(convs ...string) {
	for _, c := range convs {
		t.users.Store(agent.ModelUser(c), c)
	}
}

// convOf is the conversation watched whose calls name user, "" for
// another.
func (t *turnTimes) convOf(user string) string {
	c, _ := t.users.Load(user)
	s, _ := c.(string)
	return s
}

// expectCommit watches conv and returns the channel that gets the times
// of its next turn.
func (t *turnTimes) expectCommit(conv string) <-chan turnTime {
	t.watch(conv)
	ch := make(chan turnTime, 1)
	t.mu.Lock()
	t.waiting[conv] = ch
	t.mu.Unlock()
	return ch
}

// turnCalled is told of the first model call of a turn of conv, which
// answers text.
func (t *turnTimes) turnCalled(conv, text string, at time.Time) {
	if conv == "" {
		return
	}
	t.mu.Lock()
	t.turns[conv] = &convTurn{first: at}
	t.mu.Unlock()
	if f := t.fan.Load(); f != nil && text != textDispatch {
		f.turnStarted(conv, at)
	}
}

// toolAnswered is told of the model asked with a tool's result in conv.
func (t *turnTimes) toolAnswered(conv string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.turns[conv]; c != nil && !c.toolAt.IsZero() {
		c.tool = at.Sub(c.toolAt)
	}
}

// answered is told of the model's answer in conv, a tool call or not.
func (t *turnTimes) answered(conv string, calledTool bool, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.turns[conv]
	if c == nil {
		return
	}
	if calledTool {
		c.toolAt = at
	}
	c.answered = at
}

// committed is told of conv's turn's commit, returned at.
func (t *turnTimes) committed(conv string, at time.Time) {
	t.mu.Lock()
	c, ch := t.turns[conv], t.waiting[conv]
	delete(t.turns, conv)
	delete(t.waiting, conv)
	t.mu.Unlock()
	if ch != nil && c != nil {
		ch <- turnTime{total: at.Sub(c.first), tool: c.tool, commit: at.Sub(c.answered)}
	}
	if f := t.fan.Load(); f != nil {
		f.turnFinished(conv, at)
	}
}

func (t *turnTimes) childCall(at time.Time) {
	if f := t.fan.Load(); f != nil {
		f.childCall(at)
	}
}

func (t *turnTimes) childStarted(child, conv string) {
	if f := t.fan.Load(); f != nil {
		f.childStarted(child, conv)
	}
}

func (t *turnTimes) childEnded(child string, completion bool, at time.Time) {
	if f := t.fan.Load(); f != nil {
		f.ended(child, completion, at)
	}
}

func (t *turnTimes) delivered(conv string, at time.Time) {
	if f := t.fan.Load(); f != nil {
		f.delivered(conv, at)
	}
}

// fanPhase is one fan-out's record: the parents are the conversations
// whose keys start with prefix, n of them, one dispatching turn and one
// completion each.
type fanPhase struct {
	prefix string
	n      int
	done   chan struct{} // closed when every completion's parent turn has ended

	mu                           sync.Mutex
	firstDispatch, lastDispatch  time.Time
	lastChildCall, lastEnd       time.Time
	lastDelivered, lastStarted   time.Time
	dispatches, childCalls, ends int
	delivers                     int
	parents                      map[string]string    // child → its parent's conversation
	turns                        map[string]int       // parent → its turns committed
	recorded                     map[string]time.Time // parent → when the end that made its completion was recorded
	started                      map[string]time.Time // parent → when its completion's turn began
	finished                     map[string]bool      // parent → its completion's turn ended
}

func newFanPhase(prefix string, n int) *fanPhase {
	return &fanPhase{
		prefix: prefix, n: n, done: make(chan struct{}),
		parents: map[string]string{}, turns: map[string]int{},
		recorded: map[string]time.Time{}, started: map[string]time.Time{}, finished: map[string]bool{},
	}
}

func (f *fanPhase) parent(conv string) bool { return strings.HasPrefix(conv, f.prefix) }

// turnFinished is told of a parent's commit: its first is the turn that
// dispatched, its second the completion's.
func (f *fanPhase) turnFinished(conv string, at time.Time) {
	if !f.parent(conv) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.turns[conv]++
	switch f.turns[conv] {
	case 1:
		if f.dispatches == 0 || at.Before(f.firstDispatch) {
			f.firstDispatch = at
		}
		f.lastDispatch = later(f.lastDispatch, at)
		f.dispatches++
	case 2:
		if _, ok := f.started[conv]; !ok || f.finished[conv] {
			return
		}
		f.finished[conv] = true
		if len(f.finished) == f.n {
			close(f.done)
		}
	}
}

func (f *fanPhase) childCall(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastChildCall = later(f.lastChildCall, at)
	f.childCalls++
}

func (f *fanPhase) childStarted(child, conv string) {
	if !f.parent(conv) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.parents[child] = conv
}

func (f *fanPhase) ended(child string, completion bool, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastEnd = later(f.lastEnd, at)
	f.ends++
	if conv, ok := f.parents[child]; ok && completion {
		f.recorded[conv] = at
	}
}

func (f *fanPhase) delivered(conv string, at time.Time) {
	if !f.parent(conv) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastDelivered = later(f.lastDelivered, at)
	f.delivers++
}

// turnStarted notes the first start of a completion's turn; a retried
// turn starts again, and counts once.
func (f *fanPhase) turnStarted(conv string, at time.Time) {
	if !f.parent(conv) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.started[conv]; !ok {
		f.started[conv] = at
		f.lastStarted = later(f.lastStarted, at)
	}
}

// progress says how far the phase got, for an error.
func (f *fanPhase) progress() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("of %d parents %d dispatched; children made %d model calls and %d ends; %d completions were delivered, %d of their turns started and %d ended",
		f.n, f.dispatches, f.childCalls, f.ends, f.delivers, len(f.started), len(f.finished))
}

func (f *fanPhase) result() fanResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := fanResult{
		firstDispatch: f.firstDispatch, lastDispatch: f.lastDispatch,
		lastChildCall: f.lastChildCall, lastEnd: f.lastEnd,
		lastDelivered: f.lastDelivered, lastTurnStarted: f.lastStarted,
	}
	for conv, at := range f.started {
		if rec, ok := f.recorded[conv]; ok {
			r.completionLatencies = append(r.completionLatencies, at.Sub(rec))
		}
	}
	return r
}
