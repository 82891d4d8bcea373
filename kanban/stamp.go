package kanban

import "time"

// StampBase is the instant a change the store stamps (Change.Stamp) is
// decided at: the service decides as if it were StampBase, so every
// instant it derives from the time is StampBase plus an offset (a
// claim's expiry is StampBase plus its ttl), and the store writes each
// as its own clock, read inside the write, plus that offset. No instant
// a board keeps falls in 1970, so the instants a change carries from
// before (a card's creation, a schedule a person set) are written as
// they are.
var StampBase = time.Unix(0, 0).UTC()

// stampEnd is where the stamped instants end: an offset is under a year.
var stampEnd = time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC)

// StampTime is t as a change stamped at now writes it: now plus t's
// offset from StampBase when t is a stamped instant, else t.
func StampTime(t, now time.Time) time.Time {
	if t.Before(StampBase) || !t.Before(stampEnd) {
		return t
	}
	return now.Add(t.Sub(StampBase))
}

// Stamped is c as a store writes it at now: every stamped instant of
// its cards, runs, events, comments and attachments moved to now (see
// StampBase). c itself is left as it is; Stamp is cleared.
func (c Change) Stamped(now time.Time) Change {
	c.Stamp = false
	c.Cards = cloneMap(c.Cards, func(w CardWrite) CardWrite { w.Card = StampCard(w.Card, now); return w })
	c.Runs = cloneMap(c.Runs, func(r Run) Run {
		r.Started, r.Ended = StampTime(r.Started, now), StampTime(r.Ended, now)
		return r
	})
	c.Events = cloneMap(c.Events, func(e Event) Event { e.At = StampTime(e.At, now); return e })
	c.Comments = cloneMap(c.Comments, func(cm Comment) Comment { cm.At = StampTime(cm.At, now); return cm })
	c.Attachments = cloneMap(c.Attachments, func(a Attachment) Attachment {
		a.CreatedAt = StampTime(a.CreatedAt, now)
		return a
	})
	return c
}

// StampCard is k as a change stamped at now writes it.
func StampCard(k Card, now time.Time) Card {
	for _, t := range []*time.Time{&k.CreatedAt, &k.UpdatedAt, &k.ReadyAt, &k.CompletedAt, &k.RetryAt, &k.ScheduledAt} {
		*t = StampTime(*t, now)
	}
	if k.Claim != nil {
		cl := *k.Claim
		cl.Expires, cl.Heartbeat, cl.Started = StampTime(cl.Expires, now), StampTime(cl.Heartbeat, now), StampTime(cl.Started, now)
		if cl.Stop != nil {
			st := *cl.Stop
			st.At = StampTime(st.At, now)
			cl.Stop = &st
		}
		k.Claim = &cl
	}
	return k
}

// cloneMap is a new slice of f of each of xs (nil for none).
func cloneMap[T any](xs []T, f func(T) T) []T {
	if xs == nil {
		return nil
	}
	out := make([]T, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// stampOf is the instant a stamped change was written at, from its
// first event as sent and as Apply returned it; ok is false when it has
// no event to tell.
func stampOf(sent Change, got []Event) (now time.Time, ok bool) {
	if len(sent.Events) == 0 || len(got) == 0 {
		return time.Time{}, false
	}
	return got[0].At.Add(-sent.Events[0].At.Sub(StampBase)), true
}
