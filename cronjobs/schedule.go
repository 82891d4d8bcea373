package cronjobs

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/heraldgw/herald/internal/errs"
)

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

// MinEvery is the shortest interval a job may repeat at: a job that
// repeats faster is a loop, not a schedule.
const MinEvery = 5 * time.Second

const (
	// pastSlack is how far in the past a one-shot's time may be and
	// still be accepted: a time typed a moment ago is not refused.
	pastSlack = 120 * time.Second
	// maxSpan bounds a duration, so now plus it stays a real time.
	maxSpan = 100 * 365 * 24 * time.Hour

	minGrace = 120 * time.Second
	maxGrace = 7200 * time.Second
)

// forms is appended to the errors of a schedule that is not understood.
const forms = `use 30m, every 2h, a 5-field cron expression like "0 9 * * 1-5", @daily, or an ISO time like 2026-12-03T09:00`

var (
	durationRE = regexp.MustCompile(`^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$`)
	dateRE     = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}`)
)

// Layouts of a one-shot's time: zonedLayouts carry their offset, the
// wall layouts are read in the schedule's zone.
var (
	zonedLayouts = []string{
		time.RFC3339Nano,
		"2006-01-02T15:04Z07:00",
		"2006-01-02 15:04:05Z07:00",
		"2006-01-02 15:04Z07:00",
	}
	wallLayouts = []string{
		"2006-01-02T15:04:05",
		"2006-01-02T15:04",
		"2006-01-02 15:04:05",
		"2006-01-02 15:04",
		"2006-01-02",
	}
)

// Parse reads a schedule as a user writes it: a delay (30m, 2h, 1d,
// 1h30m), an interval (every 30m, @every 5m), a 5-field cron expression
// or a descriptor (@daily), or an ISO time (2026-12-03T09:00, with or
// without an offset). timezone is the zone cron expressions and times
// without an offset are read in; empty is UTC. now is when the schedule
// is given: delays count from it and a one-shot before it is refused.
// Errors: Invalid, with a message that names what is wrong.
func Parse(expr, timezone string, now time.Time) (Schedule, error) {
	const op = "cronjobs.Parse"
	expr = strings.TrimSpace(expr)
	loc, err := location(strings.TrimSpace(timezone))
	if err != nil {
		return Schedule{}, errs.E(op, errs.Invalid, "%v", err)
	}
	lower := strings.ToLower(expr)
	fields := strings.Fields(lower)
	switch {
	case expr == "":
		return Schedule{}, errs.E(op, errs.Invalid, "empty schedule (%s)", forms)

	case hasZonePrefix(expr):
		return Schedule{}, errs.E(op, errs.Invalid, "schedule %q: a CRON_TZ= or TZ= prefix is not accepted; set the job's timezone instead", expr)

	case fields[0] == "every" || fields[0] == "@every":
		d, err := parseDuration(strings.Join(fields[1:], ""))
		if err != nil {
			return Schedule{}, errs.E(op, errs.Invalid, "schedule %q: interval: %v (%s)", expr, err, forms)
		}
		if d < MinEvery {
			return Schedule{}, errs.E(op, errs.Invalid, "schedule %q: an interval must be at least %s, not %s", expr, formatDuration(MinEvery), formatDuration(d))
		}
		return Schedule{Kind: KindInterval, Expr: expr, Every: d}, nil

	case durationRE.MatchString(lower):
		d, err := parseDuration(lower)
		if err != nil {
			return Schedule{}, errs.E(op, errs.Invalid, "schedule %q: %v", expr, err)
		}
		if d <= 0 {
			return Schedule{}, errs.E(op, errs.Invalid, "schedule %q: a delay must be positive", expr)
		}
		return Schedule{Kind: KindOnce, Expr: expr, Timezone: loc.String(), At: now.Add(d).UTC()}, nil

	case dateRE.MatchString(expr):
		at, err := parseTime(expr, loc)
		if err != nil {
			return Schedule{}, errs.E(op, errs.Invalid, "schedule %q: %v (%s)", expr, err, forms)
		}
		if at.Before(now.Add(-pastSlack)) {
			return Schedule{}, errs.E(op, errs.Invalid, "schedule %q: %s is in the past (it is now %s); give a future time",
				expr, formatAt(at, loc), formatAt(now, loc))
		}
		return Schedule{Kind: KindOnce, Expr: expr, Timezone: loc.String(), At: at.UTC()}, nil

	default:
		if _, err := cronSpec(expr); err != nil {
			return Schedule{}, errs.E(op, errs.Invalid, "schedule %q: cron expression: %v (%s)", expr, err, forms)
		}
		return Schedule{Kind: KindCron, Expr: expr, Timezone: loc.String()}, nil
	}
}

// Validate checks a stored schedule: its kind is known, an interval is
// at least MinEvery, a cron expression parses and the zone loads.
// Errors: Invalid.
func (s Schedule) Validate() error {
	const op = "cronjobs.Schedule.Validate"
	switch s.Kind {
	case KindOnce:
		if s.At.IsZero() {
			return errs.E(op, errs.Invalid, "one-shot schedule %q has no time", s.Expr)
		}
	case KindInterval:
		if s.Every < MinEvery {
			return errs.E(op, errs.Invalid, "interval schedule %q: every %s is under the minimum %s", s.Expr, formatDuration(s.Every), formatDuration(MinEvery))
		}
	case KindCron:
		if _, err := cronSpec(s.Expr); err != nil {
			return errs.E(op, errs.Invalid, "schedule %q: cron expression: %v", s.Expr, err)
		}
	default:
		return errs.E(op, errs.Invalid, "schedule %q: unknown kind %q", s.Expr, s.Kind)
	}
	if _, err := location(s.Timezone); err != nil {
		return errs.E(op, errs.Invalid, "schedule %q: %v", s.Expr, err)
	}
	return nil
}

// Next returns the fire that follows one scheduled at prev (zero prev:
// the first fire), and false when there is none. A recurring schedule's
// next fire is always after both prev and now, so a job that was down
// for a while fires once on its return, not once per fire it missed. A
// one-shot's first fire is At even when At has passed: whether it is
// too late to run is the scheduler's call (Grace).
//
// A cron expression is matched against the wall clock of its zone,
// where every day has each time exactly once: a time that a
// spring-forward skips fires at the instant it is shifted to (02:30 on
// a day that jumps from 02:00 to 03:00 fires at 03:30), and a time
// that a fall-back repeats fires at its first occurrence only.
func (s Schedule) Next(prev, now time.Time) (time.Time, bool) {
	switch s.Kind {
	case KindOnce:
		if !prev.IsZero() || s.At.IsZero() {
			return time.Time{}, false
		}
		return s.At, true
	case KindInterval:
		if s.Every <= 0 {
			return time.Time{}, false
		}
		if prev.IsZero() {
			return now.Add(s.Every).UTC(), true
		}
		next := prev.Add(s.Every)
		if !next.After(now) {
			next = prev.Add((now.Sub(prev)/s.Every + 1) * s.Every)
		}
		return next.UTC(), true
	case KindCron:
		return s.nextCron(prev, now)
	}
	return time.Time{}, false
}

// maxCronSteps bounds the wall times nextCron tries that map back to or
// before its reference: at most the minutes of one repeated or skipped
// hour in practice.
const maxCronSteps = 2000

func (s Schedule) nextCron(prev, now time.Time) (time.Time, bool) {
	spec, err := cronSpec(s.Expr)
	if err != nil {
		return time.Time{}, false
	}
	loc, err := location(s.Timezone)
	if err != nil {
		return time.Time{}, false
	}
	after := now
	if prev.After(after) {
		after = prev
	}
	after = after.In(loc)
	w := wall(after)
	// Just past a spring-forward, the wall times the gap skipped are
	// still ahead, at their shifted instants: search from before them.
	if start, _ := after.ZoneBounds(); !start.IsZero() {
		_, before := start.Add(-time.Nanosecond).Zone()
		_, offset := after.Zone()
		if gap := time.Duration(offset-before) * time.Second; gap > 0 && after.Sub(start) < gap {
			w = w.Add(-gap)
		}
	}
	// A wall time can map back to or before after: the first reading of
	// a repeated hour when after is in its second, or one the gap
	// search above reaches back to. Those are passed over.
	for range maxCronSteps {
		w = spec.Next(w)
		if w.IsZero() {
			return time.Time{}, false
		}
		if t := fromWall(w, loc); t.After(after) {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// Period is the schedule's spacing near at: Every for an interval, the
// gap between the next two fires after at for a cron expression, zero
// for a one-shot.
func (s Schedule) Period(at time.Time) time.Duration {
	switch s.Kind {
	case KindInterval:
		return s.Every
	case KindCron:
		first, ok := s.Next(time.Time{}, at)
		if !ok {
			return 0
		}
		second, ok := s.Next(first, first)
		if !ok {
			return 0
		}
		return second.Sub(first)
	}
	return 0
}

// Grace is how late a fire of a schedule with the given period may
// start: half the period, within [2m, 2h]. A fire later than that is
// missed: a recurring job runs once and moves on, a one-shot is marked
// missed.
func Grace(period time.Duration) time.Duration {
	return min(max(period/2, minGrace), maxGrace)
}

// String describes the schedule for a list: "once at 2026-12-03 09:00
// UTC", "every 30m", "cron 0 9 * * 1-5 (America/New_York)", "@daily (UTC)".
func (s Schedule) String() string {
	zone := s.Timezone
	loc, err := location(zone)
	if err != nil {
		loc = time.UTC
	}
	switch s.Kind {
	case KindOnce:
		return "once at " + formatAt(s.At, loc)
	case KindInterval:
		return "every " + formatDuration(s.Every)
	case KindCron:
		if zone == "" {
			zone = "UTC"
		}
		if strings.HasPrefix(s.Expr, "@") {
			return s.Expr + " (" + zone + ")"
		}
		return "cron " + s.Expr + " (" + zone + ")"
	}
	return string(s.Kind) + " " + s.Expr
}

// specs caches parsed cron expressions by their lower-cased text, zones
// loaded locations by name: Next runs for every due job on every tick.
var specs, zones sync.Map

// cronSpec parses a 5-field cron expression or a descriptor. One that
// names its own zone is refused: the schedule's Timezone is the zone,
// and nextCron reads the expression on a wall clock with none.
func cronSpec(expr string) (*cron.SpecSchedule, error) {
	key := strings.ToLower(strings.TrimSpace(expr))
	if spec, ok := specs.Load(key); ok {
		return spec.(*cron.SpecSchedule), nil
	}
	if hasZonePrefix(key) {
		return nil, errors.New("a CRON_TZ= or TZ= prefix is not accepted; set the job's timezone instead")
	}
	parsed, err := cron.ParseStandard(key)
	if err != nil {
		return nil, err
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%s is an interval, not a cron expression", expr)
	}
	specs.Store(key, spec)
	return spec, nil
}

func hasZonePrefix(expr string) bool {
	upper := strings.ToUpper(expr)
	return strings.HasPrefix(upper, "CRON_TZ=") || strings.HasPrefix(upper, "TZ=")
}

// location loads an IANA zone; empty and "UTC" are UTC. "Local" is
// refused: a job's zone must not change with the host it runs on.
func location(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	if name == "Local" {
		return nil, fmt.Errorf("unknown timezone %q: name an IANA zone like Europe/Paris", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown timezone %q", name)
	}
	zones.Store(name, loc)
	return loc, nil
}

// parseDuration reads a duration of days, hours, minutes and seconds, in
// that order: 90s, 30m, 1h30m, 1d12h.
func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("no duration given")
	}
	m := durationRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a duration like 30m, 2h, 1d or 1h30m", s)
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil || n > int64(maxSpan/unit) {
			return 0, fmt.Errorf("%q is longer than 100 years", s)
		}
		d += time.Duration(n) * unit
	}
	if d > maxSpan {
		return 0, fmt.Errorf("%q is longer than 100 years", s)
	}
	return d, nil
}

// parseTime reads an ISO 8601 time; one without an offset is a wall
// time in loc.
func parseTime(s string, loc *time.Location) (time.Time, error) {
	for _, layout := range zonedLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	for _, layout := range wallLayouts {
		if w, err := time.Parse(layout, s); err == nil {
			return fromWall(w, loc), nil
		}
	}
	return time.Time{}, errors.New("not a valid time")
}

// wall returns t's wall clock, in t's location, as a time in UTC.
func wall(t time.Time) time.Time {
	_, offset := t.Zone()
	return t.UTC().Add(time.Duration(offset) * time.Second)
}

// fromWall returns the instant whose wall clock in loc reads w (w's
// fields, read in UTC). Go's time.Date does not promise which side of a
// transition it takes, so both cases are settled here: a wall time that
// a spring-forward skips moves forward by the gap (02:30 on a day that
// jumps from 02:00 to 03:00 is 03:30), and one that a fall-back repeats
// is its first occurrence.
func fromWall(w time.Time, loc *time.Location) time.Time {
	t := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
	got := wall(t)
	switch {
	case got.Before(w):
		// Skipped, and read with the offset after the gap: t is before
		// the gap by as much as it reads short.
		return t.Add(w.Sub(got))
	case got.After(w):
		// Skipped, and read with the offset before the gap: already
		// shifted forward.
		return t
	}
	// t may be the second reading of a repeated hour; the first is in
	// the zone period before t's.
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return t
	}
	_, before := start.Add(-time.Nanosecond).Zone()
	first := time.Unix(w.Unix()-int64(before), int64(w.Nanosecond())).In(loc)
	if first.Before(start) && wall(first).Equal(w) {
		return first
	}
	return t
}

// formatAt is t in loc to the minute (to the second when it has
// seconds), and the zone's name.
func formatAt(t time.Time, loc *time.Location) string {
	t = t.In(loc)
	layout := "2006-01-02 15:04"
	if t.Second() != 0 {
		layout += ":05"
	}
	return t.Format(layout) + " " + loc.String()
}

// formatDuration writes d as Parse reads it: 30m, 1h30m, 1d12h.
func formatDuration(d time.Duration) string {
	if d < time.Second {
		return d.String()
	}
	var b strings.Builder
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := d / u.d; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.name)
			d -= n * u.d
		}
	}
	return b.String()
}
