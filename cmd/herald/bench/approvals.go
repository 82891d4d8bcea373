package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
)

// DefaultApprovalRounds is ApprovalsOptions.Rounds when it is 0.
const DefaultApprovalRounds = 200

// approvalWarmup is how many rounds run, unmeasured, before the first
// measured one.
const approvalWarmup = 3

// ApprovalsOptions say what Approvals measures.
type ApprovalsOptions struct {
	Store    string // "sqlite" or "redis"
	Rounds   int    // rounds, each a turn of every kind; DefaultApprovalRounds when 0
	RedisURL string // the Redis to measure; DefaultRedisURL when empty
	TempDir  string // where the home, workspace and SQLite files are made (and removed); the system's when empty
}

// ApprovalsResult is one run's figures, as `herald bench approvals
// --json` prints them. Each is the time from a press (or, for the
// reference, from the model handing herald its tool call) to the
// command's own record of its start.
type ApprovalsResult struct {
	Store  string `json:"store"`
	Rounds int    `json:"rounds"`
	// A press of Allow once: "/approve once ID" delivered to the router
	// of the gateway whose turn waits, as a platform adapter delivers it.
	PressP50Ms float64 `json:"press_p50_ms"`
	PressP99Ms float64 `json:"press_p99_ms"`
	// POST /api/v1/approvals/{id} on the gateway whose turn waits.
	APIP50Ms float64 `json:"api_p50_ms"`
	APIP99Ms float64 `json:"api_p99_ms"`
	// The press delivered to the router of a second gateway on the same
	// store (Redis only): the decision reaches the turn through the
	// store's signals.
	OtherP50Ms float64 `json:"other_gateway_p50_ms,omitempty"`
	OtherP99Ms float64 `json:"other_gateway_p99_ms,omitempty"`
	// The reference: a command that asks nothing, from the model's tool
	// call to its start.
	RefP50Ms float64 `json:"reference_p50_ms"`
	RefP99Ms float64 `json:"reference_p99_ms"`
	// Started is how many commands the run's turns started: one a turn.
	Started int `json:"started"`
}

// The kinds of turn a round runs. Each names its turns' keys.
const (
	sidePress = "p" // dangerous, pressed through the asking gateway's router
	sideAPI   = "a" // dangerous, answered through its API
	sideOther = "o" // dangerous, pressed through the other gateway's router
	sideRef   = "n" // not dangerous: runs at once
)

// Approvals measures the time from a press of Allow once to the
// dangerous command it allows starting, on the gateway gateway.New
// builds, with its model a server on loopback speaking the Chat
// Completions API. Each turn is a conversation of its own: the model
// calls the terminal with a command that writes $EPOCHREALTIME (bash's
// clock, read by the started shell itself) to a file of its turn; a
// dangerous one waits for its question's press. Beside it, the
// reference: the same command without the dangerous pattern, from the
// model's tool call to its start. The kinds take turns, round by
// round, the first changing each round. On Redis a second gateway
// shares the store, and a third kind presses on it.
func Approvals(ctx context.Context, opt ApprovalsOptions) (ApprovalsResult, error) {
	opt.Rounds = cmp.Or(opt.Rounds, DefaultApprovalRounds)
	opt.RedisURL = cmp.Or(opt.RedisURL, DefaultRedisURL)
	if opt.Rounds < 1 {
		return ApprovalsResult{}, fmt.Errorf("rounds must be positive, got %d", opt.Rounds)
	}
	return onBackend(ctx, opt.Store, opt.TempDir, redisTarget{URL: opt.RedisURL}, 2, func(b backend) (ApprovalsResult, error) {
		return measureApprovals(ctx, b, opt)
	})
}

// approvalBench is a run: its gateways, the model they call, the chat
// their messages reach, and where the commands record their start.
type approvalBench struct {
	gws   []*heraldGateway
	model *toolCallModel
	chat  *approvalChat
	asked asked
	marks string // the directory of the commands' records
	http  *http.Client
}

func measureApprovals(ctx context.Context, b backend, opt ApprovalsOptions) (res ApprovalsResult, err error) {
	res = ApprovalsResult{Store: opt.Store, Rounds: opt.Rounds}
	dir, err := os.MkdirTemp(opt.TempDir, "herald-bench-approvals-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	ab := &approvalBench{chat: &approvalChat{}, marks: filepath.Join(dir, "marks"), http: &http.Client{}}
	if err := os.Mkdir(ab.marks, 0o755); err != nil {
		return res, err
	}
	ab.model = newToolCallModel(ab.marks)
	defer ab.model.srv.Close()
	gateways := 1
	sides := []string{sidePress, sideAPI, sideRef}
	if opt.Store == "redis" {
		gateways = 2
		sides = append(sides, sideOther)
	}
	for i := range gateways {
		h, err := startGateway(ctx, b, gatewaySetup{
			adapters: []adapters.Adapter{ab.chat},
			logger:   watchLog(map[string]func(logged){"asking approval": func(l logged) { ab.asked.note(l.str("approval"), i) }}),
			tempDir:  dir,
			configure: func(cfg *config.Config) {
				cfg.Model.BaseURL = ab.model.srv.URL + "/v1"
				cfg.Tools.Workspace = dir
			},
		})
		if err != nil {
			return res, fmt.Errorf("starting gateway %d: %w", i+1, err)
		}
		ab.gws = append(ab.gws, h)
	}
	defer func() {
		for _, h := range ab.gws {
			if serr := h.stop(ctx); err == nil && serr != nil {
				err = fmt.Errorf("stopping the gateway: %w", serr)
			}
		}
	}()

	took := map[string][]time.Duration{}
	for r := -approvalWarmup; r < opt.Rounds; r++ {
		order := slices.Clone(sides)
		k := (r + approvalWarmup) % len(order)
		order = append(order[k:], order[:k]...)
		for _, side := range order {
			d, err := ab.turn(ctx, side+strconv.Itoa(r+approvalWarmup))
			if err != nil {
				return res, err
			}
			if r >= 0 {
				took[side] = append(took[side], d)
			}
		}
	}
	res.PressP50Ms, res.PressP99Ms = run{latencies: took[sidePress]}.quantiles()
	res.APIP50Ms, res.APIP99Ms = run{latencies: took[sideAPI]}.quantiles()
	res.OtherP50Ms, res.OtherP99Ms = run{latencies: took[sideOther]}.quantiles()
	res.RefP50Ms, res.RefP99Ms = run{latencies: took[sideRef]}.quantiles()
	// Counted again at the end: a command run twice for one press would
	// have written its second line by now.
	res.Started, err = countMarks(ab.marks)
	if want := (opt.Rounds + approvalWarmup) * len(sides); err == nil && res.Started != want {
		err = fmt.Errorf("%d commands started, want %d: one a turn", res.Started, want)
	}
	return res, err
}

// turn runs the turn key names (its first letter its side) in a
// conversation of its own and returns the time from its press (or its
// tool call) to its command's start.
func (ab *approvalBench) turn(ctx context.Context, key string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, replyTimeout)
	defer cancel()
	conv := benchPlatform + ":" + key
	w := ab.chat.watch(conv)
	defer ab.chat.forget(conv)
	if err := ab.gws[0].Router().Deliver(ctx, sessions.Inbound{Conv: conv, Sender: "u1", MessageID: key, Text: "run " + key}); err != nil {
		return 0, err
	}
	var t0 time.Time
	if side := key[:1]; side == sideRef {
		select {
		case <-w.done:
		case <-ctx.Done():
			return 0, fmt.Errorf("turn %s: no reply: %w", key, ctx.Err())
		}
		t0 = ab.model.calledAt(key)
	} else {
		var q outbox.Message
		select {
		case q = <-w.question:
		case <-ctx.Done():
			return 0, fmt.Errorf("turn %s: no question: %w", key, ctx.Err())
		}
		id := q.Meta[approvals.MetaApproval]
		asker, err := ab.asked.wait(ctx, id)
		if err != nil {
			return 0, fmt.Errorf("turn %s: no gateway logged its question: %w", key, err)
		}
		// A person presses at no particular moment of the gateways'
		// signal reads: without the pause, each round, which the read
		// that wakes its turn ends, would fall in step with the reads.
		if err := pause(ctx, rand.N(signals.DefaultInterval)); err != nil {
			return 0, err
		}
		t0 = time.Now()
		switch side {
		case sidePress:
			err = ab.press(ctx, ab.gws[asker], conv, key, id, sentID(q))
		case sideAPI:
			err = ab.decide(ctx, ab.gws[asker], id)
		case sideOther:
			err = ab.press(ctx, ab.gws[1-asker], conv, key, id, sentID(q))
		}
		if err != nil {
			return 0, fmt.Errorf("turn %s: answering %s: %w", key, id, err)
		}
		select {
		case <-w.done:
		case <-ctx.Done():
			return 0, fmt.Errorf("turn %s: no reply after the press: %w", key, ctx.Err())
		}
	}
	started, err := readMark(filepath.Join(ab.marks, key))
	if err != nil {
		return 0, fmt.Errorf("turn %s: %w", key, err)
	}
	return started.Sub(t0), nil
}

// press delivers Allow once's command to h's router, as the adapter of
// a platform with buttons delivers the press of the question's button
// (message: the question's message id).
func (ab *approvalBench) press(ctx context.Context, h *heraldGateway, conv, key, id, message string) error {
	return h.Router().Deliver(ctx, sessions.Inbound{
		Conv: conv, Sender: "u1", MessageID: key + "-press", Text: "/approve once " + id,
		Meta: map[string]string{sessions.MetaPressed: message},
	})
}

// decide answers approval id once through h's API.
func (ab *approvalBench) decide(ctx context.Context, h *heraldGateway, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+h.Addr()+"/api/v1/approvals/"+id, strings.NewReader(`{"decision":"once"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := ab.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("the API answered %s", res.Status)
	}
	return nil
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readMark reads the start a command recorded: one line, bash's
// $EPOCHREALTIME (seconds and microseconds).
func readMark(path string) (time.Time, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, fmt.Errorf("the command left no record of its start: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1 {
		return time.Time{}, fmt.Errorf("the command started %d times, want once", len(lines))
	}
	sec, frac, ok := strings.Cut(lines[0], ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	us, err2 := strconv.ParseInt(frac, 10, 64)
	if !ok || len(frac) != 6 || err1 != nil || err2 != nil {
		return time.Time{}, fmt.Errorf("the command recorded its start as %q, not bash's $EPOCHREALTIME (bash 5 or later)", lines[0])
	}
	return time.Unix(s, us*1000), nil
}

// countMarks counts the starts the commands recorded.
func countMarks(dir string) (int, error) {
	files, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f.Name()))
		if err != nil {
			return 0, err
		}
		n += bytes.Count(data, []byte("\n"))
	}
	return n, nil
}

// asked tells which gateway asked each approval, from the gateways'
// logs: the line is logged once its question is queued, so the bench
// may see the question first and wait for it.
type asked struct{ by sync.Map } // approval id → chan int

func (a *asked) ch(id string) chan int {
	ch, _ := a.by.LoadOrStore(id, make(chan int, 1))
	return ch.(chan int)
}

func (a *asked) note(id string, gateway int) { a.ch(id) <- gateway }

func (a *asked) wait(ctx context.Context, id string) (int, error) {
	if id == "" {
		return 0, errors.New("the question names no approval")
	}
	defer a.by.Delete(id)
	select {
	case i := <-a.ch(id):
		return i, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
