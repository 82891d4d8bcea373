// Package logcalm keeps a log readable while something keeps failing.
// A loop that polls a store which is down (out of memory, unreachable)
// warns on every try, several times a second; the gateway's log would
// hold little else. Handler passes the first of identical warnings and
// then one a window, with the count of those left out in between.
package logcalm

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// RepeatedKey is the attribute that tells how many identical records
// were left out since the one shown before.
const RepeatedKey = "repeated"

// maxKept bounds the records remembered: past it, those shown more than
// a window ago are forgotten, and while all are younger a new record
// passes without being remembered (told, not calmed).
const maxKept = 256

// Handler wraps h so that a warning or error identical to one shown less
// than window ago (same level, message and attributes, those of the
// logger's With and groups included; the time aside) is counted rather
// than handled. The next one shown after the window carries the count
// (RepeatedKey); when none comes (the failure ended), the count is not
// told. Records below slog.LevelWarn, and records without a time, pass
// as they are. A window of zero or less returns h.
func Handler(h slog.Handler, window time.Duration) slog.Handler {
	if window <= 0 {
		return h
	}
	return &handler{h: h, seen: &seen{window: window, last: map[string]*repeat{}}}
}

type seen struct {
	window time.Duration
	mu     sync.Mutex
	last   map[string]*repeat
}

// repeat is a record as last shown: when, and how many identical ones
// were left out since.
type repeat struct {
	shown   time.Time
	omitted int
}

// pass reports whether a record of key at t is shown, and how many
// identical ones were left out before it.
func (s *seen) pass(key string, t time.Time) (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.last[key]
	if ok && t.Sub(r.shown) < s.window {
		r.omitted++
		return false, 0
	}
	if !ok {
		if len(s.last) >= maxKept {
			for k, old := range s.last {
				if t.Sub(old.shown) >= s.window {
					delete(s.last, k)
				}
			}
			if len(s.last) >= maxKept {
				return true, 0
			}
		}
		r = &repeat{}
		s.last[key] = r
	}
	omitted := r.omitted
	r.shown, r.omitted = t, 0
	return true, omitted
}

type handler struct {
	h    slog.Handler
	seen *seen
	// with is what the logger's With and WithGroup added, as they key a
	// record.
	with string
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn || r.Time.IsZero() {
		return h.h.Handle(ctx, r)
	}
	var key strings.Builder
	key.WriteString(h.with)
	key.WriteString(r.Level.String())
	key.WriteByte(0)
	key.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		key.WriteByte(0)
		key.WriteString(a.String())
		return true
	})
	show, omitted := h.seen.pass(key.String(), r.Time)
	if !show {
		return nil
	}
	if omitted > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int(RepeatedKey, omitted))
	}
	return h.h.Handle(ctx, r)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	var with strings.Builder
	with.WriteString(h.with)
	for _, a := range as {
		with.WriteString(a.String())
		with.WriteByte(0)
	}
	return &handler{h: h.h.WithAttrs(as), seen: h.seen, with: with.String()}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{h: h.h.WithGroup(name), seen: h.seen, with: h.with + name + ".\x00"}
}
