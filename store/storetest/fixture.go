package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/notes"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
)

// t0 is where every fake clock starts. It has no part below a millisecond,
// so a backend that keeps milliseconds gives times back exactly.
var t0 = time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC)

const (
	// ttl is the lease and claim TTL of the cases that do not look at it.
	ttl = sessions.DefaultLeaseTTL
	// tick is how far the fake clock moves between two steps whose order a
	// case checks, so that a backend ordering by its clock sees them apart.
	tick = time.Millisecond
	// caseTimeout bounds one case, so that a hang fails instead of stalling
	// the whole run.
	caseTimeout = 2 * time.Minute
)

// timeOpts compares times to the millisecond: backends may keep no more.
var timeOpts = cmp.Options{cmpopts.EquateEmpty(), cmpopts.EquateApproxTime(time.Millisecond)}

// fixture is one case's place, fake clock and open store.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	place Place
	clk   *clock.Fake
	lim   sessions.Limits

	st      Store
	closeSt func() error
	ss      sessions.Store
	sg      signals.Store
	tl      sessions.Timeline
	nt      notes.Store
	ob      outbox.Store
}

// newFixture opens a store with a fake clock on a fresh place of b.
func newFixture(t *testing.T, b Backend, lim sessions.Limits) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	t.Cleanup(cancel)
	f := &fixture{t: t, ctx: ctx, place: b.New(t), clk: clock.NewFake(t0), lim: lim}
	f.open()
	return f
}

func (f *fixture) open() {
	f.st, f.closeSt = openStore(f.t, f.place, f.clk, f.lim)
	f.ss, f.sg, f.tl, f.nt, f.ob = f.st.Sessions(), f.st.Signals(), f.st.Timeline(), f.st.Notes(), f.st.Outbox()
}

// openStore opens a store on p and returns a close function that closes it
// once, whether the case calls it or the test's cleanup does.
func openStore(t *testing.T, p Place, clk clock.Clock, lim sessions.Limits) (Store, func() error) {
	t.Helper()
	st := p.Open(t, clk, lim)
	var once sync.Once
	var err error
	closeSt := func() error {
		once.Do(func() { err = st.Close() })
		return err
	}
	t.Cleanup(func() { _ = closeSt() })
	return st, closeSt
}

// reopen closes the store and opens a new one on the same place, with the
// server behind it restarted in between when restart is set.
func (f *fixture) reopen(restart bool) {
	f.t.Helper()
	if err := f.closeSt(); err != nil {
		f.t.Fatalf("Close: %v", err)
	}
	if restart {
		f.place.Restart(f.t)
	}
	f.open()
}

// eachReopening runs f as a subtest for each way a store comes back:
// closed and opened again, and with the server behind it restarted in
// between (restart; see reopen).
func eachReopening(t *testing.T, f func(t *testing.T, restart bool)) {
	t.Run("close and reopen", func(t *testing.T) { f(t, false) })
	t.Run("restart the server", func(t *testing.T) { f(t, true) })
}

// wantCode reports an error unless err carries code.
func wantCode(t *testing.T, what string, err error, code errs.Code) {
	t.Helper()
	if !errs.Is(err, code) {
		t.Errorf("%s: err = %v (code %q), want code %q", what, err, errs.CodeOf(err), code)
	}
}

// user and synthetic build inbound entries; the text names the entry in
// the cases' expectations.
func user(conv, text string) sessions.Inbound {
	return sessions.Inbound{Conv: conv, Sender: "u-1", Text: text, Kind: sessions.KindUser}
}

func synthetic(conv, text string) sessions.Inbound {
	return sessions.Inbound{Conv: conv, Text: text, Kind: sessions.KindSynthetic}
}

func withMessageID(in sessions.Inbound, id string) sessions.Inbound {
	in.MessageID = id
	return in
}

func withPriority(in sessions.Inbound, p sessions.Priority) sessions.Inbound {
	in.Priority = p
	return in
}

// reply builds an outbound message to a Telegram chat.
func reply(conv, text string) outbox.Message {
	return outbox.Message{
		Target: outbox.Target{Platform: "telegram", Chat: "100"},
		Conv:   conv,
		Text:   text,
		Kind:   "reply",
	}
}

// toChat sends m to another chat of its platform: another target, whose
// messages leave in an order of their own.
func toChat(id string, m outbox.Message) outbox.Message {
	m.Target.Chat = id
	return m
}

func to(platform string, m outbox.Message) outbox.Message {
	m.Target.Platform = platform
	return m
}

func (f *fixture) append(in sessions.Inbound) sessions.AppendResult {
	f.t.Helper()
	r, err := f.ss.Append(f.ctx, in)
	if err != nil {
		f.t.Fatalf("Append(%q, %q): %v", in.Conv, in.Text, err)
	}
	return r
}

// appendAll appends ins in order, the clock moving a tick after each.
func (f *fixture) appendAll(ins ...sessions.Inbound) []string {
	f.t.Helper()
	ids := make([]string, len(ins))
	for i, in := range ins {
		ids[i] = f.append(in).EntryID
		f.clk.Advance(tick)
	}
	return ids
}

func (f *fixture) claim(worker string) *sessions.Turn {
	f.t.Helper()
	turn, err := f.ss.Claim(f.ctx, worker, ttl)
	if err != nil {
		f.t.Fatalf("Claim(%s): %v", worker, err)
	}
	return turn
}

// claimMany claims up to n turns for worker.
func (f *fixture) claimMany(worker string, n int) []*sessions.Turn {
	f.t.Helper()
	turns, err := f.ss.ClaimMany(f.ctx, worker, n, ttl)
	if err != nil {
		f.t.Fatalf("ClaimMany(%s, %d): %v", worker, n, err)
	}
	return turns
}

// convTexts names each turn as conversation/entry text.
func convTexts(turns []*sessions.Turn) []string {
	out := make([]string, len(turns))
	for i, turn := range turns {
		out[i] = turn.Lease.Conv + "/" + turn.Entry.Text
	}
	return out
}

// mustClaim claims and fails the case when nothing is ready.
func (f *fixture) mustClaim(worker string) *sessions.Turn {
	f.t.Helper()
	turn := f.claim(worker)
	if turn == nil {
		f.t.Fatalf("Claim(%s) = nil, want a turn", worker)
	}
	return turn
}

// noClaim checks that nothing is ready for worker.
func (f *fixture) noClaim(worker string) {
	f.t.Helper()
	if turn := f.claim(worker); turn != nil {
		f.t.Errorf("Claim(%s) = conversation %q entry %q (lease token %d), want nil", worker, turn.Lease.Conv, turn.Entry.Text, turn.Lease.Token)
	}
}

func (f *fixture) next(l sessions.Lease) *sessions.Entry {
	f.t.Helper()
	e, err := f.ss.Next(f.ctx, l)
	if err != nil {
		f.t.Fatalf("Next(%s): %v", l.Conv, err)
	}
	return e
}

func (f *fixture) finish(l sessions.Lease, fin sessions.Finish) {
	f.t.Helper()
	if err := f.ss.Finish(f.ctx, l, fin); err != nil {
		f.t.Fatalf("Finish(%s, %s): %v", l.Conv, fin.EntryID, err)
	}
}

func (f *fixture) release(l sessions.Lease) {
	f.t.Helper()
	if err := f.ss.Release(f.ctx, l); err != nil {
		f.t.Fatalf("Release(%s): %v", l.Conv, err)
	}
}

// drain claims conv and runs its queue to the end under one lease, acking
// each entry, and returns the texts in the order they were handed out.
func (f *fixture) drain(worker, conv string) []string {
	f.t.Helper()
	turn := f.mustClaim(worker)
	if turn.Lease.Conv != conv {
		f.t.Fatalf("Claim(%s) took conversation %q, want %q", worker, turn.Lease.Conv, conv)
	}
	return f.runOut(turn)
}

// runOut runs turn's conversation's queue to the end under the turn's
// lease, as drain does once it claimed.
func (f *fixture) runOut(turn *sessions.Turn) []string {
	f.t.Helper()
	conv := turn.Lease.Conv
	var got []string
	for e := &turn.Entry; e != nil; e = f.next(turn.Lease) {
		got = append(got, e.Text)
		if len(got) > 1000 {
			f.t.Fatalf("drain(%s): more than 1000 entries; is an acked entry handed out again?", conv)
		}
		f.finish(turn.Lease, sessions.Finish{EntryID: e.ID})
	}
	f.release(turn.Lease)
	return got
}

func (f *fixture) history(conv string) []chat.Message {
	f.t.Helper()
	h, err := f.ss.History(f.ctx, conv)
	if err != nil {
		f.t.Fatalf("History(%s): %v", conv, err)
	}
	return h
}

// meta is conv's written metadata: Meta without the running turn, which
// the lease tells (runTurnMark checks it).
func (f *fixture) meta(conv string) map[string]string {
	f.t.Helper()
	m, err := f.ss.Meta(f.ctx, conv)
	if err != nil {
		f.t.Fatalf("Meta(%s): %v", conv, err)
	}
	delete(m, sessions.ConvMetaTurn)
	return m
}

func (f *fixture) enqueue(m outbox.Message) string {
	f.t.Helper()
	id, dup, err := f.ob.Enqueue(f.ctx, m)
	if err != nil {
		f.t.Fatalf("Enqueue(%q): %v", m.Text, err)
	}
	if dup {
		f.t.Fatalf("Enqueue(%q): dup = true, want a new message", m.Text)
	}
	if id == "" {
		f.t.Fatalf("Enqueue(%q): empty id", m.Text)
	}
	return id
}

// enqueueAll enqueues ms in order, the clock moving a tick after each, and
// returns them with their ids and creation times filled in.
func (f *fixture) enqueueAll(ms ...outbox.Message) []outbox.Message {
	f.t.Helper()
	out := make([]outbox.Message, len(ms))
	for i, m := range ms {
		m.CreatedAt = f.clk.Now()
		m.ID = f.enqueue(m)
		out[i] = m
		f.clk.Advance(tick)
	}
	return out
}

func (f *fixture) claimOutbox(worker string, platforms []string, max int) []outbox.Claimed {
	f.t.Helper()
	cs, err := f.ob.Claim(f.ctx, worker, platforms, max, ttl)
	if err != nil {
		f.t.Fatalf("outbox Claim(%s, %v): %v", worker, platforms, err)
	}
	return cs
}

func (f *fixture) pending() []outbox.Message {
	f.t.Helper()
	ms, err := f.ob.Pending(f.ctx, 1000)
	if err != nil {
		f.t.Fatalf("Pending: %v", err)
	}
	return ms
}

func (f *fixture) deadLetters() []outbox.Message {
	f.t.Helper()
	ms, err := f.ob.DeadLetters(f.ctx, 1000)
	if err != nil {
		f.t.Fatalf("DeadLetters: %v", err)
	}
	return ms
}

// outTexts lists the texts of outbox messages, to compare orders.
func outTexts(ms []outbox.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Text
	}
	return out
}

func claimedTexts(cs []outbox.Claimed) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Text
	}
	return out
}

func claimedMessages(cs []outbox.Claimed) []outbox.Message {
	out := make([]outbox.Message, len(cs))
	for i, c := range cs {
		out[i] = c.Message
	}
	return out
}

// outboxOpts compares outbox messages on what every listing must give back;
// the store's own timestamps are checked by the cases that set them.
var outboxOpts = cmp.Options{
	cmpopts.EquateEmpty(),
	cmpopts.IgnoreFields(outbox.Message{}, "CreatedAt", "NextAttempt"),
}

// wantMessages compares outbox listings, ignoring the store's timestamps.
func wantMessages(t *testing.T, what string, got, want []outbox.Message) {
	t.Helper()
	if d := cmp.Diff(want, got, outboxOpts); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

// big is a text of n bytes.
func big(n int) string { return strings.Repeat("x", n) }

func convName(prefix string, i int) string { return fmt.Sprintf("%s-%03d", prefix, i) }
