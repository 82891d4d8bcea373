package logcalm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// lines decodes the JSON lines a handler wrote.
func lines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestIdenticalWarningsShownOnceAWindow logs a failing poll's warning
// every 250 ms for a minute and a half: the first is shown, then the
// first after the window with the count of those left out; a warning
// with another error, another logger's (With) and an info are each
// shown as they come.
func TestIdenticalWarningsShownOnceAWindow(t *testing.T) {
	var b bytes.Buffer
	h := Handler(slog.NewJSONHandler(&b, nil), time.Minute)
	turns := h.WithAttrs([]slog.Attr{slog.String("part", "turns")})
	cron := h.WithAttrs([]slog.Attr{slog.String("part", "cron")})
	ctx := context.Background()
	start := time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC)
	oom := errors.New("OOM command not allowed")
	log := func(h slog.Handler, at time.Duration, level slog.Level, msg string, err error) {
		r := slog.NewRecord(start.Add(at), level, msg, 0)
		r.AddAttrs(slog.Any("err", err))
		if err := h.Handle(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for at := time.Duration(0); at <= 90*time.Second; at += 250 * time.Millisecond {
		log(turns, at, slog.LevelWarn, "claiming a turn failed", oom)
	}
	log(turns, 10*time.Second, slog.LevelWarn, "claiming a turn failed", errors.New("connection refused"))
	log(cron, 10*time.Second, slog.LevelWarn, "claiming a turn failed", oom)
	log(turns, 10*time.Second, slog.LevelInfo, "gateway started", nil)
	log(turns, 11*time.Second, slog.LevelInfo, "gateway started", nil)

	got := lines(t, &b)
	type line struct {
		part, msg, err string
		repeated       float64
	}
	var seen []line
	for _, m := range got {
		l := line{part: m["part"].(string), msg: m["msg"].(string)}
		l.err, _ = m["err"].(string)
		l.repeated, _ = m[RepeatedKey].(float64)
		seen = append(seen, l)
	}
	want := []line{
		{"turns", "claiming a turn failed", "OOM command not allowed", 0},
		// 240 tries in the minute after the first, the one at 60 s shown.
		{"turns", "claiming a turn failed", "OOM command not allowed", 239},
		{"turns", "claiming a turn failed", "connection refused", 0},
		{"cron", "claiming a turn failed", "OOM command not allowed", 0},
		{"turns", "gateway started", "", 0},
		{"turns", "gateway started", "", 0},
	}
	if len(seen) != len(want) {
		t.Fatalf("lines = %+v, want %+v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("line %d = %+v, want %+v", i, seen[i], want[i])
		}
	}
}

// TestManyDistinctWarningsAreKeptBounded logs more distinct warnings than
// are remembered, a window apart and a millisecond apart: each is shown
// once, and no more than maxKept are remembered (the old ones forgotten,
// the new ones past the bound not kept).
func TestManyDistinctWarningsAreKeptBounded(t *testing.T) {
	for _, apart := range []time.Duration{time.Minute, time.Millisecond} {
		var b bytes.Buffer
		h := Handler(slog.NewJSONHandler(&b, nil), time.Minute).(*handler)
		start := time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC)
		for i := range 3 * maxKept {
			r := slog.NewRecord(start.Add(time.Duration(i)*apart), slog.LevelWarn, "a card failed", 0)
			r.AddAttrs(slog.Int("card", i))
			if err := h.Handle(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(lines(t, &b)); n != 3*maxKept {
			t.Errorf("%s apart: %d lines, want %d", apart, n, 3*maxKept)
		}
		if n := len(h.seen.last); n > maxKept {
			t.Errorf("%s apart: %d records remembered, want at most %d", apart, n, maxKept)
		}
	}
}
