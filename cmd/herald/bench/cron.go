package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/outbox"
	redisstore "github.com/heraldgw/herald/store/redis"
)

// Defaults for CronOptions.
const (
	DefaultCronJobs      = 10000
	DefaultCronEvery     = time.Minute
	DefaultCronDuration  = 2 * time.Minute
	DefaultCronInstances = 3
)

// The targets the figures are printed beside: the lateness's on Redis,
// and on SQLite, whose one writer commits every fire's writes.
const (
	TargetCronLatenessP99Ms       = 1000.0
	TargetCronLatenessP99MsSQLite = 2000.0
	TargetCronDoubleFires         = 0
)

// CronLatenessTarget is the lateness p99 target on store.
func CronLatenessTarget(store string) float64 {
	if store == "sqlite" {
		return TargetCronLatenessP99MsSQLite
	}
	return TargetCronLatenessP99Ms
}

// cronCreators is how many jobs are written at once before a phase: the
// writes are not measured, only made quickly.
const cronCreators = 32

// CronOptions say what Cron measures.
type CronOptions struct {
	Store string // "sqlite" or "redis"
	// Jobs are made for each phase, all due at the same second and every
	// Every after it; DefaultCronJobs and DefaultCronEvery when 0.
	Jobs  int
	Every time.Duration
	// Duration is how long each phase fires from its first fire: its
	// slots are the first fire and every Every after it within
	// Duration (at least one); DefaultCronDuration when 0.
	Duration time.Duration
	// Instances run the second phase's schedulers on one Redis; it runs
	// only on Redis. DefaultCronInstances when 0; negative skips it.
	Instances int
	RedisURL  string // the Redis to measure; DefaultRedisURL when empty
	TempDir   string // where the SQLite files and the runs' outputs are made (and removed); the system's when empty
}

// CronResult is one run's figures. The JSON names are what
// `herald bench cron --json` prints; scripts read them.
type CronResult struct {
	Store     string  `json:"store"`
	Jobs      int     `json:"jobs"`
	EveryS    float64 `json:"every_s"`
	Slots     int     `json:"slots"`      // fires of each job a phase expects
	MaxFires  int     `json:"max_fires"`  // fires one scheduler runs at once
	CreationS float64 `json:"creation_s"` // writing one phase's jobs, not measured further

	// One scheduler: every job due at the same second, Slots times.
	Single CronPhase `json:"single"`
	// Instances schedulers on one Redis, each with a store connection of
	// its own, over fresh jobs of the same kind; absent on SQLite.
	Multi *CronPhase `json:"multi,omitempty"`

	TargetLatenessP99Ms float64 `json:"target_lateness_p99_ms"`
	TargetDoubleFires   int     `json:"target_double_fires"`
}

// CronPhase is what one phase measured. A fire is one job's run at one
// slot; lateness is its run's StartedAt less its ScheduledAt.
type CronPhase struct {
	Instances int `json:"instances"`
	// Expected is Jobs × Slots. Fires is the fires recorded (the
	// scheduler's Ran hook) at a slot; Missed the expected fires whose
	// agent was not called by the phase's end (before the slot after
	// the last); Double the fires whose agent was called, or that were
	// recorded, more than once, by any instance.
	Expected int `json:"expected"`
	Fires    int `json:"fires"`
	Missed   int `json:"missed"`
	Double   int `json:"double"`
	// Stray counts fires recorded at a time that is not a slot.
	Stray int `json:"stray"`
	// PerInstance is the fires each instance recorded, in instance order.
	PerInstance   []int   `json:"per_instance"`
	LatenessP50Ms float64 `json:"lateness_p50_ms"`
	LatenessP99Ms float64 `json:"lateness_p99_ms"`
	LatenessMaxMs float64 `json:"lateness_max_ms"`
	// SlotP99Ms is each slot's own lateness p99, in slot order: in the
	// first, the file system may still be writing out the jobs' output
	// directories made with them, and on the second and third instances
	// of the second phase a job's first fire makes its directory there.
	SlotP99Ms []float64 `json:"slot_lateness_p99_ms"`
	// SlotDoneS is the longest a slot took, from its time to its last
	// fire's run ending.
	SlotDoneS float64 `json:"slot_done_s"`
	// CPU used from the schedulers' start to the phase's end, per 1,000
	// fires recorded: this process's (all its schedulers), and on Redis
	// the server's.
	CPUMsPer1000       float64 `json:"cpu_ms_per_1000_fires"`
	ServerCPUMsPer1000 float64 `json:"server_cpu_ms_per_1000_fires,omitempty"`
	// Warnings the schedulers logged, and the first of them.
	Warnings     int    `json:"warnings"`
	FirstWarning string `json:"first_warning,omitempty"`
}

// Cron runs the cron benchmark: one scheduler over Jobs jobs, then, on
// Redis, Instances schedulers over as many fresh ones.
func Cron(ctx context.Context, opt CronOptions) (CronResult, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return CronResult{}, err
	}
	res := CronResult{
		Store:               opt.Store,
		Jobs:                opt.Jobs,
		EveryS:              opt.Every.Seconds(),
		Slots:               cronSlots(opt),
		MaxFires:            cronjobs.DefaultMaxFires,
		TargetLatenessP99Ms: CronLatenessTarget(opt.Store),
		TargetDoubleFires:   TargetCronDoubleFires,
	}
	return onBackend(ctx, opt.Store, opt.TempDir, redisTarget{URL: opt.RedisURL}, 1, func(b backend) (CronResult, error) {
		single, took, err := runCronPhase(ctx, b, opt, "c1:", 1)
		if err != nil {
			return res, fmt.Errorf("one instance: %w", err)
		}
		res.Single, res.CreationS = single, took.Seconds()
		if _, ok := b.(*redisBackend); !ok || opt.Instances < 1 {
			return res, nil
		}
		multi, _, err := runCronPhase(ctx, b, opt, "c2:", opt.Instances)
		if err != nil {
			return res, fmt.Errorf("%d instances: %w", opt.Instances, err)
		}
		res.Multi = &multi
		return res, nil
	})
}

func (opt CronOptions) withDefaults() (CronOptions, error) {
	if opt.Jobs == 0 {
		opt.Jobs = DefaultCronJobs
	}
	if opt.Every == 0 {
		opt.Every = DefaultCronEvery
	}
	if opt.Duration == 0 {
		opt.Duration = DefaultCronDuration
	}
	if opt.Instances == 0 {
		opt.Instances = DefaultCronInstances
	}
	if opt.RedisURL == "" {
		opt.RedisURL = DefaultRedisURL
	}
	switch {
	case opt.Store != "sqlite" && opt.Store != "redis":
		return opt, fmt.Errorf("unknown store %q; want sqlite or redis", opt.Store)
	case opt.Jobs < 1:
		return opt, fmt.Errorf("jobs must be positive, got %d", opt.Jobs)
	case opt.Every < cronjobs.MinEvery:
		return opt, fmt.Errorf("the jobs' interval must be at least %s, got %s", cronjobs.MinEvery, opt.Every)
	case opt.Duration < 0:
		return opt, fmt.Errorf("the duration may not be negative")
	}
	return opt, nil
}

// cronSlots is how many times each job fires in a phase: the first fire
// and those within Duration of it, at least one.
func cronSlots(opt CronOptions) int {
	return max(1, int((opt.Duration+opt.Every-1)/opt.Every))
}

// cronDB is what a scheduler needs of an opened store.
type cronDB interface {
	Cron() cronjobs.Store
	Once() lease.OnceStore
	Outbox() outbox.Store
	Close() error
}

// openCronStore opens herald's store on b; on Redis a connection of its
// own under the run's prefix and sub, so that each instance of a phase
// has one.
func openCronStore(ctx context.Context, b backend, redisURL, sub string) (cronDB, error) {
	if rb, ok := b.(*redisBackend); ok {
		return redisstore.Open(ctx, redisstore.Options{URL: redisURL, Prefix: rb.prefix + sub})
	}
	s, err := b.open(ctx)
	if err != nil {
		return nil, err
	}
	db, ok := s.(cronDB)
	if !ok {
		s.Close()
		return nil, errors.New("the store keeps no cron jobs")
	}
	return db, nil
}

// runCronPhase makes opt.Jobs jobs under sub, all first due at one
// second a little ahead, runs instances schedulers over them until every
// slot's fires were recorded or the slot after the last came near, and
// measures. It returns the phase and how long writing the jobs took.
func runCronPhase(ctx context.Context, b backend, opt CronOptions, sub string, instances int) (_ CronPhase, _ time.Duration, err error) {
	dbs := make([]cronDB, 0, instances)
	defer func() {
		for _, db := range dbs {
			if cerr := db.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("closing the store: %w", cerr)
			}
		}
	}()
	for range instances {
		db, err := openCronStore(ctx, b, opt.RedisURL, sub)
		if err != nil {
			return CronPhase{}, 0, fmt.Errorf("opening the %s store: %w", opt.Store, err)
		}
		dbs = append(dbs, db)
	}
	home, err := os.MkdirTemp(opt.TempDir, "herald-bench-cron-")
	if err != nil {
		return CronPhase{}, 0, err
	}
	defer func() {
		if rerr := os.RemoveAll(home); err == nil && rerr != nil {
			err = rerr
		}
	}()

	created := time.Now()
	first := created.Add(cronLead(opt.Jobs)).Truncate(time.Second).Add(time.Second)
	// The jobs are made on the first instance, as through its gateway: their
	// output directories are made there with them, and the other
	// instances make theirs at a job's first fire.
	outputs := func(name string) cronjobs.Outputs {
		return cronjobs.Outputs{Dir: filepath.Join(home, name, "cron", "output")}
	}
	if err := makeCronJobs(ctx, dbs[0].Cron(), outputs(cronInstance(0)), opt, first); err != nil {
		return CronPhase{}, 0, fmt.Errorf("making the jobs: %w", err)
	}
	took := time.Since(created)
	if late := time.Until(first); late < 200*time.Millisecond {
		return CronPhase{}, took, fmt.Errorf("writing %d jobs took %s, past the time they were made due at; try fewer --jobs", opt.Jobs, took.Round(time.Millisecond))
	}

	slots := make([]time.Time, cronSlots(opt))
	for i := range slots {
		slots[i] = first.Add(time.Duration(i) * opt.Every)
	}
	rec := newCronRecord(slots, opt.Jobs, instances)
	warn := &warnCounter{}
	log := slog.New(warn)
	scheds := make([]*cronjobs.Scheduler, 0, instances)
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, s := range scheds {
			if serr := s.Shutdown(sctx); err == nil && serr != nil {
				err = fmt.Errorf("stopping a scheduler: %w", serr)
			}
		}
	}()
	at := readCPU(ctx, b)
	for i, db := range dbs {
		name := cronInstance(i)
		s, err := cronjobs.NewScheduler(cronjobs.SchedulerOptions{
			Store: db.Cron(), Once: db.Once(), Outbox: db.Outbox(),
			Agent:   rec.agent,
			Outputs: outputs(name),
			Name:    name,
			Ran:     func(r cronjobs.Run) { rec.ran(i, r) },
			Logger:  log.With("instance", name),
		})
		if err != nil {
			return CronPhase{}, took, err
		}
		if err := s.Start(ctx); err != nil {
			return CronPhase{}, took, err
		}
		scheds = append(scheds, s)
	}

	// The phase ends once every slot's fires were recorded, or just
	// before the slot after the last, whose fires are not counted.
	end := slots[len(slots)-1].Add(opt.Every - min(opt.Every/10, time.Second))
	wait := time.NewTimer(time.Until(end))
	defer wait.Stop()
	select {
	case <-rec.complete:
	case <-wait.C:
	case <-ctx.Done():
		return CronPhase{}, took, ctx.Err()
	}
	cpu := cpuUse{}
	cpu.add(at, readCPU(ctx, b))

	p := rec.phase()
	p.Instances = instances
	// perItem is µs a fire, which is ms per 1,000 fires.
	p.CPUMsPer1000, p.ServerCPUMsPer1000 = cpu.perItem(p.Fires)
	p.Warnings, p.FirstWarning = warn.counts()
	return p, took, nil
}

// cronLead is how far ahead of their writing the jobs are first due:
// enough to write them all, each with its output directory, with room
// for a slow minute of the disk.
func cronLead(jobs int) time.Duration {
	return 2*time.Second + time.Duration(jobs)*1500*time.Microsecond
}

// cronInstance is the name of the phase's i-th scheduler.
func cronInstance(i int) string { return "bench-" + strconv.Itoa(i+1) }

// makeCronJobs writes opt.Jobs jobs as a person would make them
// (cronjobs.Manager.New: every opt.Every, delivered locally; Made, their
// output directories made under outputs), each first due at first,
// cronCreators at a time.
func makeCronJobs(ctx context.Context, store cronjobs.Store, outputs cronjobs.Outputs, opt CronOptions, first time.Time) error {
	m := cronjobs.Manager{Store: store, Outputs: outputs, Timezone: "UTC"}
	spec := cronjobs.Spec{
		Schedule:  "every " + opt.Every.String(),
		Prompt:    "Report how things stand.",
		Deliver:   cronjobs.TargetLocal,
		CreatedBy: "bench",
	}
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		errc = make(chan error, cronCreators)
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(cronCreators, opt.Jobs) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(opt.Jobs) {
					return
				}
				s := spec
				s.Name = "bench " + strconv.FormatInt(i, 10)
				j, err := m.New(s)
				if err == nil {
					j.NextRunAt = first
					if j, err = store.CreateJob(ctx, j); err == nil {
						m.Made(j)
					}
				}
				if err != nil {
					errc <- err
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// cronRecord keeps what the schedulers of a phase did: each fire's
// agent calls and its recorded runs.
type cronRecord struct {
	slots    map[int64]bool // the slots' unix seconds
	order    []int64        // the same, in order
	expected int
	complete chan struct{} // closed when every expected fire was recorded

	mu       sync.Mutex
	calls    map[string]int // fire id → agent calls
	runs     map[string]int // fire id → runs recorded
	inSlot   int            // distinct fires recorded at a slot
	lateness []time.Duration
	bySlot   map[int64][]time.Duration
	stray    int
	perInst  []int
	slotDone map[int64]time.Time // slot → the last end of its fires' runs
}

func newCronRecord(slots []time.Time, jobs, instances int) *cronRecord {
	r := &cronRecord{
		slots:    map[int64]bool{},
		expected: jobs * len(slots),
		complete: make(chan struct{}),
		calls:    map[string]int{},
		runs:     map[string]int{},
		perInst:  make([]int, instances),
		slotDone: map[int64]time.Time{},
		bySlot:   map[int64][]time.Duration{},
	}
	for _, s := range slots {
		r.slots[s.Unix()] = true
		r.order = append(r.order, s.Unix())
	}
	return r
}

// agent answers at once, so what a fire costs is the scheduler's.
func (r *cronRecord) agent(_ context.Context, _ cronjobs.Job, run cronjobs.Run, _ string) (string, error) {
	r.mu.Lock()
	r.calls[run.Fire]++
	r.mu.Unlock()
	return "All well.", nil
}

func (r *cronRecord) ran(instance int, run cronjobs.Run) {
	r.mu.Lock()
	defer r.mu.Unlock()
	slot := run.ScheduledAt.Unix()
	if !r.slots[slot] || !run.ScheduledAt.Equal(time.Unix(slot, 0)) {
		r.stray++
		return
	}
	r.perInst[instance]++
	late := run.StartedAt.Sub(run.ScheduledAt)
	r.lateness = append(r.lateness, late)
	r.bySlot[slot] = append(r.bySlot[slot], late)
	if run.EndedAt.After(r.slotDone[slot]) {
		r.slotDone[slot] = run.EndedAt
	}
	r.runs[run.Fire]++
	if r.runs[run.Fire] == 1 {
		r.inSlot++
		if r.inSlot == r.expected {
			close(r.complete)
		}
	}
}

// phase is the record's figures, without CPU.
func (r *cronRecord) phase() CronPhase {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := CronPhase{
		Expected:    r.expected,
		Fires:       len(r.lateness),
		Stray:       r.stray,
		PerInstance: slices.Clone(r.perInst),
	}
	ran := 0
	for id := range r.calls {
		if at, err := fireSlot(id); err == nil && r.slots[at] {
			ran++
		}
	}
	// A fire is double when its agent was called, or its run recorded,
	// more than once.
	for id := range r.calls {
		if r.calls[id] > 1 || r.runs[id] > 1 {
			p.Double++
		}
	}
	for id := range r.runs {
		if _, called := r.calls[id]; !called && r.runs[id] > 1 {
			p.Double++
		}
	}
	p.Missed = max(0, r.expected-ran)
	lat := sorted(r.lateness)
	p.LatenessP50Ms, p.LatenessP99Ms = ms(percentile(lat, 50)), ms(percentile(lat, 99))
	if len(lat) > 0 {
		p.LatenessMaxMs = ms(lat[len(lat)-1])
	}
	for _, slot := range r.order {
		p.SlotP99Ms = append(p.SlotP99Ms, ms(percentile(sorted(r.bySlot[slot]), 99)))
	}
	for slot, done := range r.slotDone {
		p.SlotDoneS = max(p.SlotDoneS, done.Sub(time.Unix(slot, 0)).Seconds())
	}
	return p
}

// fireSlot is the unix second a scheduled fire's identity names
// (cron:<job>:<unix s>).
func fireSlot(id string) (int64, error) {
	return strconv.ParseInt(id[strings.LastIndexByte(id, ':')+1:], 10, 64)
}

// warnCounter is a slog.Handler that counts the warnings and errors
// logged and keeps the first.
type warnCounter struct {
	mu    sync.Mutex
	n     int
	first string
}

func (w *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnCounter) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 {
		w.first = r.Message
		r.Attrs(func(a slog.Attr) bool {
			w.first += " " + a.String()
			return true
		})
	}
	w.n++
	return nil
}

func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnCounter) WithGroup(string) slog.Handler      { return w }

func (w *warnCounter) counts() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n, w.first
}
