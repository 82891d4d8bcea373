package kanban

import (
	"context"
	"fmt"
	"time"
)

// StrandedAfter is how long a ready card may wait unclaimed before the
// dispatcher says so (an error at twice it, critical at six) and a
// Diagnosis names it.
const StrandedAfter = 30 * time.Minute

// Diagnosis is what is stuck on a board: ready cards waiting unclaimed
// StrandedAfter or more, blocked cards, running cards whose claim ran
// out or whose worker is gone, and the lanes paused.
type Diagnosis struct {
	Board    string         `json:"board"`
	Stranded []StrandedCard `json:"stranded"`
	Blocked  []BlockedCard  `json:"blocked"`
	Expired  []ExpiredClaim `json:"expired"`
	// Gone are running cards of the host diagnosing whose worker, or
	// the process that renews its claim, is gone.
	Gone []GoneWorker `json:"gone"`
	// Paused are the lanes paused now, on every instance.
	Paused []PausedLane `json:"paused_lanes"`
}

// StrandedCard is a ready card waiting unclaimed.
type StrandedCard struct {
	ID            string `json:"id"`
	Title         string `json:"title"`
	Assignee      string `json:"assignee,omitempty"`
	WaitedSeconds int    `json:"waited_seconds"`
	Waiting       string `json:"waiting,omitempty"` // the dispatcher's reason/level
}

// BlockedCard is a blocked card and why.
type BlockedCard struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Kind      string `json:"kind,omitempty"`
	Reason    string `json:"reason,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

// ExpiredClaim is a running card whose claim ran out: a dispatcher
// reclaims it.
type ExpiredClaim struct {
	ID      string    `json:"id"`
	Title   string    `json:"title"`
	Owner   string    `json:"owner"`
	Lane    string    `json:"lane,omitempty"`
	Run     string    `json:"run"`
	Expires time.Time `json:"expires"`
}

// GoneWorker is a running card whose worker, or its owner, the host
// knows gone (ClaimGone).
type GoneWorker struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Owner    string `json:"owner"`
	Lane     string `json:"lane,omitempty"`
	Run      string `json:"run"`
	PID      int    `json:"pid,omitempty"`       // the worker's
	OwnerPID int    `json:"owner_pid,omitempty"` // its owner's
	Why      string `json:"why"`
}

// PausedLane is a lane paused: until when and why.
type PausedLane struct {
	Lane   string    `json:"lane"`
	Until  time.Time `json:"until"`
	Reason string    `json:"reason,omitempty"`
}

// PausedLanes are ls as paused lanes, never nil.
func PausedLanes(ls []LaneState) []PausedLane {
	out := []PausedLane{}
	for _, l := range ls {
		out = append(out, PausedLane{Lane: l.Lane, Until: l.PausedUntil, Reason: l.Reason})
	}
	return out
}

// Diagnose reads what is stuck on board, by the store's clock; host is
// the machine whose processes it can see (ClaimGone).
func Diagnose(ctx context.Context, svc *Service, board, host string) (Diagnosis, error) {
	d := Diagnosis{Board: board, Stranded: []StrandedCard{}, Blocked: []BlockedCard{}, Expired: []ExpiredClaim{}, Gone: []GoneWorker{}}
	now, err := svc.Store.Now(ctx)
	if err != nil {
		return d, err
	}
	paused, err := svc.PausedLanes(ctx)
	if err != nil {
		return d, err
	}
	d.Paused = PausedLanes(paused)
	cards, err := svc.Store.Cards(ctx, Query{Board: board, Statuses: []Status{StatusReady, StatusBlocked, StatusRunning}})
	if err != nil {
		return d, err
	}
	SortCards(cards)
	for _, k := range cards {
		switch k.Status {
		case StatusReady:
			if waited := now.Sub(k.ReadyAt); !k.ReadyAt.IsZero() && waited >= StrandedAfter {
				d.Stranded = append(d.Stranded, StrandedCard{ID: k.ID, Title: k.Title, Assignee: k.Assignee, WaitedSeconds: int(waited.Seconds()), Waiting: k.Waiting})
			}
		case StatusBlocked:
			d.Blocked = append(d.Blocked, BlockedCard{ID: k.ID, Title: k.Title, Kind: string(k.BlockKind), Reason: k.BlockReason, LastError: k.LastError})
		case StatusRunning:
			c := k.Claim
			if c == nil {
				continue
			}
			if now.After(c.Expires) {
				d.Expired = append(d.Expired, ExpiredClaim{ID: k.ID, Title: k.Title, Owner: c.Owner, Lane: c.Lane, Run: c.Run, Expires: c.Expires})
			}
			if g, ok := goneOf(k, host); ok {
				d.Gone = append(d.Gone, g)
			}
		}
	}
	return d, nil
}

// goneOf names k's claim when host knows its worker, or its owner,
// gone.
func goneOf(k Card, host string) (GoneWorker, bool) {
	c := k.Claim
	ownerGone, workerGone := ClaimGone(*c, host)
	g := GoneWorker{ID: k.ID, Title: k.Title, Owner: c.Owner, Lane: c.Lane, Run: c.Run, PID: c.PID, OwnerPID: c.OwnerPID}
	switch {
	case ownerGone && workerGone:
		g.Why = fmt.Sprintf("its worker is gone with %s (pid %d); a dispatcher on %s reclaims it", c.Owner, c.OwnerPID, host)
	case ownerGone:
		g.Why = fmt.Sprintf("%s (pid %d) is gone; its worker (pid %d) still runs, its claim unrenewed", c.Owner, c.OwnerPID, c.PID)
	case workerGone:
		g.Why = fmt.Sprintf("its worker (pid %d) is gone", c.PID)
	default:
		return g, false
	}
	return g, true
}
