package cronjobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/errs"
)

// now is when every schedule in these tests is given: a Friday.
var now = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestParse(t *testing.T) {
	ny := zone(t, "America/New_York")
	tests := []struct {
		desc string
		expr string
		tz   string
		want cronjobs.Schedule
	}{
		{desc: "minutes", expr: "30m", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "30m", Timezone: "UTC", At: now.Add(30 * time.Minute)}},
		{desc: "hours", expr: "2h", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "2h", Timezone: "UTC", At: now.Add(2 * time.Hour)}},
		{desc: "a day", expr: "1d", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "1d", Timezone: "UTC", At: now.Add(24 * time.Hour)}},
		{desc: "seconds", expr: "90s", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "90s", Timezone: "UTC", At: now.Add(90 * time.Second)}},
		{desc: "hours and minutes", expr: "1h30m", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "1h30m", Timezone: "UTC", At: now.Add(90 * time.Minute)}},
		{desc: "days and hours", expr: "1d12h", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "1d12h", Timezone: "UTC", At: now.Add(36 * time.Hour)}},
		{desc: "a delay keeps the zone it was given in", expr: " 30m ", tz: "America/New_York", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "30m", Timezone: "America/New_York", At: now.Add(30 * time.Minute)}},

		{desc: "every minutes", expr: "every 30m", want: cronjobs.Schedule{Kind: cronjobs.KindInterval, Expr: "every 30m", Every: 30 * time.Minute}},
		{desc: "every hours", expr: "every 2h", want: cronjobs.Schedule{Kind: cronjobs.KindInterval, Expr: "every 2h", Every: 2 * time.Hour}},
		{desc: "every day, capitalised", expr: "Every 1d", want: cronjobs.Schedule{Kind: cronjobs.KindInterval, Expr: "Every 1d", Every: 24 * time.Hour}},
		{desc: "every the minimum", expr: "every 5s", want: cronjobs.Schedule{Kind: cronjobs.KindInterval, Expr: "every 5s", Every: 5 * time.Second}},
		{desc: "robfig's @every", expr: "@every 5m", want: cronjobs.Schedule{Kind: cronjobs.KindInterval, Expr: "@every 5m", Every: 5 * time.Minute}},

		{desc: "cron in UTC", expr: "0 9 * * 1-5", want: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "0 9 * * 1-5", Timezone: "UTC"}},
		{desc: "cron in a zone", expr: "0 9 * * 1-5", tz: "America/New_York", want: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "0 9 * * 1-5", Timezone: "America/New_York"}},
		{desc: "cron with names", expr: "0 9 * JAN MON-FRI", want: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "0 9 * JAN MON-FRI", Timezone: "UTC"}},
		{desc: "@daily", expr: "@daily", want: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "@daily", Timezone: "UTC"}},
		{desc: "@hourly", expr: "@hourly", want: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "@hourly", Timezone: "UTC"}},
		{desc: "@weekly", expr: "@weekly", want: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "@weekly", Timezone: "UTC"}},
		{desc: "@monthly", expr: "@monthly", want: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "@monthly", Timezone: "UTC"}},
		{desc: "@yearly", expr: "@yearly", want: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "@yearly", Timezone: "UTC"}},
		{desc: "@annually", expr: "@annually", want: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "@annually", Timezone: "UTC"}},
		{desc: "@midnight in a zone", expr: "@midnight", tz: "Asia/Kolkata", want: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "@midnight", Timezone: "Asia/Kolkata"}},

		{desc: "ISO to the minute", expr: "2026-12-03T09:00", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "2026-12-03T09:00", Timezone: "UTC", At: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}},
		{desc: "ISO to the second", expr: "2026-12-03T09:00:00", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "2026-12-03T09:00:00", Timezone: "UTC", At: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}},
		{desc: "ISO with a space", expr: "2026-12-03 09:00", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "2026-12-03 09:00", Timezone: "UTC", At: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}},
		{desc: "ISO in UTC, in a zone", expr: "2026-12-03T09:00:00Z", tz: "America/New_York", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "2026-12-03T09:00:00Z", Timezone: "America/New_York", At: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}},
		{desc: "ISO with an offset", expr: "2026-12-03T09:00:00+01:00", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "2026-12-03T09:00:00+01:00", Timezone: "UTC", At: time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)}},
		{desc: "ISO without an offset is in the zone", expr: "2026-12-03T09:00", tz: "America/New_York", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "2026-12-03T09:00", Timezone: "America/New_York", At: time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)}},
		{desc: "a bare date is midnight", expr: "2026-12-03", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "2026-12-03", Timezone: "UTC", At: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)}},
		{desc: "a bare date in a zone", expr: "2026-12-03", tz: "Asia/Kolkata", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "2026-12-03", Timezone: "Asia/Kolkata", At: time.Date(2026, 12, 2, 18, 30, 0, 0, time.UTC)}},
		{desc: "a minute in the past is accepted", expr: "2026-05-01T09:59:00Z", want: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "2026-05-01T09:59:00Z", Timezone: "UTC", At: now.Add(-time.Minute)}},
		{desc: "a wall time a spring-forward skips moves forward by the gap", expr: "2027-03-14T02:30", tz: "America/New_York", want: cronjobs.Schedule{
			Kind: cronjobs.KindOnce, Expr: "2027-03-14T02:30", Timezone: "America/New_York", At: time.Date(2027, 3, 14, 3, 30, 0, 0, ny).UTC()}},
		{desc: "a wall time a fall-back repeats is its first occurrence", expr: "2026-11-01T01:30", tz: "America/New_York", want: cronjobs.Schedule{
			Kind: cronjobs.KindOnce, Expr: "2026-11-01T01:30", Timezone: "America/New_York", At: time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC)}},
		// Lord Howe moves by 30 minutes, and Go's time.Date takes the
		// other side of its transitions than New York's.
		{desc: "a skipped half hour on Lord Howe", expr: "2026-10-04T02:15", tz: "Australia/Lord_Howe", want: cronjobs.Schedule{
			Kind: cronjobs.KindOnce, Expr: "2026-10-04T02:15", Timezone: "Australia/Lord_Howe", At: time.Date(2026, 10, 3, 15, 45, 0, 0, time.UTC)}},
		{desc: "a repeated half hour on Lord Howe", expr: "2027-04-04T01:45", tz: "Australia/Lord_Howe", want: cronjobs.Schedule{
			Kind: cronjobs.KindOnce, Expr: "2027-04-04T01:45", Timezone: "Australia/Lord_Howe", At: time.Date(2027, 4, 3, 14, 45, 0, 0, time.UTC)}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, err := cronjobs.Parse(tt.expr, tt.tz, now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%q, %q) (-want +got):\n%s", tt.expr, tt.tz, diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		desc string
		expr string
		tz   string
		want []string // each in the error's text
	}{
		{desc: "a cron expression short of a field", expr: "0 9 * *", want: []string{
			`schedule "0 9 * *": cron expression: expected exactly 5 fields, found 4: [0 9 * *]`,
			`(use 30m, every 2h, a 5-field cron expression like "0 9 * * 1-5", @daily, or an ISO time like 2026-12-03T09:00)`}},
		{desc: "a cron expression with seconds", expr: "0 0 9 * * *", want: []string{"expected exactly 5 fields, found 6"}},
		{desc: "an hour out of range", expr: "0 25 * * *", want: []string{"cron expression", "above maximum (23)"}},
		{desc: "a word", expr: "tomorrow", want: []string{`schedule "tomorrow"`, "found 1", "use 30m"}},
		{desc: "an unknown descriptor", expr: "@fortnightly", want: []string{"unrecognized descriptor: @fortnightly"}},
		{desc: "a CRON_TZ prefix", expr: "CRON_TZ=Europe/Paris 0 9 * * *", want: []string{"CRON_TZ=", "set the job's timezone instead"}},
		{desc: "a TZ prefix", expr: "TZ=Europe/Paris 0 9 * * *", want: []string{"set the job's timezone instead"}},
		{desc: "a TZ prefix without a space", expr: "TZ=Europe/Paris", want: []string{"set the job's timezone instead"}},
		{desc: "empty", expr: "  ", want: []string{"empty schedule"}},
		{desc: "an interval below the minimum", expr: "every 4s", want: []string{`schedule "every 4s": an interval must be at least 5s, not 4s`}},
		{desc: "@every below the minimum", expr: "@every 1s", want: []string{"at least 5s"}},
		{desc: "an interval of nothing", expr: "every", want: []string{"interval: no duration given"}},
		{desc: "an interval of a word", expr: "every day", want: []string{`interval: "day" is not a duration`}},
		{desc: "a zero delay", expr: "0m", want: []string{"a delay must be positive"}},
		{desc: "a delay too long", expr: "99999999999999999999d", want: []string{"longer than 100 years"}},
		{desc: "a past time", expr: "2026-04-30T09:00", want: []string{
			`schedule "2026-04-30T09:00": 2026-04-30 09:00 UTC is in the past (it is now 2026-05-01 10:00 UTC); give a future time`}},
		{desc: "just over the slack", expr: "2026-05-01T09:57:59Z", want: []string{"is in the past"}},
		{desc: "a past time in a zone", expr: "2026-05-01T05:00", tz: "America/New_York", want: []string{
			"2026-05-01 05:00 America/New_York is in the past (it is now 2026-05-01 06:00 America/New_York)"}},
		{desc: "a month out of range", expr: "2026-13-03T09:00", want: []string{"not a valid time", "use 30m"}},
		{desc: "an unknown timezone", expr: "0 9 * * *", tz: "Mars/Base", want: []string{`unknown timezone "Mars/Base"`}},
		{desc: "the host's zone", expr: "0 9 * * *", tz: "Local", want: []string{`unknown timezone "Local"`}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, err := cronjobs.Parse(tt.expr, tt.tz, now)
			if err == nil {
				t.Fatalf("Parse(%q, %q) = %+v, want an error", tt.expr, tt.tz, got)
			}
			if !errs.Is(err, errs.Invalid) {
				t.Errorf("code %q, want %q: %v", errs.CodeOf(err), errs.Invalid, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		desc string
		s    cronjobs.Schedule
		want string // in the error; empty: valid
	}{
		{desc: "a one-shot", s: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "30m", At: now}},
		{desc: "a one-shot without a time", s: cronjobs.Schedule{Kind: cronjobs.KindOnce, Expr: "30m"}, want: "has no time"},
		{desc: "an interval", s: cronjobs.Schedule{Kind: cronjobs.KindInterval, Expr: "every 1m", Every: time.Minute}},
		{desc: "an interval below the minimum", s: cronjobs.Schedule{Kind: cronjobs.KindInterval, Expr: "every 2s", Every: 2 * time.Second}, want: "under the minimum"},
		{desc: "a cron expression", s: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "0 9 * * *", Timezone: "Europe/Paris"}},
		{desc: "a broken cron expression", s: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "0 9 * *"}, want: "expected exactly 5 fields"},
		{desc: "a cron expression with its own zone", s: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "CRON_TZ=UTC 0 9 * * *"}, want: "timezone instead"},
		{desc: "@every stored as cron", s: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "@every 5m"}, want: "is an interval"},
		{desc: "an unknown zone", s: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "0 9 * * *", Timezone: "Mars/Base"}, want: `unknown timezone "Mars/Base"`},
		{desc: "an unknown kind", s: cronjobs.Schedule{Kind: "weekly", Expr: "x"}, want: `unknown kind "weekly"`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			err := tt.s.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errs.Is(err, errs.Invalid)):
				t.Errorf("Validate: %v, want an invalid error saying %q", err, tt.want)
			}
		})
	}
}

func mustParse(t testing.TB, expr, tz string) cronjobs.Schedule {
	t.Helper()
	s, err := cronjobs.Parse(expr, tz, now)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNext(t *testing.T) {
	ny := zone(t, "America/New_York")
	kolkata := zone(t, "Asia/Kolkata")
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		desc      string
		s         cronjobs.Schedule
		prev, now time.Time
		want      time.Time
		wantOK    bool
	}{
		{desc: "once: the first fire is At", s: mustParse(t, "2026-12-03T09:00", ""), now: now, want: at, wantOK: true},
		{desc: "once: At even when it has passed", s: mustParse(t, "2026-12-03T09:00", ""), now: at.Add(time.Hour), want: at, wantOK: true},
		{desc: "once: none after it fired", s: mustParse(t, "2026-12-03T09:00", ""), prev: at, now: at},

		{desc: "interval: the first fire is one interval from now", s: mustParse(t, "every 30m", ""), now: now, want: now.Add(30 * time.Minute), wantOK: true},
		{desc: "interval: the next fire follows the last", s: mustParse(t, "every 30m", ""), prev: now, now: now.Add(time.Minute), want: now.Add(30 * time.Minute), wantOK: true},
		{desc: "interval: not at now", s: mustParse(t, "every 30m", ""), prev: now, now: now.Add(30 * time.Minute), want: now.Add(60 * time.Minute), wantOK: true},
		{desc: "interval: after a long gap, the next slot after now, on the old beat", s: mustParse(t, "every 30m", ""),
			prev: now, now: now.Add(10*24*time.Hour + 10*time.Minute), want: now.Add(10*24*time.Hour + 30*time.Minute), wantOK: true},
		{desc: "interval: a prev ahead of now", s: mustParse(t, "every 1h", ""), prev: now.Add(time.Hour), now: now, want: now.Add(2 * time.Hour), wantOK: true},

		{desc: "cron: weekdays skip the weekend", s: mustParse(t, "0 9 * * 1-5", ""), now: now, want: time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC), wantOK: true},
		{desc: "cron: not at now", s: mustParse(t, "0 9 * * *", ""), now: time.Date(2026, 5, 2, 9, 0, 0, 0, time.UTC), want: time.Date(2026, 5, 3, 9, 0, 0, 0, time.UTC), wantOK: true},
		{desc: "cron: after a long gap, one next time after now", s: mustParse(t, "0 9 * * *", ""),
			prev: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC), now: now, want: time.Date(2026, 5, 2, 9, 0, 0, 0, time.UTC), wantOK: true},
		{desc: "cron: a prev ahead of now", s: mustParse(t, "0 9 * * *", ""), prev: time.Date(2026, 5, 10, 9, 0, 0, 0, time.UTC), now: now, want: time.Date(2026, 5, 11, 9, 0, 0, 0, time.UTC), wantOK: true},
		{desc: "cron: in a zone", s: mustParse(t, "0 9 * * 1-5", "America/New_York"), now: now, want: time.Date(2026, 5, 1, 9, 0, 0, 0, ny), wantOK: true},
		{desc: "cron: in a fixed half-hour zone", s: mustParse(t, "0 9 * * *", "Asia/Kolkata"), now: now, want: time.Date(2026, 5, 2, 9, 0, 0, 0, kolkata), wantOK: true},
		{desc: "cron: @daily in Kolkata is its midnight", s: mustParse(t, "@daily", "Asia/Kolkata"), now: now, want: time.Date(2026, 5, 1, 18, 30, 0, 0, time.UTC), wantOK: true},
		{desc: "cron: a date that never comes", s: mustParse(t, "0 0 30 2 *", ""), now: now},
		{desc: "cron: a wall time in the gap, asked for within it", s: mustParse(t, "30 2 * * *", "America/New_York"),
			now: time.Date(2026, 3, 8, 3, 10, 0, 0, ny), want: time.Date(2026, 3, 8, 3, 30, 0, 0, ny), wantOK: true},
		{desc: "cron: a repeated wall time, asked for in its second reading", s: mustParse(t, "30 1 * * *", "America/New_York"),
			now: time.Date(2026, 11, 1, 6, 10, 0, 0, time.UTC), want: time.Date(2026, 11, 2, 1, 30, 0, 0, ny), wantOK: true},
		{desc: "cron: in the second reading of a repeated hour, the hour after", s: mustParse(t, "30 * * * *", "America/New_York"),
			now: time.Date(2026, 11, 1, 6, 10, 0, 0, time.UTC), want: time.Date(2026, 11, 1, 2, 30, 0, 0, ny), wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, ok := tt.s.Next(tt.prev, tt.now)
			if ok != tt.wantOK || !got.Equal(tt.want) {
				t.Errorf("Next(%v, %v) = %v, %v; want %v, %v", tt.prev, tt.now, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// fires follows s from from to to as the scheduler does: each fire is
// the next after the last, asked for at the last.
func fires(t *testing.T, s cronjobs.Schedule, from, to time.Time) []time.Time {
	t.Helper()
	var got []time.Time
	prev, ok := s.Next(time.Time{}, from)
	for ok && prev.Before(to) {
		if len(got) > 0 && !prev.After(got[len(got)-1]) {
			t.Fatalf("%s: %v follows %v", s, prev, got[len(got)-1])
		}
		got = append(got, prev)
		prev, ok = s.Next(prev, prev)
	}
	return got
}

// TestNextDST pins down the fires of daily and hourly jobs in New York
// across both of 2026's transitions: 02:00 EST jumps to 03:00 EDT on
// March 8, and 02:00 EDT falls back to 01:00 EST on November 1. A daily
// job fires once each day, its wall time shifted when the gap skips it
// and at its first occurrence when the hour repeats.
func TestNextDST(t *testing.T) {
	ny := zone(t, "America/New_York")
	day := func(mo time.Month, d int) time.Time { return time.Date(2026, mo, d, 0, 0, 0, 0, ny) }
	est := func(mo time.Month, d, h, m int) time.Time {
		return time.Date(2026, mo, d, h+5, m, 0, 0, time.UTC)
	}
	edt := func(mo time.Month, d, h, m int) time.Time {
		return time.Date(2026, mo, d, h+4, m, 0, 0, time.UTC)
	}
	tests := []struct {
		desc     string
		expr     string
		from, to time.Time
		want     []time.Time
	}{
		{desc: "02:30 over spring-forward: March 8's fires at 03:30 EDT", expr: "30 2 * * *", from: day(3, 7), to: day(3, 11),
			want: []time.Time{est(3, 7, 2, 30), edt(3, 8, 3, 30), edt(3, 9, 2, 30), edt(3, 10, 2, 30)}},
		{desc: "01:30 over spring-forward", expr: "30 1 * * *", from: day(3, 7), to: day(3, 11),
			want: []time.Time{est(3, 7, 1, 30), est(3, 8, 1, 30), edt(3, 9, 1, 30), edt(3, 10, 1, 30)}},
		{desc: "02:30 over fall-back", expr: "30 2 * * *", from: day(10, 31), to: day(11, 4),
			want: []time.Time{edt(10, 31, 2, 30), est(11, 1, 2, 30), est(11, 2, 2, 30), est(11, 3, 2, 30)}},
		{desc: "01:30 over fall-back: November 1's fires once, at 01:30 EDT", expr: "30 1 * * *", from: day(10, 31), to: day(11, 4),
			want: []time.Time{edt(10, 31, 1, 30), edt(11, 1, 1, 30), est(11, 2, 1, 30), est(11, 3, 1, 30)}},
		{desc: "hourly over spring-forward: 02:00 is 03:00, once", expr: "0 * * * *", from: day(3, 8), to: day(3, 8).Add(5 * time.Hour),
			want: []time.Time{est(3, 8, 1, 0), edt(3, 8, 3, 0), edt(3, 8, 4, 0), edt(3, 8, 5, 0)}},
		{desc: "hourly over fall-back: 01:00 once, at its first occurrence", expr: "0 * * * *", from: day(11, 1), to: day(11, 1).Add(5 * time.Hour),
			want: []time.Time{edt(11, 1, 1, 0), est(11, 1, 2, 0), est(11, 1, 3, 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := fires(t, mustParse(t, tt.expr, "America/New_York"), tt.from, tt.to)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("fires (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNextDSTOncePerDay walks every minute and hour of a day across
// both transitions: each daily wall time fires once per calendar day,
// and no schedule fires twice at one instant or goes back.
func TestNextDSTOncePerDay(t *testing.T) {
	// Lord Howe moves its clocks by 30 minutes at 02:00: forward on
	// October 4, 2026, back on April 5, 2026.
	for _, tz := range []struct {
		name   string
		months []time.Month
		days   []int
	}{
		{name: "America/New_York", months: []time.Month{3, 10}, days: []int{7, 31}},
		{name: "Australia/Lord_Howe", months: []time.Month{4, 10}, days: []int{4, 3}},
	} {
		loc := zone(t, tz.name)
		for i, mo := range tz.months {
			from := time.Date(2026, mo, tz.days[i], 0, 0, 0, 0, loc)
			to := from.AddDate(0, 0, 4)
			for h := range 24 {
				for _, m := range []int{0, 15, 30, 45, 59} {
					expr := time.Date(2000, 1, 1, h, m, 0, 0, time.UTC).Format("4 15 * * *")
					days := map[string]int{}
					for _, f := range fires(t, mustParse(t, expr, tz.name), from.Add(-time.Second), to) {
						days[f.In(loc).Format(time.DateOnly)]++
					}
					want := map[string]int{}
					for d := from; d.Before(to); d = d.AddDate(0, 0, 1) {
						want[d.Format(time.DateOnly)] = 1
					}
					if diff := cmp.Diff(want, days); diff != "" {
						t.Errorf("%q in %s from %s: fires per day (-want +got):\n%s", expr, tz.name, from.Format(time.DateOnly), diff)
					}
				}
			}
			for _, expr := range []string{"0 * * * *", "*/15 * * * *", "* * * * *"} {
				fires(t, mustParse(t, expr, tz.name), from, to) // fails on a repeat or a step back
			}
		}
	}
}

func TestPeriod(t *testing.T) {
	ny := zone(t, "America/New_York")
	tests := []struct {
		desc string
		s    cronjobs.Schedule
		at   time.Time
		want time.Duration
	}{
		{desc: "once", s: mustParse(t, "2h", ""), at: now, want: 0},
		{desc: "interval", s: mustParse(t, "every 45m", ""), at: now, want: 45 * time.Minute},
		{desc: "hourly", s: mustParse(t, "@hourly", ""), at: now, want: time.Hour},
		{desc: "every 15 minutes", s: mustParse(t, "*/15 * * * *", ""), at: now, want: 15 * time.Minute},
		{desc: "weekdays over a weekend", s: mustParse(t, "0 9 * * 1-5", ""), at: now.Add(-24 * time.Hour), want: 72 * time.Hour},
		{desc: "daily over spring-forward", s: mustParse(t, "0 12 * * *", "America/New_York"), at: time.Date(2026, 3, 7, 11, 0, 0, 0, ny), want: 23 * time.Hour},
		{desc: "a date that never comes", s: mustParse(t, "0 0 30 2 *", ""), at: now, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := tt.s.Period(tt.at); got != tt.want {
				t.Errorf("Period = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGrace(t *testing.T) {
	tests := []struct {
		desc   string
		period time.Duration
		want   time.Duration
	}{
		{desc: "a one-shot", period: 0, want: 2 * time.Minute},
		{desc: "every minute: the floor", period: time.Minute, want: 2 * time.Minute},
		{desc: "every 4 minutes: the floor exactly", period: 4 * time.Minute, want: 2 * time.Minute},
		{desc: "every 30 minutes: half", period: 30 * time.Minute, want: 15 * time.Minute},
		{desc: "every 4 hours: the ceiling exactly", period: 4 * time.Hour, want: 2 * time.Hour},
		{desc: "daily: the ceiling", period: 24 * time.Hour, want: 2 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := cronjobs.Grace(tt.period); got != tt.want {
				t.Errorf("Grace(%v) = %v, want %v", tt.period, got, tt.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		desc string
		s    cronjobs.Schedule
		want string
	}{
		{desc: "once", s: mustParse(t, "2026-12-03T09:00", ""), want: "once at 2026-12-03 09:00 UTC"},
		{desc: "once in a zone", s: mustParse(t, "2026-12-03T09:00", "America/New_York"), want: "once at 2026-12-03 09:00 America/New_York"},
		{desc: "once with seconds", s: mustParse(t, "2026-12-03T09:00:30Z", ""), want: "once at 2026-12-03 09:00:30 UTC"},
		{desc: "a delay", s: mustParse(t, "90m", ""), want: "once at 2026-05-01 11:30 UTC"},
		{desc: "every", s: mustParse(t, "every 30m", ""), want: "every 30m"},
		{desc: "every, as @every", s: mustParse(t, "@every 90m", ""), want: "every 1h30m"},
		{desc: "every day and a half", s: mustParse(t, "every 36h", ""), want: "every 1d12h"},
		{desc: "cron", s: mustParse(t, "0 9 * * 1-5", "America/New_York"), want: "cron 0 9 * * 1-5 (America/New_York)"},
		{desc: "a descriptor", s: mustParse(t, "@daily", ""), want: "@daily (UTC)"},
		{desc: "a stored cron without a zone", s: cronjobs.Schedule{Kind: cronjobs.KindCron, Expr: "0 9 * * *"}, want: "cron 0 9 * * * (UTC)"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := tt.s.String(); got != tt.want {
				t.Errorf("String = %q, want %q", got, tt.want)
			}
		})
	}
}

// BenchmarkNext is one scheduler pass over 10,000 cron jobs of a few
// shapes and zones.
func BenchmarkNext(b *testing.B) {
	exprs := []string{"0 9 * * 1-5", "*/5 * * * *", "30 2 * * *", "@hourly", "15 14 1 * *"}
	tzs := []string{"UTC", "America/New_York", "Asia/Kolkata", "Europe/Paris"}
	jobs := make([]cronjobs.Schedule, 10000)
	for i := range jobs {
		jobs[i] = mustParse(b, exprs[i%len(exprs)], tzs[i%len(tzs)])
	}
	at := now
	for b.Loop() {
		for _, s := range jobs {
			if _, ok := s.Next(at, at); !ok {
				b.Fatal("no next fire")
			}
		}
		at = at.Add(time.Minute)
	}
}
