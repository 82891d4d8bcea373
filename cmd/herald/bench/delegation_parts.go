package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/sessions"
)

// delegationPipeline is the gateway that background work goes through,
// built by gateway.New: the router, the turn worker running the agent
// with delegate_task, the signal tailer, the delivery worker, and
// delegation's runner and completion deliverer. Only the model is a
// double, one client for both kinds of call: the conversations' are
// answered at once, the children's (delegation.model, childModel) after
// a delay.
type delegationPipeline struct {
	*heraldGateway
	model   *delegationModel
	replies *replies
	rec     *turnTimes
}

// delegationConfig is what the gateway's config takes from the options.
type delegationConfig struct {
	tasks     int // delegation.max_concurrent_children
	turns     int // workers.turns
	runnerMax int // delegation.process_max_children
	// runChildren lets the children run; without it the runner runs one
	// at most, whose model call waits until the gateway stops, and the
	// others stay pending.
	runChildren bool
	tempDir     string
}

// noopTool is the tool the dispatch phase's other turns call: the
// gateway has none of that name, so the call is answered without
// anything run, after the same model round trips as delegate_task's.
const noopTool = "bench_noop"

// The texts of the bench's messages: what the parents' model answers
// with a tool call.
const (
	textDispatch = "dispatch"
	textNoop     = "noop"
)

func startDelegationPipeline(ctx context.Context, b backend, cfg delegationConfig) (*delegationPipeline, error) {
	p := &delegationPipeline{replies: &replies{}, rec: newTurnTimes()}
	p.model = &delegationModel{args: taskArgs(cfg.tasks), rec: p.rec}
	runnerMax := cfg.runnerMax
	if !cfg.runChildren {
		runnerMax = 1
		p.model.hold.Store(true)
	}
	var err error
	p.heraldGateway, err = startGateway(ctx, b, gatewaySetup{
		model:    p.model,
		adapters: []adapters.Adapter{&captureAdapter{arrived: p.replies.arrived}},
		logger:   watchLog(p.rec.logged()),
		tempDir:  cfg.tempDir,
		configure: func(c *config.Config) {
			c.Workers.Turns = cfg.turns
			c.Delegation.Model = childModel
			c.Delegation.MaxConcurrentChildren = cfg.tasks
			c.Delegation.ProcessMaxChildren = runnerMax
		},
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// taskArgs are delegate_task's arguments with n tasks, each with a goal
// and a context of the size a model writes.
func taskArgs(n int) string {
	var b strings.Builder
	b.WriteString(`{"tasks":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"goal":"Read the module's package %d and list every exported function that has no test, with its file and line.","context":"The repository is checked out in the workspace. Report as a markdown table; do not change any file."}`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// inboundText is a user message of conv with the message id id.
func inboundText(conv, id, text string) sessions.Inbound {
	return sessions.Inbound{Conv: conv, Sender: "bench", MessageID: id, Text: text}
}

// runTurn delivers in and returns its turn's times once its reply has
// reached the adapter.
func runTurn(ctx context.Context, p *delegationPipeline, in sessions.Inbound) (turnTime, error) {
	committed := p.rec.expectCommit(in.Conv)
	reply := p.replies.expect(in.MessageID)
	if err := p.Router().Deliver(ctx, in); err != nil {
		return turnTime{}, fmt.Errorf("delivering %s: %w", in.MessageID, err)
	}
	timeout := time.NewTimer(replyTimeout)
	defer timeout.Stop()
	var took turnTime
	for committed != nil || reply != nil {
		select {
		case took = <-committed:
			committed = nil
		case <-reply:
			reply = nil
		case <-timeout.C:
			return turnTime{}, fmt.Errorf("the turn of %s did not commit and send its reply within %s", in.Conv, replyTimeout)
		case <-ctx.Done():
			return turnTime{}, ctx.Err()
		}
	}
	return took, nil
}

// fanResult is what driveFanOut measured.
type fanResult struct {
	firstDispatch, lastDispatch    time.Time
	lastChildCall, lastEnd         time.Time
	lastDelivered, lastTurnStarted time.Time
	completionLatencies            []time.Duration
}

// driveFanOut delivers a dispatching message to each of n conversations
// at once, each from a goroutine of its own, with the children's model
// taking childDelay, and waits until every completion's parent turn has
// ended.
func driveFanOut(ctx context.Context, p *delegationPipeline, tag string, n int, childDelay time.Duration) (fanResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.model.delay.Store(int64(childDelay))
	prefix := benchPlatform + ":f" + tag + "-"
	convs := make([]string, n)
	for i := range convs {
		convs[i] = prefix + strconv.Itoa(i)
	}
	f := newFanPhase(prefix, n)
	p.rec.fan.Store(f)
	defer p.rec.fan.Store(nil)
	p.rec.watch(convs...)
	g := &firstError{cancel: cancel}
	for i, conv := range convs {
		g.Go(func() error {
			id := "f" + tag + "-" + strconv.Itoa(i)
			if err := p.Router().Deliver(ctx, inboundText(conv, id, textDispatch)); err != nil {
				return fmt.Errorf("delivering %s: %w", id, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return fanResult{}, err
	}
	timeout := time.NewTimer(childDelay + replyTimeout)
	defer timeout.Stop()
	select {
	case <-f.done:
	case <-timeout.C:
		return fanResult{}, fmt.Errorf("within %s, %s", childDelay+replyTimeout, f.progress())
	case <-ctx.Done():
		return fanResult{}, ctx.Err()
	}
	return f.result(), nil
}
