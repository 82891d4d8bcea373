package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/kanban"
)

// Defaults for KanbanOptions.
const (
	DefaultKanbanCycles = 2000
	DefaultKanbanCards  = 1000
)

// DefaultKanbanClients are the concurrencies the cycles run at.
var DefaultKanbanClients = []int{1, 32}

// DefaultKanbanReferencePerS is the reference platform's sequential
// cycles/s the targets are multiples of when a run is not given the
// figure measured beside it (KanbanOptions.ReferencePerS): its board
// (WAL, synchronous=FULL) on this kind of machine and disk.
const DefaultKanbanReferencePerS = 620.0

// The targets, as multiples of the reference's sequential cycles/s: at
// 1 client twice it on SQLite and five times on Redis, at 32 clients ten
// times it on either.
const (
	targetKanbanSequentialSQLite = 2.0
	targetKanbanSequentialRedis  = 5.0
	targetKanbanConcurrent       = 10.0
	targetKanbanConcurrentClient = 32
)

// kanbanLane is the lane every card of a run is assigned to and claimed
// for; in the dispatch it is the no-op lane.
const kanbanLane = "bench"

// KanbanOptions say what Kanban measures.
type KanbanOptions struct {
	Store string // "sqlite" or "redis"
	// Cycles is how many create+claim+complete cycles run at each of
	// Clients; DefaultKanbanCycles and DefaultKanbanClients when 0 or
	// empty.
	Cycles  int
	Clients []int
	// Cards are made ready and then dispatched at once to a lane whose
	// workers do nothing; DefaultKanbanCards when 0, none when negative.
	Cards    int
	RedisURL string // the Redis to measure; DefaultRedisURL when empty
	// ReferencePerS is the reference's sequential cycles/s, measured on
	// the same disk beside this run (scripts/reference-kanban);
	// DefaultKanbanReferencePerS when 0.
	ReferencePerS float64
	TempDir       string // where the SQLite files and the workspaces are made (and removed); the system's when empty
}

// KanbanResult is one run's figures. The JSON names are what
// `herald bench kanban --json` prints; scripts read them.
type KanbanResult struct {
	Store         string         `json:"store"`
	ReferencePerS float64        `json:"reference_per_s"`
	Cycles        []KanbanCycles `json:"cycles"`
	// Dispatch is absent when no cards were dispatched.
	Dispatch *KanbanDispatch `json:"dispatch,omitempty"`
}

// KanbanCycles is the cycles at one concurrency: each client creates a
// card, claims it and completes it, then the next, beside the raw
// ceiling: the same store round trips, of the simplest kind, at the same
// concurrency.
type KanbanCycles struct {
	Clients    int     `json:"clients"`
	Cycles     int     `json:"cycles"`
	CyclesPerS float64 `json:"cycles_per_s"`
	P50Ms      float64 `json:"p50_ms"` // one cycle, create to complete
	P99Ms      float64 `json:"p99_ms"`
	RawPerS    float64 `json:"raw_per_s"`
	RawP50Ms   float64 `json:"raw_p50_ms"`
	RawP99Ms   float64 `json:"raw_p99_ms"`
	Ratio      float64 `json:"ratio"` // CyclesPerS / RawPerS
	// TargetPerS is the cycles/s to reach: twice the reference's at one
	// client on SQLite, five times on Redis, ten times at 32; 0 at other
	// concurrencies.
	TargetPerS float64 `json:"target_per_s,omitempty"`
	// CPU time per herald cycle: this process's and on Redis the server's.
	CPUUsPerCycle       float64 `json:"cpu_us_per_cycle"`
	ServerCPUUsPerCycle float64 `json:"server_cpu_us_per_cycle,omitempty"`
	// Done counts the cards done at the version a card has after exactly
	// one create, one claim and one complete; it should be Cycles.
	Done int `json:"done"`
}

// KanbanDispatch is the dispatch of Cards ready cards at once to a lane
// whose workers start, do nothing and hold their card until the
// dispatcher stops, beside the raw ceiling: the same store round trips a
// dispatched card costs, one card after another as the dispatcher makes
// them.
type KanbanDispatch struct {
	Cards    int `json:"cards"`
	MaxSpawn int `json:"max_spawn"`
	// AllStartedS is from the dispatcher's start to the last card's
	// worker starting, every card claimed first.
	AllStartedS float64 `json:"all_started_s"`
	CardsPerS   float64 `json:"cards_per_s"`
	RawS        float64 `json:"raw_s"`
	RawPerS     float64 `json:"raw_per_s"`
	Ratio       float64 `json:"ratio"` // CardsPerS / RawPerS
	// Started counts the cards whose worker started; Double those whose
	// worker started more than once; Running the cards running under a
	// claim of the dispatcher's once every worker started.
	Started int `json:"started"`
	Double  int `json:"double"`
	Running int `json:"running"`
	// CPU time per card: this process's and on Redis the server's.
	CPUUsPerCard       float64 `json:"cpu_us_per_card"`
	ServerCPUUsPerCard float64 `json:"server_cpu_us_per_card,omitempty"`
	// Warnings the dispatcher logged, and the first of them.
	Warnings     int    `json:"warnings"`
	FirstWarning string `json:"first_warning,omitempty"`
}

// Kanban runs the kanban benchmark: the cycles at each concurrency, then
// the dispatch.
func Kanban(ctx context.Context, opt KanbanOptions) (KanbanResult, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return KanbanResult{}, err
	}
	res := KanbanResult{Store: opt.Store, ReferencePerS: opt.ReferencePerS}
	return onBackend(ctx, opt.Store, opt.TempDir, redisTarget{URL: opt.RedisURL}, max(slicesMax(opt.Clients), 1), func(b backend) (_ KanbanResult, err error) {
		raw, err := newKanbanRaw(ctx, b)
		if err != nil {
			return res, fmt.Errorf("preparing the raw loop: %w", err)
		}
		defer func() {
			if cerr := raw.close(); err == nil && cerr != nil {
				err = fmt.Errorf("closing the raw loop: %w", cerr)
			}
		}()
		db, err := openKanbanStore(ctx, b)
		if err != nil {
			return res, fmt.Errorf("opening the %s store: %w", opt.Store, err)
		}
		defer func() {
			if cerr := db.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("closing the store: %w", cerr)
			}
		}()
		// A gateway's service masks what is said of a card with the
		// config's secrets; a model key is one.
		svc := &kanban.Service{Store: db.Kanban(), Redact: redact.New([]string{"sk-bench-" + kanban.NewRunID()}).String}
		for _, clients := range opt.Clients {
			c, err := measureKanbanCycles(ctx, b, raw, svc, opt.Cycles, clients)
			c.TargetPerS = opt.target(clients)
			if err != nil {
				return res, fmt.Errorf("%d clients: %w", clients, err)
			}
			res.Cycles = append(res.Cycles, c)
		}
		if opt.Cards > 0 {
			d, err := measureKanbanDispatch(ctx, b, raw, svc, opt)
			if err != nil {
				return res, fmt.Errorf("dispatch: %w", err)
			}
			res.Dispatch = &d
		}
		return res, nil
	})
}

func (opt KanbanOptions) withDefaults() (KanbanOptions, error) {
	if opt.Cycles == 0 {
		opt.Cycles = DefaultKanbanCycles
	}
	if len(opt.Clients) == 0 {
		opt.Clients = DefaultKanbanClients
	}
	if opt.Cards == 0 {
		opt.Cards = DefaultKanbanCards
	}
	if opt.RedisURL == "" {
		opt.RedisURL = DefaultRedisURL
	}
	if opt.ReferencePerS == 0 {
		opt.ReferencePerS = DefaultKanbanReferencePerS
	}
	switch {
	case opt.ReferencePerS < 0:
		return opt, fmt.Errorf("the reference's cycles/s must be positive, got %g", opt.ReferencePerS)
	case opt.Store != "sqlite" && opt.Store != "redis":
		return opt, fmt.Errorf("unknown store %q; want sqlite or redis", opt.Store)
	case opt.Cycles < 1:
		return opt, fmt.Errorf("cycles must be positive, got %d", opt.Cycles)
	case slicesMin(opt.Clients) < 1:
		return opt, fmt.Errorf("clients must be positive, got %v", opt.Clients)
	}
	return opt, nil
}

// target is the cycles/s to reach at clients concurrency; 0 for none.
func (opt KanbanOptions) target(clients int) float64 {
	switch {
	case clients == 1 && opt.Store == "redis":
		return targetKanbanSequentialRedis * opt.ReferencePerS
	case clients == 1:
		return targetKanbanSequentialSQLite * opt.ReferencePerS
	case clients == targetKanbanConcurrentClient:
		return targetKanbanConcurrent * opt.ReferencePerS
	}
	return 0
}

func slicesMax(v []int) int {
	m := 0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func slicesMin(v []int) int {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

// kanbanDB is what the benchmark needs of an opened store.
type kanbanDB interface {
	Kanban() kanban.Store
	Close() error
}

func openKanbanStore(ctx context.Context, b backend) (kanbanDB, error) {
	s, err := b.open(ctx)
	if err != nil {
		return nil, err
	}
	db, ok := s.(kanbanDB)
	if !ok {
		s.Close()
		return nil, errors.New("the store keeps no kanban boards")
	}
	return db, nil
}

// measureKanbanCycles runs cycles cycles at clients concurrency, the raw
// loop and herald's taking turns (rounds), on a board of their own, and
// checks that every card ended done once.
func measureKanbanCycles(ctx context.Context, b backend, raw kanbanRaw, svc *kanban.Service, cycles, clients int) (KanbanCycles, error) {
	res := KanbanCycles{Clients: clients, Cycles: cycles}
	board := "bench-" + strconv.Itoa(clients)
	var rawRun, heraldRun run
	var cpu cpuUse
	for r := range rounds {
		n := share(cycles, rounds, r)
		tag := "c" + strconv.Itoa(clients) + "r" + strconv.Itoa(r)
		rr, err := driveRaw(ctx, n, clients, cycler(raw, tag, rawCycle))
		if err != nil {
			return res, fmt.Errorf("raw loop: %w", err)
		}
		rawRun.add(rr)
		at := readCPU(ctx, b)
		hr, err := driveRaw(ctx, n, clients, func(ctx context.Context, c int) error {
			return kanbanCycle(ctx, svc, board, "bench-"+strconv.Itoa(c))
		})
		if err != nil {
			return res, fmt.Errorf("herald: %w", err)
		}
		cpu.add(at, readCPU(ctx, b))
		heraldRun.add(hr)
	}
	res.CyclesPerS = heraldRun.perSecond()
	res.P50Ms, res.P99Ms = heraldRun.quantiles()
	res.RawPerS = rawRun.perSecond()
	res.RawP50Ms, res.RawP99Ms = rawRun.quantiles()
	if res.RawPerS > 0 {
		res.Ratio = res.CyclesPerS / res.RawPerS
	}
	res.CPUUsPerCycle, res.ServerCPUUsPerCycle = cpu.perItem(cycles)
	done, err := svc.Store.Cards(ctx, kanban.Query{Board: board, Statuses: []kanban.Status{kanban.StatusDone}})
	if err != nil {
		return res, fmt.Errorf("reading the done cards: %w", err)
	}
	for _, k := range done {
		// Created at 1, claimed at 2, completed at 3.
		if k.Version == 3 && k.Claim == nil && k.Result != nil {
			res.Done++
		}
	}
	return res, nil
}

// kanbanCycle is one card's life as a client of the service lives it:
// created ready, claimed by owner for the bench lane, completed.
func kanbanCycle(ctx context.Context, svc *kanban.Service, board, owner string) error {
	k, _, err := svc.Create(ctx, kanban.CreateSpec{Board: board, Title: kanbanTitle, Assignee: kanbanLane, CreatedBy: owner})
	if err != nil {
		return fmt.Errorf("creating: %w", err)
	}
	k, err = svc.Claim(ctx, k.ID, kanban.ClaimSpec{Owner: owner, Lane: kanbanLane, TTL: kanban.DefaultClaimTTL})
	if err != nil {
		return fmt.Errorf("claiming %s: %w", k.ID, err)
	}
	if _, err := svc.Complete(ctx, k.ID, k.Claim.Token, kanban.Result{Summary: kanbanSummary}, owner); err != nil {
		return fmt.Errorf("completing %s: %w", k.ID, err)
	}
	return nil
}

// The text of every card and result, raw or not.
const (
	kanbanTitle   = "Summarise the overnight build failures"
	kanbanSummary = "Three failures, all from one flaky test; reported on the thread."
)

// kanbanCreators is how many cards are made ready at once before the
// dispatch: the writes are not measured, only made quickly.
const kanbanCreators = 32

// measureKanbanDispatch makes opt.Cards ready cards of the bench lane on
// the default board, starts a dispatcher whose bench lane's workers
// start and wait, and measures the time until every card's worker has
// started; the raw loop first makes and dispatches as many of its own.
func measureKanbanDispatch(ctx context.Context, b backend, raw kanbanRaw, svc *kanban.Service, opt KanbanOptions) (res KanbanDispatch, err error) {
	res = KanbanDispatch{Cards: opt.Cards, MaxSpawn: opt.Cards}
	rawTook, err := dispatchRaw(ctx, raw, opt.Cards)
	if err != nil {
		return res, fmt.Errorf("raw loop: %w", err)
	}
	res.RawS = rawTook.Seconds()
	if res.RawS > 0 {
		res.RawPerS = float64(opt.Cards) / res.RawS
	}

	if _, err := driveRaw(ctx, opt.Cards, kanbanCreators, func(ctx context.Context, _ int) error {
		_, _, err := svc.Create(ctx, kanban.CreateSpec{Title: kanbanTitle, Assignee: kanbanLane, CreatedBy: "bench"})
		return err
	}); err != nil {
		return res, fmt.Errorf("making the cards: %w", err)
	}
	home, err := os.MkdirTemp(opt.TempDir, "herald-bench-kanban-")
	if err != nil {
		return res, err
	}
	defer func() {
		if rerr := os.RemoveAll(home); err == nil && rerr != nil {
			err = rerr
		}
	}()
	svc.Root = home // the cards' scratch workspaces and logs
	rec := newStartRecord(opt.Cards)
	warn := &warnCounter{}
	d, err := kanban.NewDispatcher(kanban.DispatcherOptions{
		Service: svc,
		Lanes: map[string]kanban.LaneConfig{kanbanLane: {Lane: kanban.FuncLane{Run: func(ctx context.Context, spec kanban.WorkerSpec) error {
			rec.started(spec.Card.ID)
			<-ctx.Done()
			return nil
		}}}},
		Name: "bench",
		// One dispatch, at the start: the cards are ready by then.
		Interval: time.Hour,
		ClaimTTL: kanban.DefaultClaimTTL,
		MaxSpawn: res.MaxSpawn,
		Logger:   slog.New(warn),
	})
	if err != nil {
		return res, err
	}
	at := readCPU(ctx, b)
	start := time.Now()
	if err := d.Start(ctx); err != nil {
		return res, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if serr := d.Shutdown(sctx); err == nil && serr != nil {
			err = fmt.Errorf("stopping the dispatcher: %w", serr)
		}
	}()
	select {
	case <-rec.complete:
	case <-ctx.Done():
		return res, ctx.Err()
	}
	cpu := cpuUse{}
	cpu.add(at, readCPU(ctx, b))
	res.AllStartedS = rec.last().Sub(start).Seconds()
	if res.AllStartedS > 0 {
		res.CardsPerS = float64(opt.Cards) / res.AllStartedS
	}
	if res.RawPerS > 0 {
		res.Ratio = res.CardsPerS / res.RawPerS
	}
	res.CPUUsPerCard, res.ServerCPUUsPerCard = cpu.perItem(opt.Cards)
	res.Started, res.Double = rec.counts()
	running, err := svc.Store.Cards(ctx, kanban.Query{Board: kanban.DefaultBoard, Statuses: []kanban.Status{kanban.StatusRunning}})
	if err != nil {
		return res, fmt.Errorf("reading the running cards: %w", err)
	}
	for _, k := range running {
		if k.Claim != nil && k.Claim.Owner == "bench" && k.Claim.Lane == kanbanLane {
			res.Running++
		}
	}
	res.Warnings, res.FirstWarning = warn.counts()
	return res, nil
}

// startRecord keeps which cards' workers started, and when the last
// first start was.
type startRecord struct {
	want     int
	complete chan struct{} // closed when every card's worker started

	mu    sync.Mutex
	times map[string]int
	at    time.Time
}

func newStartRecord(cards int) *startRecord {
	return &startRecord{want: cards, complete: make(chan struct{}), times: map[string]int{}}
}

func (r *startRecord) started(card string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.times[card]++
	if r.times[card] == 1 {
		r.at = time.Now()
		if len(r.times) == r.want {
			close(r.complete)
		}
	}
}

func (r *startRecord) last() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at
}

// counts returns the cards started and those started more than once.
func (r *startRecord) counts() (started, double int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.times {
		if n > 1 {
			double++
		}
	}
	return len(r.times), double
}

// kanbanRaw is the raw ceiling of the kanban figures: the store round
// trips herald's service makes, each of the simplest kind that does the
// same writes (rawCycle, rawDispatch).
type kanbanRaw interface {
	// write applies step to card in one atomic write: a claim (rawClaim)
	// as herald's store commits one, without waiting for the disk on
	// SQLite.
	write(ctx context.Context, step rawKanbanStep, card string) error
	// close lets go of what the loop opened.
	close() error
}

// rawKanbanStep is one write of a card's life in the raw loop.
type rawKanbanStep int

const (
	rawCreate   rawKanbanStep = iota // a new ready card and its event
	rawClaim                         // to running, with a new run and its event
	rawSpawned                       // the running card rewritten, with an event
	rawComplete                      // to done, its run rewritten, with an event
)

// status is the card's status after the write.
func (s rawKanbanStep) status() string {
	return map[rawKanbanStep]string{rawCreate: "ready", rawClaim: "running", rawSpawned: "running", rawComplete: "done"}[s]
}

// from is the status the write moves the card from ("" for a new one),
// and the version it finds it at.
func (s rawKanbanStep) from() (string, int64) {
	switch s {
	case rawClaim:
		return "ready", 1
	case rawSpawned, rawComplete:
		return "running", 2
	}
	return "", 0
}

// The round trips of herald's operations, in its order. A cycle: Create
// applies; Claim applies, decided on the card Create wrote; Complete
// applies, decided on the card Claim wrote (the store stamps each write
// with its clock inside it). A dispatched card of cards the service made:
// the claim, then the record of its worker's start, each decided on the
// card the service wrote last.
var (
	rawCycle    = []rawKanbanStep{rawCreate, rawClaim, rawComplete}
	rawDispatch = []rawKanbanStep{rawClaim, rawSpawned}
)

// rawSteps makes steps' round trips on card, one after another.
func rawSteps(ctx context.Context, raw kanbanRaw, card string, steps []rawKanbanStep) error {
	for _, s := range steps {
		if err := raw.write(ctx, s, card); err != nil {
			return err
		}
	}
	return nil
}

// rawBodies are the encodings the raw loop writes: a card, a run and an
// event encoded as herald encodes them, so that the bytes written weigh
// the same.
type rawBodies struct{ card, run, event []byte }

func newRawBodies() rawBodies {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	k := kanban.Card{
		ID: kanban.NewCardID(), Board: "bench-32", Title: kanbanTitle, Assignee: kanbanLane, Status: kanban.StatusRunning,
		Workspace: kanban.Workspace{Kind: kanban.WorkspaceScratch}, CreatedBy: "bench-31",
		Claim: &kanban.Claim{Owner: "bench-31", Token: 1, Expires: at.Add(kanban.DefaultClaimTTL), Run: kanban.NewRunID(),
			Lane: kanbanLane, Heartbeat: at, Started: at},
		CreatedAt: at, UpdatedAt: at, ReadyAt: at,
	}
	r := kanban.Run{ID: k.Claim.Run, Card: k.ID, Board: k.Board, Lane: kanbanLane, Owner: "bench-31", Started: at, Ended: at,
		Outcome: kanban.OutcomeCompleted, Summary: kanbanSummary}
	e := kanban.Event{Board: k.Board, Card: k.ID, Kind: kanban.EventClaimed, From: kanban.StatusReady, To: kanban.StatusRunning,
		Run: r.ID, Actor: "bench-31", Text: kanbanLane, At: at}
	card, _ := json.Marshal(k)
	run, _ := json.Marshal(r)
	event, _ := json.Marshal(e)
	return rawBodies{card: card, run: run, event: event}
}

func newKanbanRaw(ctx context.Context, b backend) (kanbanRaw, error) {
	switch b := b.(type) {
	case *sqliteBackend:
		// The queue's raw file, with its durability and its one
		// connection for the writes, and tables of the kanban's shape.
		if err := b.rawPrepare(ctx, 0); err != nil {
			return nil, err
		}
		if _, err := b.raw.ExecContext(ctx, `
			CREATE TABLE card (id TEXT PRIMARY KEY, status TEXT NOT NULL, version INTEGER NOT NULL, body BLOB NOT NULL);
			CREATE TABLE run (id TEXT PRIMARY KEY, card TEXT NOT NULL, body BLOB NOT NULL);
			CREATE TABLE event (seq INTEGER PRIMARY KEY, card TEXT NOT NULL, body BLOB NOT NULL);`); err != nil {
			return nil, err
		}
		return &sqliteKanbanRaw{db: b.raw, bodies: newRawBodies()}, nil
	case *redisBackend:
		return &redisKanbanRaw{c: b.raw, prefix: b.prefix + "k:", bodies: newRawBodies()}, nil
	}
	return nil, fmt.Errorf("no raw kanban loop for %T", b)
}

// cycler returns driveRaw's step for a raw loop: each call makes steps
// on a card of its own, named tag.1, tag.2 and on.
func cycler(raw kanbanRaw, tag string, steps []rawKanbanStep) func(context.Context, int) error {
	var n atomic.Int64
	return func(ctx context.Context, _ int) error {
		return rawSteps(ctx, raw, tag+"."+strconv.FormatInt(n.Add(1), 10), steps)
	}
}

// dispatchRaw makes cards ready cards (not timed), then makes each one's
// rawDispatch, one card after another as the dispatcher goes, and
// returns how long that took.
func dispatchRaw(ctx context.Context, raw kanbanRaw, cards int) (time.Duration, error) {
	if _, err := driveRaw(ctx, cards, kanbanCreators, cycler(raw, "d", []rawKanbanStep{rawCreate})); err != nil {
		return 0, err
	}
	start := time.Now()
	for i := range cards {
		if err := rawSteps(ctx, raw, "d."+strconv.Itoa(i+1), rawDispatch); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// sqliteKanbanRaw is the raw loop on the raw SQLite file: each write one
// transaction, a card's rewrite checked against the version it was at.
type sqliteKanbanRaw struct {
	db     *sql.DB
	bodies rawBodies
}

// close: the backend's cleanup closes the connection.
func (r *sqliteKanbanRaw) close() error { return nil }

func (r *sqliteKanbanRaw) write(ctx context.Context, step rawKanbanStep, card string) (err error) {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if step == rawClaim {
		// A claim commits without its fsync, as herald's bookkeeping
		// writes do; the next commit's makes it durable.
		if _, err := conn.ExecContext(ctx, `PRAGMA synchronous=NORMAL`); err != nil {
			return err
		}
		defer func() {
			if _, serr := conn.ExecContext(context.Background(), `PRAGMA synchronous=FULL`); err == nil {
				err = serr
			}
		}()
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	from, version := step.from()
	if from == "" {
		_, err = tx.ExecContext(ctx, `INSERT INTO card (id, status, version, body) VALUES (?, ?, 1, ?)`, card, step.status(), r.bodies.card)
	} else {
		var res sql.Result
		res, err = tx.ExecContext(ctx, `UPDATE card SET status = ?, version = ?, body = ? WHERE id = ? AND version = ?`,
			step.status(), version+1, r.bodies.card, card, version)
		if err == nil {
			if n, _ := res.RowsAffected(); n != 1 {
				err = fmt.Errorf("raw card %s is not at version %d", card, version)
			}
		}
	}
	if err != nil {
		return err
	}
	switch step {
	case rawClaim:
		_, err = tx.ExecContext(ctx, `INSERT INTO run (id, card, body) VALUES (?, ?, ?)`, card, card, r.bodies.run)
	case rawComplete:
		_, err = tx.ExecContext(ctx, `UPDATE run SET body = ? WHERE id = ?`, r.bodies.run, card)
	}
	if err != nil {
		return err
	}
	if _, err = tx.ExecContext(ctx, `INSERT INTO event (card, body) VALUES (?, ?)`, card, r.bodies.event); err != nil {
		return err
	}
	return tx.Commit()
}

// redisKanbanRaw is the raw loop on the Redis server: each write one
// MULTI/EXEC of the commands herald's apply writes with (the card's hash,
// its move between status sets, the run and its index, the event and
// its card's cursor list), without the checks a script would need.
type redisKanbanRaw struct {
	c      goredis.UniversalClient
	prefix string
	bodies rawBodies
}

// close: the backend's cleanup closes the client.
func (r *redisKanbanRaw) close() error { return nil }

func (r *redisKanbanRaw) write(ctx context.Context, step rawKanbanStep, card string) error {
	p := r.prefix
	from, version := step.from()
	_, err := r.c.TxPipelined(ctx, func(tx goredis.Pipeliner) error {
		tx.HSet(ctx, p+"c:"+card, "v", version+1, "j", r.bodies.card, "s", step.status())
		if from == "" {
			tx.SAdd(ctx, p+"st:"+step.status(), card)
		} else {
			tx.SMove(ctx, p+"st:"+from, p+"st:"+step.status(), card)
		}
		if step == rawClaim || step == rawComplete {
			// The run is named after its card: one a card in the raw loop.
			tx.Set(ctx, p+"r:"+card, r.bodies.run, 0)
			tx.ZAdd(ctx, p+"runs:"+card, goredis.Z{Score: float64(version), Member: card})
		}
		tx.XAdd(ctx, &goredis.XAddArgs{Stream: p + "ev", Values: []any{"e", r.bodies.event}})
		tx.RPush(ctx, p+"evc:"+card, version)
		return nil
	})
	return err
}
