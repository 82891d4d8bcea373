package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/outbox"
)

// benchPlatform is the platform of the bench's conversations and of the
// adapter their replies go to.
const benchPlatform = "bench"

// benchModel is the model the gateway's config names: the one the
// conversations' turns ask for.
const benchModel = "bench"

// heraldGateway is herald's gateway on a run's store, built by
// gateway.New as `herald gateway` builds it, with only its model a
// double (gateway.Options.Model). The bench sees it from outside, as a
// deployment does: through the adapter its replies reach, the model it
// asks and the lines it logs.
type heraldGateway struct {
	*gateway.Gateway
	home string // the config's home, removed at stop
}

// gatewaySetup is what a bench gives its gateway.
type gatewaySetup struct {
	model    llm.Client
	adapters []adapters.Adapter
	logger   *slog.Logger
	tempDir  string // where the gateway's home is made; the system's when empty
	// configure changes the config after the bench's defaults: the
	// store b names, a home of its own, a loopback port, the model
	// benchModel.
	configure func(*config.Config)
}

// startGateway builds the gateway on b's store and starts it.
func startGateway(ctx context.Context, b backend, s gatewaySetup) (*heraldGateway, error) {
	home, err := os.MkdirTemp(s.tempDir, "herald-bench-home-")
	if err != nil {
		return nil, err
	}
	cfg := config.Default()
	cfg.Home = home
	b.gatewayStore(&cfg.Store)
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Model.Name = benchModel
	if s.configure != nil {
		s.configure(&cfg)
	}
	name, err := workerName()
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(home))
	}
	g, err := gateway.New(cfg, gateway.Options{Logger: s.logger, Adapters: s.adapters, Model: s.model, Name: name})
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(home))
	}
	h := &heraldGateway{Gateway: g, home: home}
	if err := g.Start(ctx); err != nil {
		return nil, errors.Join(err, h.stop(context.WithoutCancel(ctx)))
	}
	return h, nil
}

// stop shuts the gateway down gracefully, within a bound, and removes
// its home.
func (h *heraldGateway) stop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return errors.Join(h.Shutdown(ctx), os.RemoveAll(h.home))
}

// workerName names the bench's process in leases and claims.
func workerName() (string, error) {
	var tag [4]byte
	if _, err := rand.Read(tag[:]); err != nil {
		return "", err
	}
	return "bench-" + hex.EncodeToString(tag[:]), nil
}

// logWatch is the gateway's logger as a bench reads it: every record is
// encoded as a JSON line to nothing, at info, as the gateway's own
// logger encodes it (the encoding is part of a turn's cost, the writing
// the terminal's), and the records of the messages in on are told to
// their function as they are logged.
type logWatch struct {
	slog.Handler
	on    map[string]func(logged)
	attrs []slog.Attr // those of With, for the records of on
}

// logged is a record a bench watches for: when it was logged, and its
// attributes, With's included.
type logged struct {
	at    time.Time
	attrs []slog.Attr
}

// str is the value of the attribute key as a string, "" when it has
// none.
func (l logged) str(key string) string {
	for _, a := range slices.Backward(l.attrs) {
		if a.Key == key {
			return a.Value.String()
		}
	}
	return ""
}

// watchLog is a logger whose records of the messages in on are told to
// their function.
func watchLog(on map[string]func(logged)) *slog.Logger {
	return slog.New(&logWatch{Handler: slog.NewJSONHandler(io.Discard, nil), on: on})
}

func (w *logWatch) Handle(ctx context.Context, r slog.Record) error {
	if f, ok := w.on[r.Message]; ok {
		l := logged{at: r.Time, attrs: slices.Clone(w.attrs)}
		r.Attrs(func(a slog.Attr) bool {
			l.attrs = append(l.attrs, a)
			return true
		})
		f(l)
	}
	return w.Handler.Handle(ctx, r)
}

func (w *logWatch) WithAttrs(as []slog.Attr) slog.Handler {
	return &logWatch{Handler: w.Handler.WithAttrs(as), on: w.on, attrs: append(slices.Clip(w.attrs), as...)}
}

func (w *logWatch) WithGroup(name string) slog.Handler {
	return &logWatch{Handler: w.Handler.WithGroup(name), on: w.on, attrs: w.attrs}
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
