package cronjobs

import "time"

// Kind is a schedule's kind.
type Kind string

const (
	KindOnce     Kind = "once"     // fires once, at At
	KindInterval Kind = "interval" // fires every Every
	KindCron     Kind = "cron"     // fires on a cron expression, in Timezone
)

// Schedule is when a job fires.
type Schedule struct {
	Kind     Kind          `json:"kind"`
	Expr     string        `json:"expr"`               // as given
	Timezone string        `json:"timezone,omitempty"` // an IANA zone; empty is UTC
	At       time.Time     `json:"at,omitzero"`        // KindOnce
	Every    time.Duration `json:"every,omitempty"`    // KindInterval
}
