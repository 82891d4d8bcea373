package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/llm"
)

// pipeline is the gateway a turn goes through, with what the bench
// reads of it: the router an adapter delivers to, the turn worker with
// its claim loop running the agent, the signal tailer, the delivery
// worker and the adapter the replies reach, built by gateway.New. Only
// the model is a double, which answers after a fixed delay, so that
// what a turn takes beyond that delay is herald's own.
type pipeline struct {
	*heraldGateway
	model   *delayModel
	replies *replies
	// server is the model's server on loopback (HTTPModel), nil for the
	// double in process.
	server *httptest.Server
	// lastCommit is when a turn last committed its reply (the gateway
	// logs each turn's end once it has): in a burst, when the last one
	// had, which tells the turn worker's share of the time from the
	// delivery worker's.
	lastCommit *latest
}

// startPipeline starts the gateway on b's store with workers.turns
// turns and workers.deliveries deliveries. Its model answers at once
// until its delay is set.
func startPipeline(ctx context.Context, b backend, opt PipelineOptions) (*pipeline, error) {
	p := &pipeline{model: &delayModel{}, replies: &replies{}, lastCommit: &latest{}}
	var (
		model   llm.Client = p.model
		baseURL string
	)
	if opt.HTTPModel {
		p.server = httptest.NewServer(http.HandlerFunc(p.model.serve))
		model, baseURL = nil, p.server.URL+"/v1"
	}
	var err error
	p.heraldGateway, err = startGateway(ctx, b, gatewaySetup{
		model:    model,
		adapters: []adapters.Adapter{&captureAdapter{arrived: p.replies.arrived}},
		logger:   watchLog(map[string]func(logged){"turn finished": func(l logged) { p.lastCommit.note(l.at) }}),
		tempDir:  opt.TempDir,
		configure: func(cfg *config.Config) {
			cfg.Workers.Turns, cfg.Workers.Deliveries = opt.TurnWorkers, opt.Deliveries
			if baseURL != "" {
				cfg.Model.BaseURL, cfg.Model.APIKey = baseURL, "sk-bench-model-key-0001"
			}
		},
	})
	if err != nil {
		if p.server != nil {
			p.server.Close()
		}
		return nil, err
	}
	return p, nil
}

// stop stops the gateway, then the model's server, if any.
func (p *pipeline) stop(ctx context.Context) error {
	err := p.heraldGateway.stop(ctx)
	if p.server != nil {
		p.server.Close()
	}
	return err
}

// delayModel stands in for the model: every call is answered after the
// delay with a short reply, and the tokens a server reports for it. It
// does no work of its own.
type delayModel struct {
	delay atomic.Int64 // a time.Duration; the warm-up runs with none
	// lastCall is when the model was last called: in a burst, when the
	// last of its turns had started.
	lastCall latest
	calls    atomic.Int64 // how many times it was called
}

var _ llm.Client = (*delayModel)(nil)

// serve is the model as a server of the Chat Completions API: each
// request answered after the delay with the same reply and usage.
func (m *delayModel) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	m.lastCall.note(time.Now())
	m.calls.Add(1)
	if d := time.Duration(m.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"bench",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Noted: herald bench reply."},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":120,"completion_tokens":8,"total_tokens":128}}`)
}

func (m *delayModel) Complete(ctx context.Context, _ llm.Request) (*llm.Response, error) {
	m.lastCall.note(time.Now())
	m.calls.Add(1)
	if d := time.Duration(m.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		}
	}
	return &llm.Response{
		Message:      chat.Message{Role: "assistant", Content: "Noted: herald bench reply."},
		FinishReason: "stop",
		// As a model's server reports them: the turn commits its usage
		// with it, as a real turn does.
		Usage: llm.Usage{PromptTokens: 120, CompletionTokens: 8},
	}, nil
}

// writePeakProfile waits until the model has been called n times (or
// until by, when the first answers are due), collects, and writes a
// profile of the live heap to file and the goroutines beside it.
func (m *delayModel) writePeakProfile(file string, n int, by time.Time) error {
	for m.calls.Load() < int64(n) && time.Now().Before(by) {
		time.Sleep(time.Millisecond)
	}
	runtime.GC()
	if err := WriteProfile("heap", file, 0); err != nil {
		return err
	}
	return WriteProfile("goroutine", file+".goroutines", 1)
}

// WriteProfile writes the runtime's profile name (pprof.Lookup) to file,
// with debug as WriteTo takes it.
func WriteProfile(name, file string, debug int) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, debug); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
