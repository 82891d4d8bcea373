// Package instances is the cluster's roll of gateway processes: each
// process records itself in the shared store (its id, host, pid,
// version, when it started, when the store last heard of it) with what
// it did over the last minute, renews the record on a heartbeat, and
// drops out of the roll when it stops or its record runs out by the
// store's clock. The dashboard's overview reads the roll.
package instances

import (
	"context"
	"time"

	"github.com/heraldgw/herald/internal/errs"
)

// MaxIDLen bounds an instance's id, as the leases bound an owner's.
const MaxIDLen = 256

// Instance is one gateway process as the store keeps it.
type Instance struct {
	// ID is the process's name in leases and claims (gateway.Options.Name).
	ID        string    `json:"id"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	// LastSeen is when its last beat was recorded, by the store's clock;
	// the store sets it.
	LastSeen time.Time `json:"last_seen"`
	// Minute is what it did over the last minute, as of LastSeen.
	Minute Counts `json:"minute"`
}

// Counts are what one process did: turns run, turns that failed or
// whose model failed, and outbox messages sent or whose send failed.
type Counts struct {
	Turns       int64 `json:"turns"`
	TurnErrors  int64 `json:"turn_errors"`
	ModelErrors int64 `json:"model_errors"`
	Sent        int64 `json:"sent"`
	SendFailed  int64 `json:"send_failed"`
}

// Add is c and o counted together.
func (c Counts) Add(o Counts) Counts {
	return Counts{
		Turns:       c.Turns + o.Turns,
		TurnErrors:  c.TurnErrors + o.TurnErrors,
		ModelErrors: c.ModelErrors + o.ModelErrors,
		Sent:        c.Sent + o.Sent,
		SendFailed:  c.SendFailed + o.SendFailed,
	}
}

// Sub is what c counts beyond o.
func (c Counts) Sub(o Counts) Counts {
	return Counts{
		Turns:       c.Turns - o.Turns,
		TurnErrors:  c.TurnErrors - o.TurnErrors,
		ModelErrors: c.ModelErrors - o.ModelErrors,
		Sent:        c.Sent - o.Sent,
		SendFailed:  c.SendFailed - o.SendFailed,
	}
}

// Errors is every failure c counts: turns, model calls and sends.
func (c Counts) Errors() int64 { return c.TurnErrors + c.ModelErrors + c.SendFailed }

// Store keeps the roll of instances, shared by every gateway on the
// store. Every method may return errs.Closed after Close and
// errs.Unavailable when the backend cannot be reached.
type Store interface {
	// Beat records in as alive for ttl more by the store's clock, with
	// LastSeen the store's now, replacing its earlier record.
	// Errors: Invalid (no ID or an overlong one, ttl ≤ 0).
	Beat(ctx context.Context, in Instance, ttl time.Duration) error
	// Leave removes id's record: the process is stopping. An id with no
	// record is no error. Errors: Invalid (no ID).
	Leave(ctx context.Context, id string) error
	// Instances lists the instances whose record has not run out by the
	// store's clock, by ID.
	Instances(ctx context.Context) ([]Instance, error)
}

// CheckBeat is the check every store makes of a Beat's arguments.
func CheckBeat(op string, in Instance, ttl time.Duration) error {
	if err := CheckID(op, in.ID); err != nil {
		return err
	}
	if ttl <= 0 {
		return errs.E(op, errs.Invalid, "an instance's ttl is %v, want more than 0", ttl)
	}
	return nil
}

// CheckID is the check every store makes of an instance's id.
func CheckID(op, id string) error {
	switch {
	case id == "":
		return errs.E(op, errs.Invalid, "an instance needs an id")
	case len(id) > MaxIDLen:
		return errs.E(op, errs.Invalid, "an instance's id has %d bytes, more than %d", len(id), MaxIDLen)
	}
	return nil
}

// Total is the counts of every instance of ins over its last minute.
func Total(ins []Instance) Counts {
	var t Counts
	for _, in := range ins {
		t = t.Add(in.Minute)
	}
	return t
}
