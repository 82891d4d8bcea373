// Package cronjobs is herald's scheduled jobs: a prompt (or a script)
// that runs on a schedule in a fresh session of its own and whose report
// is delivered, through the outbox, to the channels the job names. Jobs
// and their runs live in the store, and every fire is claimed there once
// (lease.OnceStore) before it runs, so any number of gateway instances
// sharing a store run each fire once, and one that dies mid-fire has it
// finished by another.
package cronjobs

import (
	"time"
)

// Job states.
const (
	StateScheduled = "scheduled" // waits for NextRunAt
	StatePaused    = "paused"    // not fired until resumed
	StateCompleted = "completed" // its repeats are spent; removed after its last run
	StateMissed    = "missed"    // a one-shot that was past its grace when herald saw it
	StateError     = "error"     // cannot be scheduled; LastError says why
)

// Run statuses (Run.Status, Job.LastStatus).
const (
	StatusRunning = "running"
	StatusOK      = "ok"      // ran and its report was handed to delivery
	StatusSilent  = "silent"  // ran and asked for nothing to be sent
	StatusSkipped = "skipped" // its script said not to wake the agent
	StatusError   = "error"   // the model, the script or a timeout failed; Error says how
	StatusMissed  = "missed"  // a one-shot that was not run in time
)

// Delivery statuses (Run.Delivery).
const (
	DeliveryPending   = "pending"   // in the outbox
	DeliveryDelivered = "delivered" // every target accepted it
	DeliveryFailed    = "failed"    // a target refused it or could not be reached; DeliveryError says why
	DeliveryLocal     = "local"     // saved only: its targets are local
	DeliveryNone      = "none"      // nothing to send (empty or silent)
)

// Repeat bounds how often a job runs: Times runs (0 or less: forever),
// Completed of them done.
type Repeat struct {
	Times     int `json:"times,omitempty"`
	Completed int `json:"completed,omitempty"`
}

// Last reports whether the run about to start is the job's last.
func (r Repeat) Last() bool { return r.Times > 0 && r.Completed+1 >= r.Times }

// Origin is the conversation a job was made from: its conversation key
// and where its replies go.
type Origin struct {
	Conv     string `json:"conv,omitempty"`
	Platform string `json:"platform,omitempty"`
	Chat     string `json:"chat,omitempty"`
	Thread   string `json:"thread,omitempty"`
	User     string `json:"user,omitempty"`
}

// Job is one scheduled job.
type Job struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Prompt   string   `json:"prompt,omitempty"`
	Script   string   `json:"script,omitempty"` // a file; run before the agent, or instead of it with NoAgent
	NoAgent  bool     `json:"no_agent,omitempty"`
	Schedule Schedule `json:"schedule"`
	Repeat   Repeat   `json:"repeat"`
	Enabled  bool     `json:"enabled"`
	State    string   `json:"state"`
	// NextRunAt is the next scheduled fire, zero when none: the truth
	// every instance's scheduler reads.
	NextRunAt time.Time `json:"next_run_at,omitzero"`
	// RunRequestedAt is set by "run now" (the CLI, the tool, /cron run,
	// the API) and cleared by the fire it asks for.
	RunRequestedAt    time.Time `json:"run_requested_at,omitzero"`
	LastRunAt         time.Time `json:"last_run_at,omitzero"`
	LastStatus        string    `json:"last_status,omitempty"`
	LastError         string    `json:"last_error,omitempty"`
	LastDeliveryError string    `json:"last_delivery_error,omitempty"`
	// Deliver is where reports go, as given: "origin", "local", a
	// platform's name (its home channel), "platform:chat[:thread]", or
	// a comma list of these.
	Deliver   string    `json:"deliver"`
	Origin    *Origin   `json:"origin,omitempty"`
	Model     string    `json:"model,omitempty"`    // overrides the model's name for this job
	Toolsets  []string  `json:"toolsets,omitempty"` // the tool sets it runs with; none: the default ones
	Workdir   string    `json:"workdir,omitempty"`  // where its script runs
	CreatedBy string    `json:"created_by,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Version grows with every write (Store.UpdateJob checks it).
	Version int64 `json:"version"`
}

// DueAt is when the job next wants to fire: a requested run at once,
// else its schedule's next time while it is enabled; zero when never.
// Stores index jobs by it.
func (j Job) DueAt() time.Time {
	due := j.RunRequestedAt
	if j.Enabled && !j.NextRunAt.IsZero() && (due.IsZero() || j.NextRunAt.Before(due)) {
		due = j.NextRunAt
	}
	return due
}

// Run is one fire of a job: its identity (Fire), what it did and where
// its report went.
type Run struct {
	ID          string    `json:"id"`
	Job         string    `json:"job"`
	Fire        string    `json:"fire"` // the once-only claim's identity
	ScheduledAt time.Time `json:"scheduled_at"`
	Manual      bool      `json:"manual,omitempty"` // asked for with "run now"
	Owner       string    `json:"owner,omitempty"`  // the instance that ran it
	StartedAt   time.Time `json:"started_at"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
	Status      string    `json:"status"`
	Error       string    `json:"error,omitempty"`
	Delivery    string    `json:"delivery,omitempty"`
	// DeliveryError says which target failed and why.
	DeliveryError string   `json:"delivery_error,omitempty"`
	Targets       []string `json:"targets,omitempty"`
	Sent          []string `json:"sent,omitempty"`   // the targets that accepted the report
	Output        string   `json:"output,omitempty"` // the saved output's path
}

// Ended reports whether the run has finished.
func (r Run) Ended() bool { return !r.EndedAt.IsZero() }
