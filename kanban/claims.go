package kanban

import (
	"cmp"
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/proc"
)

// ClaimSpec is a dispatcher's (or `herald kanban claim`'s) claim of a
// card for a lane's worker.
type ClaimSpec struct {
	Owner  string
	Lane   string
	TTL    time.Duration
	Review bool // a reviewer's claim of a card in review
	// Host, PID and ProcStart name the owner's process, when it is a
	// dispatcher's (Claim.OwnerPID).
	Host      string
	PID       int
	ProcStart string
}

// Claim takes a ready card (or, with Review, one in review) for a
// worker: it becomes running with a fresh claim, and a run starts. Of
// several claims at once, one wins; the others get Conflict. A card
// whose parents are not all done is not claimed but sent back to todo
// (Invalid, saying so). Errors: NotFound, Conflict (not claimable: its
// status, a retry delay, or another claim won), Invalid.
func (s *Service) Claim(ctx context.Context, id string, spec ClaimSpec) (Card, error) {
	const op = "kanban.Claim"
	if spec.Owner == "" || spec.TTL <= 0 {
		return Card{}, errs.E(op, errs.Invalid, "a claim needs an owner and a ttl")
	}
	// A card this service just wrote (created) is claimed as it wrote
	// it; any other, or one that cannot be claimed as remembered, is
	// read.
	if k, ok := s.recent.recall(id); ok {
		if got, err := s.claim(ctx, op, k, spec, true); !errors.Is(err, errGuess) {
			return got, err
		}
	}
	k, err := s.read(ctx, op, id)
	if err != nil {
		return Card{}, err
	}
	return s.claim(ctx, op, k, spec, false)
}

// claim decides and writes the claim of k. On a card remembered (guess),
// anything but the claim's write is errGuess, and so is its Conflict.
func (s *Service) claim(ctx context.Context, op string, k Card, spec ClaimSpec, guess bool) (Card, error) {
	want := StatusReady
	if spec.Review {
		want = StatusReview
	}
	// The store stamps the claim's times inside its write; only a card
	// held back until a time needs the clock read to decide.
	now, stamp := StampBase, k.RetryAt.IsZero()
	if guess && (!stamp || k.Status != want) {
		return Card{}, errGuess
	}
	if !stamp {
		var err error
		if now, err = s.Store.Now(ctx); err != nil {
			return Card{}, err
		}
	}
	switch {
	case k.Status != want:
		return Card{}, errs.E(op, errs.Conflict, "%s is %s, not %s", k.ID, k.Status, want)
	case now.Before(k.RetryAt):
		return Card{}, errs.E(op, errs.Conflict, "%s waits until %s before its next run", k.ID, k.RetryAt.Format(time.RFC3339))
	}
	from := k.Version
	done, checks, err := s.parentsDone(ctx, k.Parents)
	if err != nil {
		return Card{}, err
	}
	if !done && guess && !spec.Review {
		return Card{}, errGuess
	}
	if !done && !spec.Review {
		nk, ev := move(k, StatusTodo, now, Event{Kind: EventMoved, Text: "a parent is not done"})
		moved := Change{Cards: []CardWrite{{Card: nk, From: from}}, Check: checks, Events: []Event{ev}, Stamp: stamp}
		_, err := s.Store.Apply(ctx, moved)
		s.recent.forget(moved.Cards)
		if err != nil && !errs.Is(err, errs.Conflict) {
			return Card{}, err
		}
		return Card{}, errs.E(op, errs.Invalid, "%s has parents that are not done; it is back in todo", k.ID)
	}
	lane := LaneName(spec.Lane)
	if lane == "" {
		lane = k.Assignee
	}
	r := Run{ID: NewRunID(), Card: k.ID, Board: k.Board, Lane: lane, Owner: spec.Owner, Review: spec.Review, Started: now}
	k.Claim = &Claim{Owner: spec.Owner, Token: from + 1, Expires: now.Add(spec.TTL), Run: r.ID, Lane: lane, Heartbeat: now, Started: now, Review: spec.Review,
		Host: spec.Host, OwnerPID: spec.PID, OwnerStart: spec.ProcStart}
	k.Status, k.UpdatedAt, k.Waiting = StatusRunning, now, ""
	ev := Event{Board: k.Board, Card: k.ID, Kind: EventClaimed, From: want, To: StatusRunning, Run: r.ID, Actor: spec.Owner, Text: lane, At: now}
	if spec.Review {
		ev.Data = map[string]any{"review": true}
	}
	// A claim is bookkeeping: the complete or release that ends it is
	// durable, and makes it durable too.
	c := Change{Cards: []CardWrite{{Card: k, From: from}}, Check: checks, Runs: []Run{r}, Events: []Event{ev}, Stamp: stamp, Bookkeeping: true}
	evs, err := s.Store.Apply(ctx, c)
	if guess && errs.Is(err, errs.Conflict) {
		return Card{}, errGuess
	}
	s.recent.forget(c.Cards)
	if err != nil {
		return Card{}, err
	}
	k.Version = from + 1
	if stamp {
		if k, err = s.stamped(ctx, k, c, evs); err != nil {
			return Card{}, err
		}
	}
	s.recent.remember(k)
	return k, nil
}

// ClaimGone says what host can see of c's processes: whether its owner
// (the dispatcher that renews it) and its worker are known gone. Both
// are false for a claim of another host, and for a process not named
// (a person's claim has no owner process). An in-process worker (no
// PID of its own) is gone with its owner.
func ClaimGone(c Claim, host string) (ownerGone, workerGone bool) {
	if c.Host == "" || c.Host != host {
		return false, false
	}
	ownerGone = c.OwnerPID > 0 && !proc.Alive(c.OwnerPID, c.OwnerStart)
	switch {
	case c.PID > 0:
		workerGone = !proc.Alive(c.PID, c.ProcStart)
	case c.Spawned:
		workerGone = ownerGone
	}
	return ownerGone, workerGone
}

// reviewing reports whether k's claim is a reviewer's.
func reviewing(k Card) bool { return k.Claim != nil && k.Claim.Review }

// Spawned records the worker process a claim started (PID 0 for an
// in-process worker). Errors: NotFound, LeaseLost.
func (s *Service) Spawned(ctx context.Context, id string, token int64, host string, pid int, procStart string) (Card, error) {
	const op = "kanban.Spawned"
	// The first decision is on the card as this service claimed it, when
	// it remembers it held by token; after a conflict, on the card read.
	read := s.recallHeld(id, token)
	return s.applyStamped(ctx, op, func(now time.Time) (change, error) {
		k, err := s.reread(ctx, op, id, token, &read)
		if err != nil {
			return change{}, err
		}
		if k.Claim == nil {
			return change{}, errs.E(op, errs.LeaseLost, "%s is %s: no worker holds it", k.ID, k.Status)
		}
		from := k.Version
		cl := *k.Claim
		cl.Spawned, cl.Host, cl.PID, cl.ProcStart, cl.Heartbeat = true, host, pid, procStart, now
		k.Claim, k.UpdatedAt = &cl, now
		return change{card: k, remember: true, Change: Change{Cards: []CardWrite{{Card: k, From: from}},
			Events: []Event{{Board: k.Board, Card: k.ID, Kind: EventSpawned, Run: cl.Run, Actor: cl.Owner, At: now, Data: map[string]any{"pid": pid, "host": host}}}}}, nil
	})
}

// Heartbeat extends a claim to ttl from now: its worker is alive. A
// note, when given, is recorded as the worker's progress in the card's
// log. Errors: NotFound, LeaseLost.
func (s *Service) Heartbeat(ctx context.Context, id string, token int64, ttl time.Duration, note string) (Card, error) {
	const op = "kanban.Heartbeat"
	if ttl <= 0 {
		return Card{}, errs.E(op, errs.Invalid, "a heartbeat needs a ttl")
	}
	note = s.mask(note)
	return s.apply(ctx, op, func(now time.Time) (change, error) {
		k, err := s.read(ctx, op, id)
		if err != nil {
			return change{}, err
		}
		if k.Claim == nil {
			return change{}, errs.E(op, errs.LeaseLost, "%s is %s: no worker holds it", k.ID, k.Status)
		}
		if token == 0 {
			token = k.Claim.Token
		}
		if err := checkToken(op, k, token); err != nil {
			return change{}, err
		}
		from := k.Version
		cl := *k.Claim
		cl.Expires, cl.Heartbeat = now.Add(ttl), now
		k.Claim = &cl
		c := change{card: k, Change: Change{Cards: []CardWrite{{Card: k, From: from}}}}
		if note = strings.TrimSpace(note); note != "" {
			c.Events = []Event{{Board: k.Board, Card: k.ID, Kind: "heartbeat", Run: cl.Run, Actor: cl.Owner, Text: note, At: now}}
		}
		return c, nil
	})
}

// Complete ends a worker's run as completed: the card goes to review
// when it asks for one, else to done, and its todo children whose
// parents are all done become ready. A reviewer's complete approves. A
// card with a completion check goes on only when it passes, on the way
// to review as on the way to done; a failing check is a failed run
// (check_failed), counted toward the card's failure limit as a crash is,
// with the check's output as a comment. Every card the result says was
// created must exist on the board. token 0 is a person's complete of a
// card no worker holds. Errors: NotFound, LeaseLost, Invalid (no
// summary, a created card that does not exist, a card that is not
// running, ready or in review, a check this process cannot run).
func (s *Service) Complete(ctx context.Context, id string, token int64, res Result, actor string) (Card, error) {
	const op = "kanban.Complete"
	res.Summary = strings.TrimSpace(res.Summary)
	if res.Summary == "" {
		return Card{}, errs.E(op, errs.Invalid, "a complete needs a summary of what was done")
	}
	res = s.maskResult(res)
	// A card this service claimed (and holds by token) is completed as
	// it wrote it, unless it has a check to run or artifacts to promote,
	// which are decided on the card read.
	var k Card
	if g := s.recallHeld(id, token); g != nil && g.CompletionCheck == "" && len(res.Artifacts) == 0 {
		k = *g
	} else {
		var err error
		if k, err = s.held(ctx, op, id, token); err != nil {
			return Card{}, err
		}
	}
	res, err := s.promoteArtifacts(op, k, res)
	if err != nil {
		return Card{}, err
	}
	for _, cid := range res.CreatedCards {
		c, err := s.Store.Card(ctx, cid)
		if errs.Is(err, errs.NotFound) || (err == nil && c.Board != k.Board) {
			return Card{}, errs.E(op, errs.Invalid, "created card %s does not exist on board %s", cid, k.Board)
		}
		if err != nil {
			return Card{}, err
		}
	}
	check, err := s.runCheck(ctx, op, k)
	if err != nil {
		return Card{}, err
	}
	checked := k.CompletionCheck
	// The first decision is on the card above; after a conflict, on the
	// card read again.
	read := &k
	return s.applyStamped(ctx, op, func(now time.Time) (change, error) {
		k, err := s.reread(ctx, op, id, token, &read)
		if err != nil {
			return change{}, err
		}
		if k.CompletionCheck != checked {
			// The check changed since it ran: the card read is what
			// passes or fails.
			if check, err = s.runCheck(ctx, op, k); err != nil {
				return change{}, err
			}
			checked = k.CompletionCheck
		}
		switch k.Status {
		case StatusRunning, StatusReady, StatusReview, StatusBlocked, StatusTodo:
		default:
			return change{}, errs.E(op, errs.Invalid, "%s is %s: there is nothing to complete", k.ID, k.Status)
		}
		review := reviewing(k)
		from := k.Version
		c := change{}
		if check.failed() {
			k = s.checkFailed(k, &c.Change, now, check, actor)
			c.Cards = []CardWrite{{Card: k, From: from}}
			c.card = k
			return c, nil
		}
		run := endClaim(&k, &c.Change, now, OutcomeCompleted, "", res.Summary)
		switch {
		case k.Review && !review:
			k.Result = &res
			var ev Event
			k, ev = move(k, StatusReview, now, Event{Kind: EventReview, Run: run, Actor: actor, Text: res.Summary})
			c.Events = append(c.Events, ev)
		default:
			if !review {
				k.Result = &res
			}
			k.Failures, k.LastError, k.CompletedAt = 0, "", now
			kind := EventCompleted
			if review {
				kind = EventApproved
			}
			var ev Event
			k, ev = move(k, StatusDone, now, Event{Kind: kind, Run: run, Actor: actor, Text: res.Summary})
			c.Events = append(c.Events, ev)
			promoted, err := s.promoteChildren(ctx, k, now)
			if err != nil {
				return change{}, err
			}
			c.Cards = append(c.Cards, promoted.Cards...)
			c.Check = append(c.Check, promoted.Check...)
			c.Events = append(c.Events, promoted.Events...)
		}
		c.Cards = append([]CardWrite{{Card: k, From: from}}, c.Cards...)
		c.card = k
		return c, nil
	})
}

// recallHeld is the card id as this service last wrote it, when it
// remembers it running under the claim token (a worker's, not 0).
func (s *Service) recallHeld(id string, token int64) *Card {
	k, ok := s.recent.recall(id)
	if !ok || token == 0 || k.Status != StatusRunning || k.Claim == nil || k.Claim.Token != token {
		return nil
	}
	return &k
}

// reread is the card *first when it is set, which it then clears, else
// the card held by token read again.
func (s *Service) reread(ctx context.Context, op, id string, token int64, first **Card) (Card, error) {
	if k := *first; k != nil {
		*first = nil
		return *k, nil
	}
	return s.held(ctx, op, id, token)
}

// checkRun is how a card's completion check went.
type checkRun struct {
	ran, passed bool
	output      string
}

func (r checkRun) failed() bool { return r.ran && !r.passed }

// runCheck runs k's completion check, when it has one. Errors: Invalid
// (this process cannot run checks), and what Check returns.
func (s *Service) runCheck(ctx context.Context, op string, k Card) (checkRun, error) {
	if k.CompletionCheck == "" {
		return checkRun{}, nil
	}
	if s.Check == nil {
		return checkRun{}, errs.E(op, errs.Invalid, "%s has a completion check and this process cannot run it", k.ID)
	}
	out, ok, err := s.Check(ctx, k, s.workspaceDir(ctx, k))
	if err != nil {
		return checkRun{}, err
	}
	return checkRun{ran: true, passed: ok, output: s.mask(out)}, nil
}

// checkFailed is k after its completion check failed: its claim's run
// (when it has one) ends check_failed, the output is a comment and a
// check_failed event, and the failure counts; the card goes back to
// ready (a reviewer's run too: the work is what failed), or, at its
// failure limit, is given up.
func (s *Service) checkFailed(k Card, c *Change, now time.Time, check checkRun, actor string) Card {
	const why = "the completion check failed"
	run := endClaim(&k, c, now, OutcomeCheckFailed, why+": "+tail(check.output, 800), "")
	c.Comments = []Comment{{ID: "cm_" + randomHex(8), Card: k.ID, Author: "completion check", Text: "The completion check failed:\n" + tail(check.output, 4000), At: now}}
	return s.countFailure(k, c, now, failure{run: run, outcome: OutcomeCheckFailed, reason: why, back: StatusReady,
		kind: EventCheckFailed, text: tail(check.output, 2000), actor: actor})
}

// failure is a failed run a card counts.
type failure struct {
	run     string // its id; "" for none
	outcome Outcome
	reason  string
	back    Status // where the card goes while it has tries left
	kind    string // the event of that move
	text    string // its text; "": the reason
	actor   string
}

// countFailure is k with the failure f counted: at its failure limit k
// is blocked with a gave_up event carrying the last error (its run, in
// c, ends gave_up), else it goes back to f.back, held back for the crash
// grace after a crash. The move's event is added to c.
func (s *Service) countFailure(k Card, c *Change, now time.Time, f failure) Card {
	k.Failures++
	k.LastError = f.reason
	var ev Event
	if k.Failures >= s.failureLimit(k) {
		k.BlockKind, k.BlockReason = BlockTransient, "gave up after "+strconv.Itoa(k.Failures)+" failed runs: "+f.reason
		k, ev = move(k, StatusBlocked, now, Event{Kind: EventGaveUp, Run: f.run, Actor: f.actor, Text: f.reason, Data: map[string]any{"failures": k.Failures, "outcome": string(f.outcome)}})
		for i := range c.Runs {
			if c.Runs[i].ID == f.run && f.run != "" {
				c.Runs[i].Outcome = OutcomeGaveUp
				c.Runs[i].Error = string(f.outcome) + ": " + f.reason
			}
		}
		c.Events = append(c.Events, ev)
		return k
	}
	if f.outcome == OutcomeCrashed && s.CrashGrace > 0 {
		k.RetryAt = now.Add(s.CrashGrace)
	}
	k, ev = move(k, f.back, now, Event{Kind: f.kind, Run: f.run, Actor: f.actor, Text: cmp.Or(f.text, f.reason), Data: map[string]any{"failures": k.Failures}})
	c.Events = append(c.Events, ev)
	return k
}

// promoteChildren is the change that makes ready each todo child of k
// (now done) whose other parents are done too.
func (s *Service) promoteChildren(ctx context.Context, k Card, now time.Time) (Change, error) {
	var c Change
	for _, cid := range k.Children {
		child, err := s.Store.Card(ctx, cid)
		if errs.Is(err, errs.NotFound) {
			continue
		}
		if err != nil {
			return c, err
		}
		if child.Status != StatusTodo {
			continue
		}
		others := slices.DeleteFunc(slices.Clone(child.Parents), func(p string) bool { return p == k.ID })
		done, checks, err := s.parentsDone(ctx, others)
		if err != nil {
			return c, err
		}
		if !done {
			continue
		}
		from := child.Version
		nk, ev := move(child, StatusReady, now, Event{Kind: EventPromoted, Text: "every parent is done"})
		c.Cards = append(c.Cards, CardWrite{Card: nk, From: from})
		c.Check = append(c.Check, checks...)
		c.Events = append(c.Events, ev)
	}
	return c, nil
}

// RequestReview ends a worker's run with its work ready for review.
// Errors: NotFound, LeaseLost, Invalid.
func (s *Service) RequestReview(ctx context.Context, id string, token int64, res Result, actor string) (Card, error) {
	const op = "kanban.RequestReview"
	res = s.maskResult(res)
	if len(res.Artifacts) > 0 {
		// The card is read first only when there are artifacts to
		// promote out of its workspace.
		k, err := s.held(ctx, op, id, token)
		if err != nil {
			return Card{}, err
		}
		if res, err = s.promoteArtifacts(op, k, res); err != nil {
			return Card{}, err
		}
	}
	return s.apply(ctx, op, func(now time.Time) (change, error) {
		k, err := s.held(ctx, op, id, token)
		if err != nil {
			return change{}, err
		}
		if k.Status == StatusDone || k.Status == StatusArchived || k.Status == StatusReview {
			return change{}, errs.E(op, errs.Invalid, "%s is %s", k.ID, k.Status)
		}
		from := k.Version
		c := change{}
		run := endClaim(&k, &c.Change, now, OutcomeCompleted, "", res.Summary)
		if strings.TrimSpace(res.Summary) != "" {
			k.Result = &res
		}
		k.Review = true
		var ev Event
		k, ev = move(k, StatusReview, now, Event{Kind: EventReview, Run: run, Actor: actor, Text: res.Summary})
		c.Cards = []CardWrite{{Card: k, From: from}}
		c.Events = []Event{ev}
		c.card = k
		return c, nil
	})
}

// Approve moves a card in review (or its reviewer's running claim) to
// done. Errors: NotFound, LeaseLost, Invalid (not in review).
func (s *Service) Approve(ctx context.Context, id string, token int64, note, actor string) (Card, error) {
	const op = "kanban.Approve"
	k, err := s.read(ctx, op, id)
	if err != nil {
		return Card{}, err
	}
	if k.Status != StatusReview && !(k.Status == StatusRunning && reviewing(k)) {
		return Card{}, errs.E(op, errs.Invalid, "%s is %s, not in review", k.ID, k.Status)
	}
	if k.Status == StatusReview {
		// A person's approval: as a reviewer's complete without a claim.
		return s.finishReview(ctx, op, id, 0, note, actor, true)
	}
	return s.finishReview(ctx, op, id, token, note, actor, true)
}

// RequestChanges sends a card in review back to ready, with the
// reviewer's comments. Errors: NotFound, LeaseLost, Invalid.
func (s *Service) RequestChanges(ctx context.Context, id string, token int64, comments, actor string) (Card, error) {
	const op = "kanban.RequestChanges"
	if strings.TrimSpace(comments) == "" {
		return Card{}, errs.E(op, errs.Invalid, "a request for changes needs comments saying what to change")
	}
	return s.finishReview(ctx, op, id, token, comments, actor, false)
}

// finishReview ends a review: approved → done (its children promoted),
// else → ready with the comments.
func (s *Service) finishReview(ctx context.Context, op, id string, token int64, text, actor string, approved bool) (Card, error) {
	text = s.mask(text)
	var check checkRun
	if approved {
		// An approval makes the card done: its completion check, when it
		// has one, must pass first, as on the worker's complete.
		k, err := s.held(ctx, op, id, token)
		if err != nil {
			return Card{}, err
		}
		if check, err = s.runCheck(ctx, op, k); err != nil {
			return Card{}, err
		}
	}
	return s.apply(ctx, op, func(now time.Time) (change, error) {
		k, err := s.held(ctx, op, id, token)
		if err != nil {
			return change{}, err
		}
		reviewerRun := k.Status == StatusRunning && reviewing(k)
		if k.Status != StatusReview && !reviewerRun {
			return change{}, errs.E(op, errs.Invalid, "%s is %s, not in review", k.ID, k.Status)
		}
		from := k.Version
		c := change{}
		if check.failed() {
			k = s.checkFailed(k, &c.Change, now, check, actor)
			c.Cards = []CardWrite{{Card: k, From: from}}
			c.card = k
			return c, nil
		}
		run := endClaim(&k, &c.Change, now, OutcomeCompleted, "", text)
		var ev Event
		if approved {
			k.CompletedAt, k.Failures = now, 0
			k, ev = move(k, StatusDone, now, Event{Kind: EventApproved, Run: run, Actor: actor, Text: text})
			c.Events = []Event{ev}
			promoted, err := s.promoteChildren(ctx, k, now)
			if err != nil {
				return change{}, err
			}
			c.Cards, c.Check = promoted.Cards, promoted.Check
			c.Events = append(c.Events, promoted.Events...)
		} else {
			k, ev = move(k, StatusReady, now, Event{Kind: EventChanges, Run: run, Actor: actor, Text: text})
			c.Events = []Event{ev}
			c.Comments = []Comment{{ID: "cm_" + randomHex(8), Card: k.ID, Author: actor, Text: text, At: now}}
		}
		c.Cards = append([]CardWrite{{Card: k, From: from}}, c.Cards...)
		c.card = k
		return c, nil
	})
}

// Ending is how a claim that did not end in complete or block ended.
type Ending struct {
	Outcome Outcome // crashed, timed_out, reclaimed, or rate_limited
	Reason  string
	// RetryAfter holds a rate-limited card back this long.
	RetryAfter time.Duration
	// Uncounted ends it without a failure: the gateway stopped it.
	Uncounted bool
}

// Release ends a claim that did not end in complete or block: the worker
// crashed, timed out, never spawned, was reclaimed, or was rate-limited.
// Every outcome but rate_limited counts a failure (unless Uncounted); at
// the card's failure limit it is blocked with a gave_up event carrying
// the last error, else it is ready again (back in review for a
// reviewer's claim). A rate limit makes it ready after RetryAfter.
// Errors: NotFound, LeaseLost.
func (s *Service) Release(ctx context.Context, id string, token int64, e Ending) (Card, error) {
	const op = "kanban.Release"
	if token == 0 {
		return Card{}, errs.E(op, errs.Invalid, "a release names the claim it ends")
	}
	e.Reason = s.mask(e.Reason)
	return s.apply(ctx, op, func(now time.Time) (change, error) {
		k, err := s.held(ctx, op, id, token)
		if err != nil {
			return change{}, err
		}
		review := reviewing(k)
		from := k.Version
		c := change{}
		run := endClaim(&k, &c.Change, now, e.Outcome, e.Reason, "")
		back := StatusReady
		if review {
			back = StatusReview
		}
		kind := map[Outcome]string{OutcomeCrashed: EventCrashed, OutcomeTimedOut: EventTimedOut, OutcomeReclaimed: EventReclaimed, OutcomeLimited: EventRateLimited}[e.Outcome]
		if kind == "" {
			kind = EventCrashed
		}
		if e.Outcome == OutcomeLimited || e.Uncounted {
			if e.Outcome == OutcomeLimited {
				k.RetryAt = now.Add(e.RetryAfter)
			}
			var ev Event
			k, ev = move(k, back, now, Event{Kind: kind, Run: run, Text: e.Reason})
			c.Events = []Event{ev}
		} else {
			k = s.countFailure(k, &c.Change, now, failure{run: run, outcome: e.Outcome, reason: e.Reason, back: back, kind: kind})
		}
		c.Cards = []CardWrite{{Card: k, From: from}}
		c.card = k
		return c, nil
	})
}

// Promote makes ready the todo cards of board whose parents are all
// done, and the scheduled ones whose time came (todo when a parent is
// not done). It returns the cards it moved.
func (s *Service) Promote(ctx context.Context, board string) ([]Card, error) {
	const op = "kanban.Promote"
	cards, err := s.Store.Cards(ctx, Query{Board: board, Statuses: []Status{StatusTodo, StatusScheduled}})
	if err != nil {
		return nil, err
	}
	var moved []Card
	for _, k := range cards {
		nk, err := s.apply(ctx, op, func(now time.Time) (change, error) {
			k, err := s.read(ctx, op, k.ID)
			if err != nil {
				return change{}, err
			}
			if k.Status == StatusScheduled && now.Before(k.ScheduledAt) || k.Status != StatusTodo && k.Status != StatusScheduled {
				return change{card: k}, nil
			}
			done, checks, err := s.parentsDone(ctx, k.Parents)
			if err != nil {
				return change{}, err
			}
			to := StatusReady
			if !done {
				if k.Status == StatusTodo {
					return change{card: k}, nil
				}
				to = StatusTodo
			}
			from := k.Version
			nk, ev := move(k, to, now, Event{Kind: EventPromoted})
			return change{card: nk, Change: Change{Cards: []CardWrite{{Card: nk, From: from}}, Check: checks, Events: []Event{ev}}}, nil
		})
		if errs.Is(err, errs.NotFound) {
			continue
		}
		if err != nil {
			return moved, err
		}
		if nk.Status != k.Status {
			moved = append(moved, nk)
		}
	}
	return moved, nil
}

// Schedule holds a card back until at, when Promote makes it ready.
// Errors: NotFound, Invalid (running, done or archived).
func (s *Service) Schedule(ctx context.Context, id string, at time.Time, actor string) (Card, error) {
	const op = "kanban.Schedule"
	return s.setStatus(ctx, op, id, StatusScheduled, actor, func(k *Card) error {
		if at.IsZero() {
			return errs.E(op, errs.Invalid, "a schedule needs a time")
		}
		k.ScheduledAt = at
		return nil
	})
}

// Archive takes a card off the board's lists. Errors: NotFound, Invalid
// (running: stop or reclaim it first).
func (s *Service) Archive(ctx context.Context, id, actor string) (Card, error) {
	const op = "kanban.Archive"
	k, err := s.setStatus(ctx, op, id, StatusArchived, actor, func(*Card) error { return nil })
	if err == nil && k.Workspace.Kind == WorkspaceScratch && s.Root != "" {
		// No worker runs it again: its scratch workspace goes (a card
		// done by hand still has one; its artifacts are kept). The card
		// is archived whether or not every file could be removed.
		_ = os.RemoveAll(s.scratchDir(k.ID))
	}
	return k, err
}

// ArchiveDone archives board's done cards completed (or, done by hand,
// last changed) olderThan or longer ago by the store's clock, and
// returns how many. A card that changed or went meanwhile counts as
// archived all the same.
func (s *Service) ArchiveDone(ctx context.Context, board string, olderThan time.Duration, actor string) (int, error) {
	now, err := s.Store.Now(ctx)
	if err != nil {
		return 0, err
	}
	done, err := s.Store.Cards(ctx, Query{Board: board, Statuses: []Status{StatusDone}})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range done {
		at := k.CompletedAt
		if at.IsZero() {
			at = k.UpdatedAt
		}
		if now.Sub(at) < olderThan {
			continue
		}
		if _, err := s.Archive(ctx, k.ID, actor); err != nil && !errs.Is(err, errs.Invalid) && !errs.Is(err, errs.NotFound) {
			return n, err
		}
		n++
	}
	return n, nil
}

// setStatus moves a card that no worker holds to status.
func (s *Service) setStatus(ctx context.Context, op, id string, to Status, actor string, edit func(*Card) error) (Card, error) {
	return s.apply(ctx, op, func(now time.Time) (change, error) {
		k, err := s.read(ctx, op, id)
		if err != nil {
			return change{}, err
		}
		switch k.Status {
		case StatusRunning:
			return change{}, errs.E(op, errs.Invalid, "%s is running; reclaim it first", k.ID)
		case StatusArchived:
			return change{}, errs.E(op, errs.Invalid, "%s is archived", k.ID)
		}
		if to != StatusArchived && k.Status == StatusDone {
			return change{}, errs.E(op, errs.Invalid, "%s is done", k.ID)
		}
		from := k.Version
		if err := edit(&k); err != nil {
			return change{}, err
		}
		kind := EventMoved
		if to == StatusArchived {
			kind = EventArchived
		}
		nk, ev := move(k, to, now, Event{Kind: kind, Actor: actor})
		return change{card: nk, Change: Change{Cards: []CardWrite{{Card: nk, From: from}}, Events: []Event{ev}}}, nil
	})
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return "…" + strings.ToValidUTF8(s[len(s)-n:], "")
}
