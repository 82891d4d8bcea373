package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
	"github.com/heraldgw/herald/signals"
)

// benchPlatform is the platform of the bench's conversations and of the
// adapter their replies go to.
const benchPlatform = "bench"

// pipeline is the part of a gateway a turn goes through, wired the way
// gateway.New wires it, on an opened store: the router an adapter
// delivers to, the turn worker with its claim loop, the signal tailer,
// the delivery worker and an adapter. Only the agent is replaced, by a
// model that answers after a fixed delay, so that what a turn takes
// beyond that delay is herald's own. gateway.New builds the agent from
// the config's model and has no way to take another runner, hence the
// wiring here.
type pipeline struct {
	router   *sessions.Router
	turns    *sessions.TurnWorker
	tailer   *signals.Tailer
	delivery *gateway.Delivery
	gauges   *gateway.StoreGauges
	model    *delayModel
	replies  *replies
	// lastCommit is when a turn last committed its reply: in a burst,
	// when the last one had, which tells the turn worker's share of the
	// time from the delivery worker's.
	lastCommit *latest
	cancel     context.CancelFunc
}

// pipelineConfig is what the wiring takes from the options.
type pipelineConfig struct {
	turns      int // workers.turns
	deliveries int // workers.deliveries
}

// startPipeline wires the parts on db and starts them. Its model answers
// at once until its delay is set.
func startPipeline(ctx context.Context, db gateway.Store, cfg pipelineConfig) (*pipeline, error) {
	name, err := workerName()
	if err != nil {
		return nil, err
	}
	// The gateway logs a line per finished turn at info level. Encoding
	// it is part of the turn's cost; writing it out is the terminal's.
	log := redact.NewLogger(io.Discard, slog.LevelInfo, nil)
	metrics := gateway.NewMetrics()
	store := db.Sessions()
	p := &pipeline{model: &delayModel{}, replies: &replies{}, lastCommit: &latest{}}

	routes := gateway.NewRoutes()
	routes.Up(&captureAdapter{arrived: p.replies.arrived})
	p.delivery, err = gateway.NewDelivery(gateway.DeliveryOptions{
		Outbox:  db.Outbox(),
		Routes:  routes,
		Name:    name,
		Senders: cfg.deliveries,
		Logger:  log.With("part", "delivery"),
		Metrics: metrics,
	})
	if err != nil {
		return nil, err
	}
	commands := sessions.DefaultCommands()
	// As in the gateway, the turns run through the session controllers,
	// which read the conversation's goal after each.
	runner, err := controllers.NewRunner(controllers.RunnerOptions{Agent: p.model, Store: db.Controllers(), Logger: log})
	if err != nil {
		return nil, err
	}
	p.turns, err = sessions.NewTurnWorker(sessions.TurnWorkerOptions{
		Store:    timedCommits{Store: gateway.DeliveringSessions(store, p.delivery), committed: p.lastCommit},
		Runner:   runner,
		Commands: commands,
		Name:     name,
		Turns:    cfg.turns,
		Logger:   log.With("part", "turns"),
		Metrics:  metrics.TurnHooks(),
	})
	if err != nil {
		return nil, err
	}
	metrics.RunningTurns(p.turns.Running, cfg.turns)
	p.tailer, err = signals.NewTailer(signals.TailerOptions{
		Store:   db.Signals(),
		Handler: p.turns,
		Logger:  log.With("part", "signals"),
	})
	if err != nil {
		return nil, err
	}
	p.router, err = sessions.NewRouter(sessions.RouterOptions{
		Store:    store,
		Outbox:   db.Outbox(),
		Signals:  db.Signals(),
		Commands: commands,
		Turns:    p.turns,
		Tailer:   p.tailer,
		Logger:   log.With("part", "router"),
		Metrics:  metrics.RouterHooks(),
	})
	if err != nil {
		return nil, err
	}
	p.gauges = gateway.NewStoreGauges(db.Outbox(), store, metrics, 0, 0, log)

	runCtx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	for _, start := range []func(context.Context) error{p.tailer.Start, p.turns.Start, p.delivery.Start, p.gauges.Start} {
		if err := start(runCtx); err != nil {
			cancel()
			return nil, err
		}
	}
	return p, nil
}

// shutdown stops the parts in the gateway's order: turns, then
// deliveries, then the readers.
func (p *pipeline) shutdown(ctx context.Context) error {
	defer p.cancel()
	err := errors.Join(p.turns.Shutdown(ctx), p.delivery.Shutdown(ctx))
	_ = p.tailer.Shutdown(ctx)
	_ = p.gauges.Shutdown(ctx)
	return err
}

// workerName names the bench's process in leases and claims.
func workerName() (string, error) {
	var tag [4]byte
	if _, err := rand.Read(tag[:]); err != nil {
		return "", err
	}
	return "bench-" + hex.EncodeToString(tag[:]), nil
}

// timedCommits notes when the last turn that queued replies committed.
// Under it, the gateway's own wrapper hands the replies to the delivery
// worker.
type timedCommits struct {
	sessions.Store
	committed *latest
}

func (s timedCommits) Finish(ctx context.Context, l sessions.Lease, f sessions.Finish) error {
	err := s.Store.Finish(ctx, l, f)
	s.committedNow(err, f)
	return err
}

func (s timedCommits) FinishAndClaim(ctx context.Context, l sessions.Lease, f sessions.Finish, worker string, ttl time.Duration) (*sessions.Turn, error) {
	turn, err := s.Store.FinishAndClaim(ctx, l, f, worker, ttl)
	s.committedNow(err, f)
	return turn, err
}

func (s timedCommits) committedNow(err error, f sessions.Finish) {
	if err == nil && len(f.Outbox) > 0 {
		s.committed.note(time.Now())
	}
}

// latest keeps the latest of the times it is told, from any goroutine.
type latest struct {
	nanos atomic.Int64 // Unix nanoseconds
}

func (l *latest) note(t time.Time) {
	n := t.UnixNano()
	for last := l.nanos.Load(); n > last && !l.nanos.CompareAndSwap(last, n); last = l.nanos.Load() {
	}
}

// since is how long after start the latest time was.
func (l *latest) since(start time.Time) time.Duration {
	return time.Unix(0, l.nanos.Load()).Sub(start)
}

// delayModel stands in for the agent and its model: every turn is
// answered after the delay, with the history and the reply an agent turn
// that makes one model call produces. It does no work of its own.
type delayModel struct {
	delay atomic.Int64 // a time.Duration; the warm-up runs with none
	// lastCall is when the model was last called: in a burst, when the
	// last of its turns had started.
	lastCall latest
}

func (m *delayModel) Run(ctx context.Context, in sessions.TurnInput) (sessions.TurnOutput, error) {
	m.lastCall.note(time.Now())
	if d := time.Duration(m.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return sessions.TurnOutput{End: sessions.TurnInterrupted}, context.Cause(ctx)
		}
	}
	const reply = "Noted: herald bench reply."
	return sessions.TurnOutput{
		History: []chat.Message{
			{Role: "user", Content: in.Entry.Text},
			{Role: "assistant", Content: reply},
		},
		Outbox:     []outbox.Message{{Target: in.Origin, Text: reply, ReplyTo: in.Entry.MessageID, Kind: agent.KindReply}},
		End:        sessions.TurnDone,
		ModelCalls: 1,
		// As a model's server reports them: the turn commits its usage
		// with it, as a real turn does.
		InputTokens: 120, OutputTokens: 8, Model: "bench",
	}, nil
}

// captureAdapter is the platform the replies go to: it accepts every
// message and reports when it arrived.
type captureAdapter struct {
	arrived func(replyTo string, at time.Time)
}

var _ adapters.Adapter = (*captureAdapter)(nil)

func (a *captureAdapter) Platform() string { return benchPlatform }

// Run receives nothing: the bench delivers to the router itself.
func (a *captureAdapter) Run(ctx context.Context, _ adapters.Inbox) error {
	<-ctx.Done()
	return nil
}

func (a *captureAdapter) Send(_ context.Context, m outbox.Message) adapters.SendResult {
	a.arrived(m.ReplyTo, time.Now())
	return adapters.SendResult{Outcome: adapters.Accepted, MessageID: m.ID}
}

// replies matches the replies the adapter receives to the messages
// waiting for them, by the id of the message each answers. Every message
// the bench sends has an id of its own.
type replies struct {
	waiting sync.Map // message id → chan time.Time
}

// expect returns the channel that gets the time the reply to id arrived.
func (r *replies) expect(id string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	r.waiting.Store(id, ch)
	return ch
}

// arrived reports the reply to id. A reply nobody waits for, a second
// send of one already counted, is ignored.
func (r *replies) arrived(id string, at time.Time) {
	if ch, ok := r.waiting.LoadAndDelete(id); ok {
		ch.(chan time.Time) <- at
	}
}
