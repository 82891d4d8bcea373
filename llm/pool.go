package llm

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// The orders a pool offers its keys in (model.strategy).
const (
	// FillFirst uses the key of the lowest priority number until it
	// cools, then the next.
	FillFirst = "fill_first"
	// RoundRobin takes the key whose last use is the oldest.
	RoundRobin = "round_robin"
	// LeastUsed takes the key with the fewest uses.
	LeastUsed = "least_used"
	// Random takes any key that is not cooling.
	Random = "random"
)

// Strategies are the strategies a pool knows, the default first.
var Strategies = []string{FillFirst, RoundRobin, LeastUsed, Random}

// How long a key cools after a failure that says nothing of its own.
const (
	DefaultRateLimitCooldown = time.Minute
	DefaultBillingCooldown   = time.Hour
	DefaultAuthCooldown      = 5 * time.Minute
)

// Credential is one API key of a pool.
type Credential struct {
	Key      string
	Priority int    // fill_first takes the lowest first; ties in the given order
	Label    string // shown beside the masked key
}

// Cooldowns are how long a key is left alone after a failure whose
// answer names no reset time; 0 takes the default.
type Cooldowns struct {
	RateLimit time.Duration // a second 429 in a row, or a spent usage limit
	Billing   time.Duration // 402, or a 400/403/429 about billing
	Auth      time.Duration // 401 not saying the key is revoked, or a 403 not about billing, the model, a permission or a region
}

func (c Cooldowns) withDefaults() Cooldowns {
	c.RateLimit = cmp.Or(c.RateLimit, DefaultRateLimitCooldown)
	c.Billing = cmp.Or(c.Billing, DefaultBillingCooldown)
	c.Auth = cmp.Or(c.Auth, DefaultAuthCooldown)
	return c
}

// KeyState is what the store keeps of one key, for every process that
// uses the pool.
type KeyState struct {
	ID           string    // KeyID of the key; the key itself is never stored
	CoolingUntil time.Time // the key is not offered before; zero: not cooling
	Reason       Class     // the failure that cooled or killed it
	// DeadFor, when not "", is the key found revoked: it is dead for
	// every pool of the store's name (the host) that holds it, until
	// revived (ReviveKey). It names the Generation of the pool that found
	// it, for a person reading the store; "" for a live key.
	DeadFor string
	Uses    int64 // requests it was chosen for
	LastUse int64 // the pool's use number at its last use; round_robin's order
}

// StickyTTL is how long a pool's store remembers the key a
// conversation last used: a conversation silent for longer chooses
// again, and the store forgets it.
const StickyTTL = 24 * time.Hour

// PoolRead is what a request reads of its pool before it chooses a key.
type PoolRead struct {
	Now  time.Time  // the store's clock
	Keys []KeyState // in no order; a key never marked nor used has none
	// Sticky is the id of the key the conversation read for was last
	// given, within StickyTTL by the store's clock; "" when none.
	Sticky string
}

// PoolStore keeps credential pools' key states, and the key each
// conversation uses, where every process on the store sees them.
type PoolStore interface {
	// Now is the store's clock, which cooling is read by.
	Now(ctx context.Context) (time.Time, error)
	// ReadPool reads, in one step, the store's clock, the states stored
	// for the keys of pool and the key conv (may be "") last used.
	ReadPool(ctx context.Context, pool, conv string) (PoolRead, error)
	// MarkKey marks key s.ID of pool cooling or dead, in one step, only
	// ever lengthening: it cools until the later of the kept and the new
	// CoolingUntil, keeps DeadFor unless s sets it, and takes s.Reason
	// when s kills the key or cools a live one longer; the uses are kept.
	// So a failure of a request in flight on a key already set aside for
	// longer changes nothing. Errors: Invalid for an empty pool or id.
	MarkKey(ctx context.Context, pool string, s KeyState) error
	// ReviveKey clears the cooling and dead marks of key id of pool,
	// keeping its uses: what a person does for a key found revoked that
	// the provider took back. Errors: Invalid for an empty pool or id.
	ReviveKey(ctx context.Context, pool, id string) error
	// UseKey counts one use of key id of pool and gives it the pool's
	// next use number; with conv not "", in the same step, id becomes
	// conv's key, remembered for StickyTTL, and conversations of pool
	// past their StickyTTL may be forgotten. Errors: Invalid for an
	// empty pool or id.
	UseKey(ctx context.Context, pool, id, conv string) error
	// CountUses counts, in one step, uses[i].N more uses of each key
	// uses[i].ID of pool, in order: each key's last use number is the
	// pool's after its own, so the last in uses is the pool's most
	// recently used. What a pool counted in memory since it last wrote
	// comes in one call. Errors: Invalid for an empty pool or id, or a
	// count below 1.
	CountUses(ctx context.Context, pool string, uses []KeyUses) error
}

// KeyUses is how many uses of one key a pool counted since it last
// wrote them (PoolStore.CountUses).
type KeyUses struct {
	ID string
	N  int64
}

// CheckUses refuses a CountUses a store must not take; op names the
// store's operation.
func CheckUses(op, pool string, uses []KeyUses) error {
	if pool == "" {
		return errs.E(op, errs.Invalid, "a pool key needs a pool name")
	}
	for _, u := range uses {
		if u.ID == "" || u.N < 1 {
			return errs.E(op, errs.Invalid, "a count of %d uses of key %q: want an id and 1 or more", u.N, u.ID)
		}
	}
	return nil
}

// KeyID is the name a key is kept and shown under: a digest, from which
// the key cannot be read back.
func KeyID(key string) string {
	sum := sha256.Sum256([]byte("herald key " + key))
	return "k_" + hex.EncodeToString(sum[:6])
}

// MaskKey is a key as a person may see it: its last four characters.
func MaskKey(key string) string {
	switch {
	case key == "":
		return "(none)"
	case len(key) < 12:
		return "****"
	}
	return "****" + key[len(key)-4:]
}

// Observer is told what pools and chains do with keys and models, for
// an operator's counters (the gateway's metrics). Its methods must not
// block.
type Observer interface {
	// KeyCooled: a key of pool was set aside after a failure; reason is
	// its class, or "revoked" for a key found dead.
	KeyCooled(pool, reason string)
	// KeyRotated: a request left a key of pool for another of it after a
	// failure of class reason.
	KeyRotated(pool string, reason Class)
	// FellBack: a request went on from provider from to provider to
	// after a failure of class reason.
	FellBack(from, to string, reason Class)
}

// Revoked is the reason Observer.KeyCooled gives a key found dead.
const Revoked = "revoked"

// PoolOptions configure a Pool.
type PoolOptions struct {
	// Name is the pool's name in the store. Processes that share a
	// store and a name share the keys' states.
	Name        string
	Credentials []Credential // none: one empty key, for servers that take none
	Strategy    string       // one of Strategies; "" is FillFirst
	Cooldowns   Cooldowns
	// Store keeps the keys' states; nil keeps them in this process only.
	Store  PoolStore
	Clock  clock.Clock // the in-process store's clock; nil is the wall clock
	Logger *slog.Logger
	// Rand picks for the random strategy: a number in [0, n). nil is
	// math/rand.
	Rand func(n int) int
	// Observer, when set, is told of coolings and rotations.
	Observer Observer
	// Fallback says a model comes after the pool's in its chain
	// (model.fallbacks). A pool of one key marks it (cooling, dead) only
	// then: a refusal of the only key with nowhere to go is answered as
	// what it is, and the next request tries the key again.
	Fallback bool
	// Setting names where the pool's keys are configured, as a person
	// is told to check them ("HERALD_MODEL_API_KEY / model.api_key");
	// "" is the main model's.
	Setting string
	// Marked, when set, is called after the pool marked or revived one
	// of its keys in the store: the gateway tells the other processes
	// on the store (a signal), whose pools then read the store again
	// (Pool.Forget) rather than go on with the view they hold.
	Marked func(ctx context.Context, pool string)
}

// Pool is the API keys of one model provider and the state of each: a
// key is chosen per request (sticking to a conversation's key while it
// is healthy, for every process sharing the store), and a failure the
// server blamed on the key cools it or marks it dead, for every process
// sharing the store. Clients take it
// in OpenAIOptions.Pool; one pool may serve several clients (the main
// model's, delegation children's, kanban workers'), which then share
// its state.
type Pool struct {
	name       string
	keys       []poolKey
	strategy   string
	cooldowns  Cooldowns
	store      PoolStore
	generation string
	log        *slog.Logger
	rand       func(n int) int
	observer   Observer
	setting    string
	// alone: one key and no fallback, so nothing to move to. Its key is
	// neither cooled nor killed for a refusal (auth, billing), and a
	// mark another pool left on it does not keep it from the requests.
	alone  bool
	marked func(ctx context.Context, pool string)
	clock  clock.Clock
	view   poolView
}

// poolKey is one key of a pool.
type poolKey struct {
	id, secret, label string
	priority, index   int
}

// NewPool returns a pool of opts.Credentials; the same key given twice
// is one key. Errors: Invalid for an unknown strategy or an empty name.
func NewPool(opts PoolOptions) (*Pool, error) {
	const op = "llm.NewPool"
	if opts.Name == "" {
		return nil, errs.E(op, errs.Invalid, "a credential pool needs a name")
	}
	strategy := cmp.Or(opts.Strategy, FillFirst)
	if !slices.Contains(Strategies, strategy) {
		return nil, errs.E(op, errs.Invalid, "unknown credential strategy %q (want one of %s)", strategy, strings.Join(Strategies, ", "))
	}
	creds := opts.Credentials
	if len(creds) == 0 {
		creds = []Credential{{}}
	}
	p := &Pool{
		name:      opts.Name,
		strategy:  strategy,
		cooldowns: opts.Cooldowns.withDefaults(),
		store:     opts.Store,
		log:       cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)),
		rand:      opts.Rand,
		observer:  opts.Observer,
		setting:   opts.Setting,
		marked:    opts.Marked,
		clock:     opts.Clock,
	}
	if p.clock == nil {
		p.clock = clock.Real{}
	}
	if p.store == nil {
		p.store = NewMemoryPoolStore(opts.Clock)
	}
	if p.rand == nil {
		p.rand = rand.IntN
	}
	gen := sha256.New()
	seen := map[string]bool{}
	for _, c := range creds {
		id := KeyID(c.Key)
		if seen[id] {
			continue
		}
		seen[id] = true
		p.keys = append(p.keys, poolKey{id: id, secret: c.Key, label: c.Label, priority: c.Priority, index: len(p.keys)})
		fmt.Fprintf(gen, "%s\x00", id)
	}
	p.generation = hex.EncodeToString(gen.Sum(nil)[:6])
	p.alone = len(p.keys) == 1 && !opts.Fallback
	return p, nil
}

// Name is the pool's name in the store.
func (p *Pool) Name() string { return p.name }

// Len is how many keys the pool has.
func (p *Pool) Len() int { return len(p.keys) }

// Generation names the pool's set of keys, kept in a dead mark for a
// person reading the store.
func (p *Pool) Generation() string { return p.generation }

// Revive clears the marks of the pool's key id (a KeyID), dead or
// cooling, for every process on the store. Errors: NotFound when the
// pool has no key of that id.
func (p *Pool) Revive(ctx context.Context, id string) error {
	if !slices.ContainsFunc(p.keys, func(k poolKey) bool { return k.id == id }) {
		return errs.E("llm.Pool.Revive", errs.NotFound, "pool %s has no key %s", p.name, id)
	}
	if err := p.store.ReviveKey(ctx, p.name, id); err != nil {
		return err
	}
	p.Forget()
	if p.marked != nil {
		p.marked(ctx, p.name)
	}
	return nil
}

// Revive clears the marks of key id in each of pools that holds it, and
// returns those it cleared them in. Pools of one name are one pool in
// the store: the first of them that holds the key clears it for all.
// Errors: NotFound when none holds it; the store's, naming the pool,
// with the pools cleared before it.
func Revive(ctx context.Context, pools []*Pool, id string) ([]*Pool, error) {
	var revived []*Pool
	done := map[string]bool{}
	for _, p := range pools {
		if done[p.name] {
			continue
		}
		err := p.Revive(ctx, id)
		if errs.CodeOf(err) == errs.NotFound {
			continue
		}
		if err != nil {
			return revived, fmt.Errorf("pool %s: %w", p.name, err)
		}
		done[p.name] = true
		revived = append(revived, p)
	}
	if len(revived) == 0 {
		return nil, errs.E("llm.Revive", errs.NotFound, "no pool has a key %s", id)
	}
	return revived, nil
}

// Choose is what a request pays the pool before its first attempt: it
// reads the keys' states, chooses the key for a request of conversation
// conv (may be "") and counts its use. It returns the key's id; the
// clients call it for every request through their Pool.
func (p *Pool) Choose(ctx context.Context, conv string) (string, error) {
	k, e := p.pick(ctx, conv, nil, nil)
	if e != nil {
		return "", fail(e)
	}
	return k.id, nil
}

// KeyStatus is one key of a pool as `herald model keys` shows it.
type KeyStatus struct {
	ID           string    `json:"id"`
	Key          string    `json:"key"` // masked
	Label        string    `json:"label,omitempty"`
	Priority     int       `json:"priority"`
	Status       string    `json:"status"` // "ok", "cooling" or "dead"
	CoolingUntil time.Time `json:"cooling_until,omitzero"`
	Reason       Class     `json:"reason,omitempty"`
	Uses         int64     `json:"uses"`
}

// ModelKey is a key of a model's pool, as `herald model keys --json`
// and GET /api/v1/model/keys show it: masked, never the key itself.
type ModelKey struct {
	Model string `json:"model"` // model@host
	Pool  string `json:"pool"`
	KeyStatus
}

// Status reads the state of each of the pool's keys, in the pool's order.
func (p *Pool) Status(ctx context.Context) ([]KeyStatus, error) {
	p.Flush(ctx)
	now, states, _, err := p.read(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]KeyStatus, 0, len(p.keys))
	for _, k := range p.keys {
		st := states[k.id]
		s := KeyStatus{ID: k.id, Key: MaskKey(k.secret), Label: k.label, Priority: k.priority, Status: "ok", Uses: st.Uses}
		switch {
		case p.dead(st):
			s.Status, s.Reason = "dead", st.Reason
		case st.CoolingUntil.After(now):
			s.Status, s.CoolingUntil, s.Reason = "cooling", st.CoolingUntil, st.Reason
		}
		out = append(out, s)
	}
	return out, nil
}

// read reads the pool's key states by id, and conv's key.
func (p *Pool) read(ctx context.Context, conv string) (time.Time, map[string]KeyState, string, error) {
	r, err := p.store.ReadPool(ctx, p.name, conv)
	if err != nil {
		return r.Now, nil, "", err
	}
	m := make(map[string]KeyState, len(r.Keys))
	for _, s := range r.Keys {
		m[s.ID] = s
	}
	return r.Now, m, r.Sticky, nil
}

// dead: the key was found revoked, by this pool or any other of its
// name that holds it (a key's id is its digest, the same in each).
func (p *Pool) dead(st KeyState) bool { return st.DeadFor != "" }

// pick chooses the key for a request of conversation conv (may be ""),
// leaving out the keys in tried: conv's key while it is offered, else
// one by the pool's strategy. With none to offer it returns the error
// saying until when every key cools, or that all are dead; lastErr,
// the failure that made the request leave its last key, is its cause.
func (p *Pool) pick(ctx context.Context, conv string, tried map[string]bool, lastErr *Error) (*poolKey, *Error) {
	now, states, sticky, err := p.snapshot(ctx, conv)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &Error{Class: ClassCanceled, Err: ctx.Err()}
		}
		// The store being unreachable must not stop the model: the keys
		// are offered as if nothing were known of them.
		p.log.Warn("reading the credential pool's state failed; choosing without it", "pool", p.name, "err", err)
		states = map[string]KeyState{}
	}
	var (
		offered []*poolKey
		until   time.Time
		dead    int
		reasons []string
	)
	for i := range p.keys {
		k := &p.keys[i]
		st := p.effective(states[k.id])
		switch {
		case p.dead(st):
			dead++
		case st.CoolingUntil.After(now):
			if until.IsZero() || st.CoolingUntil.Before(until) {
				until = st.CoolingUntil
			}
			reasons = append(reasons, reasonWords(st.Reason))
		case tried[k.id]:
			// Left this request without a mark the store kept: it comes
			// back at once for the next.
			if until.IsZero() || now.Before(until) {
				until = now
			}
		default:
			offered = append(offered, k)
		}
	}
	if len(offered) == 0 {
		e := &Error{Class: ClassRateLimited, Keys: len(p.keys), Dead: dead, Until: until}
		if dead == len(p.keys) {
			e.Class = ClassAuth
		}
		if until.After(now) {
			// What a caller that can wait (a kanban card's requeue) waits.
			e.RetryAfter = until.Sub(now)
		}
		slices.Sort(reasons)
		e.Message = strings.Join(slices.Compact(reasons), ", ")
		if lastErr != nil {
			e.Err = lastErr
		}
		return nil, e
	}
	k := p.choose(sticky, offered, states)
	if lastErr != nil && p.observer != nil {
		p.observer.KeyRotated(p.name, lastErr.Class)
	}
	p.used(ctx, k, conv)
	return k, nil
}

// effective is st as the pool acts on it: the only key, with nowhere to
// go, is tried again whatever mark a refusal left (another pool's, or
// an older herald's).
func (p *Pool) effective(st KeyState) KeyState {
	if p.alone && refusal(st.Reason) {
		return KeyState{}
	}
	return st
}

// refusal reports whether a key set aside for reason was refused (its
// auth or billing), not rate limited.
func refusal(reason Class) bool { return reason == ClassAuth || reason == ClassPayment }

// reasonWords is why a key cools, in a few words.
func reasonWords(c Class) string {
	switch c {
	case ClassRateLimited:
		return "rate limit"
	case ClassPayment:
		return "billing"
	case ClassAuth:
		return "key rejected"
	}
	return string(c)
}

// choose takes the conversation's key, sticky, when it is offered: a
// rotation resets the provider's prompt cache, so a conversation leaves
// its key only when the key cannot serve. Else one by the strategy.
func (p *Pool) choose(sticky string, offered []*poolKey, states map[string]KeyState) *poolKey {
	if sticky != "" {
		for _, k := range offered {
			if k.id == sticky {
				return k
			}
		}
	}
	if p.strategy == Random {
		return offered[p.rand(len(offered))]
	}
	return slices.MinFunc(offered, func(a, b *poolKey) int {
		sa, sb := states[a.id], states[b.id]
		var c int
		switch p.strategy {
		case RoundRobin:
			c = cmp.Compare(sa.LastUse, sb.LastUse)
		case LeastUsed:
			c = cmp.Or(cmp.Compare(sa.Uses, sb.Uses), cmp.Compare(sa.LastUse, sb.LastUse))
		default:
			c = cmp.Compare(a.priority, b.priority)
		}
		return cmp.Or(c, cmp.Compare(a.index, b.index))
	})
}

// keyAction is what a request does after a failure on its key.
type keyAction int

const (
	keyFail   keyAction = iota // give up: the failure is not the key's, nor one a retry helps
	keyRetry                   // try the same key again, as a retry
	keyRotate                  // leave the key, take another; not a retry
)

// failed acts on e, the failure of an attempt with k: it marks the key
// where the failure is the key's and says what the request does next.
// limited counts the 429s on k in this request; canRetry says whether
// the request's retries allow another; maxWait bounds a Retry-After
// that is waited for.
func (p *Pool) failed(ctx context.Context, k *poolKey, e *Error, limited *int, canRetry bool, maxWait time.Duration) keyAction {
	switch e.Class {
	case ClassTimeout, ClassUnavailable:
		// The server's trouble, not the key's: the same key, after the
		// wait it asked for when the client waits that long.
		if canRetry && e.RetryAfter <= maxWait {
			return keyRetry
		}
		return keyFail
	case ClassRateLimited:
		if !e.QuotaSpent && *limited == 0 && canRetry && e.RetryAfter <= maxWait {
			*limited++
			return keyRetry
		}
		// A rate limit's Retry-After is the server's word for this key; the
		// reset headers beside it cover every limit, some far off. A spent
		// quota's reset is when it is back.
		at, in := e.ResetAt, e.ResetIn
		if !e.QuotaSpent && e.RetryAfter > 0 {
			at, in = time.Time{}, e.RetryAfter
		}
		p.cool(ctx, k, e, at, in, p.cooldowns.RateLimit)
	case ClassPayment, ClassAuth:
		if p.alone {
			p.log.Warn("the model provider refused the pool's only key, and there is no fallback: the request ends, and the next tries the key again",
				"pool", p.name, "key", k.id, "label", k.label, "class", e.Class, "status", e.Status)
			return keyFail
		}
		if e.Class == ClassPayment {
			p.cool(ctx, k, e, e.ResetAt, e.ResetIn, p.cooldowns.Billing)
			break
		}
		if e.Revoked {
			p.mark(ctx, k, KeyState{ID: k.id, Reason: ClassAuth, DeadFor: p.generation}, Revoked)
			p.log.Warn("model API key rejected as invalid or revoked; it is not used again until it is revived (herald model keys --revive)", "pool", p.name, "key", k.id, "label", k.label, "status", e.Status)
			return keyRotate
		}
		// Rate limit reset headers come with any answer; they do not say
		// when a refused key is let in.
		p.cool(ctx, k, e, time.Time{}, 0, p.cooldowns.Auth)
	default:
		return keyFail
	}
	return keyRotate
}

// cool sets k aside after e until at, when that is to come, else for
// in, else for d. The waits count from the store's clock, which every
// process reads the cooling by; only a time the server named is taken
// as it is.
func (p *Pool) cool(ctx context.Context, k *poolKey, e *Error, at time.Time, in, d time.Duration) {
	now, err := p.store.Now(ctx)
	if err != nil {
		p.log.Warn("reading the store's clock failed; the key is left for this request only", "pool", p.name, "key", k.id, "err", err)
		return
	}
	until := at
	if !until.After(now) {
		until = now.Add(cmp.Or(in, d))
	}
	p.mark(ctx, k, KeyState{ID: k.id, CoolingUntil: until, Reason: e.Class}, string(e.Class))
	p.log.Info("model API key cooling", "pool", p.name, "key", k.id, "label", k.label, "class", e.Class, "status", e.Status, "until", until.UTC().Format(time.RFC3339))
}

// mark keeps s, the key set aside for reason, in the store.
func (p *Pool) mark(ctx context.Context, k *poolKey, s KeyState, reason string) {
	if p.observer != nil {
		p.observer.KeyCooled(p.name, reason)
	}
	if err := p.store.MarkKey(ctx, p.name, s); err != nil {
		p.log.Warn("marking a key failed; it is left for this request only", "pool", p.name, "key", k.id, "err", err)
		return
	}
	p.Forget()
	if p.marked != nil {
		p.marked(ctx, p.name)
	}
}

// MemoryPoolStore is a PoolStore kept in one process, for a pool no
// other process shares.
type MemoryPoolStore struct {
	clk clock.Clock

	mu     sync.Mutex
	pools  map[string]map[string]KeyState
	seq    map[string]int64
	sticky map[string]map[string]stickyUse // pool → conversation → its key
}

// stickyUse is a conversation's key and when it was last given.
type stickyUse struct {
	id string
	at time.Time
}

// maxMemorySticky bounds the conversations a MemoryPoolStore keeps the
// key of, per pool: past it, those past StickyTTL are forgotten, and if
// none is, all.
const maxMemorySticky = 10_000

var _ PoolStore = (*MemoryPoolStore)(nil)

// NewMemoryPoolStore returns an empty store on clk (nil: the wall clock).
func NewMemoryPoolStore(clk clock.Clock) *MemoryPoolStore {
	if clk == nil {
		clk = clock.Real{}
	}
	return &MemoryPoolStore{clk: clk, pools: map[string]map[string]KeyState{}, seq: map[string]int64{}, sticky: map[string]map[string]stickyUse{}}
}

func (m *MemoryPoolStore) Now(context.Context) (time.Time, error) { return m.clk.Now(), nil }

func (m *MemoryPoolStore) ReadPool(_ context.Context, pool, conv string) (PoolRead, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := PoolRead{Now: m.clk.Now(), Keys: make([]KeyState, 0, len(m.pools[pool]))}
	for _, s := range m.pools[pool] {
		r.Keys = append(r.Keys, s)
	}
	if u, ok := m.sticky[pool][conv]; ok && conv != "" && r.Now.Sub(u.at) < StickyTTL {
		r.Sticky = u.id
	}
	return r, nil
}

func (m *MemoryPoolStore) MarkKey(_ context.Context, pool string, s KeyState) error {
	if pool == "" || s.ID == "" {
		return errs.E("llm.MemoryPoolStore.MarkKey", errs.Invalid, "empty pool or key id")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.pool(pool)[s.ID]
	if s.DeadFor != "" || (old.DeadFor == "" && s.CoolingUntil.After(old.CoolingUntil)) {
		old.Reason = s.Reason
	}
	if s.CoolingUntil.After(old.CoolingUntil) {
		old.CoolingUntil = s.CoolingUntil
	}
	old.ID, old.DeadFor = s.ID, cmp.Or(s.DeadFor, old.DeadFor)
	m.pools[pool][s.ID] = old
	return nil
}

func (m *MemoryPoolStore) ReviveKey(_ context.Context, pool, id string) error {
	if pool == "" || id == "" {
		return errs.E("llm.MemoryPoolStore.ReviveKey", errs.Invalid, "empty pool or key id")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.pool(pool)[id]
	if ok {
		s.CoolingUntil, s.Reason, s.DeadFor = time.Time{}, "", ""
		m.pools[pool][id] = s
	}
	return nil
}

func (m *MemoryPoolStore) UseKey(_ context.Context, pool, id, conv string) error {
	if pool == "" || id == "" {
		return errs.E("llm.MemoryPoolStore.UseKey", errs.Invalid, "empty pool or key id")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.pool(pool)[id]
	m.seq[pool]++
	s.ID, s.Uses, s.LastUse = id, s.Uses+1, m.seq[pool]
	m.pools[pool][id] = s
	if conv == "" {
		return nil
	}
	convs := m.sticky[pool]
	if convs == nil {
		convs = map[string]stickyUse{}
		m.sticky[pool] = convs
	}
	now := m.clk.Now()
	if _, ok := convs[conv]; !ok && len(convs) >= maxMemorySticky {
		maps.DeleteFunc(convs, func(_ string, u stickyUse) bool { return now.Sub(u.at) >= StickyTTL })
		if len(convs) >= maxMemorySticky {
			clear(convs)
		}
	}
	convs[conv] = stickyUse{id: id, at: now}
	return nil
}

func (m *MemoryPoolStore) CountUses(_ context.Context, pool string, uses []KeyUses) error {
	if err := CheckUses("llm.MemoryPoolStore.CountUses", pool, uses); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := m.pool(pool)
	for _, u := range uses {
		s := keys[u.ID]
		m.seq[pool] += u.N
		s.ID, s.Uses, s.LastUse = u.ID, s.Uses+u.N, m.seq[pool]
		keys[u.ID] = s
	}
	return nil
}

func (m *MemoryPoolStore) pool(name string) map[string]KeyState {
	if m.pools[name] == nil {
		m.pools[name] = map[string]KeyState{}
	}
	return m.pools[name]
}
