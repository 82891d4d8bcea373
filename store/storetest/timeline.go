package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// item builds a timeline item; the id names it in the cases' expectations.
func item(conv, id, text string) sessions.TimelineItem {
	return sessions.TimelineItem{ID: id, Conv: conv, Kind: "reply", Text: text}
}

func (f *fixture) appendTimeline(it sessions.TimelineItem) string {
	f.t.Helper()
	cursor, err := f.tl.AppendTimeline(f.ctx, it)
	if err != nil {
		f.t.Fatalf("AppendTimeline(%q, %q): %v", it.Conv, it.ID, err)
	}
	if cursor == "" {
		f.t.Fatalf("AppendTimeline(%q, %q): empty cursor", it.Conv, it.ID)
	}
	return cursor
}

// appendTimelineAll appends its in order, the clock moving a tick after
// each, and returns them as a read should give them back.
func (f *fixture) appendTimelineAll(its ...sessions.TimelineItem) []sessions.TimelineItem {
	f.t.Helper()
	out := make([]sessions.TimelineItem, len(its))
	for i, it := range its {
		at := f.clk.Now()
		it.Cursor = f.appendTimeline(it)
		it.At = at
		out[i] = it
		f.clk.Advance(tick)
	}
	return out
}

func (f *fixture) readTimeline(conv, after string, limit int) []sessions.TimelineItem {
	f.t.Helper()
	its, err := f.tl.ReadTimeline(f.ctx, conv, after, limit)
	if err != nil {
		f.t.Fatalf("ReadTimeline(%q, %q, %d): %v", conv, after, limit, err)
	}
	return its
}

// timelineEnd returns conv's TimelineEnd, failing the test on an error.
func (f *fixture) timelineEnd(conv string) string {
	f.t.Helper()
	cursor, err := f.tl.TimelineEnd(f.ctx, conv)
	if err != nil {
		f.t.Fatalf("TimelineEnd(%q): %v", conv, err)
	}
	return cursor
}

// wantTimeline compares timeline reads field by field, times to the
// millisecond.
func wantTimeline(t *testing.T, what string, got, want []sessions.TimelineItem) {
	t.Helper()
	if d := cmp.Diff(want, got, timeOpts); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

func runTimeline(t *testing.T, b Backend) {
	t.Run("a bound keeps each conversation's newest items", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{TimelineMax: 3})
		all := f.appendTimelineAll(item("c", "m1", "one"), item("c", "m2", "two"), item("d", "n1", "other"),
			item("c", "m3", "three"), item("c", "m4", "four"), item("c", "m5", "five"))
		kept := []sessions.TimelineItem{all[3], all[4], all[5]}
		wantTimeline(t, "ReadTimeline from the start", f.readTimeline("c", "", 10), kept)
		// A cursor of an item dropped since still reads on from there.
		wantTimeline(t, "ReadTimeline after a dropped item", f.readTimeline("c", all[0].Cursor, 10), kept)
		wantTimeline(t, "the other conversation", f.readTimeline("d", "", 10), []sessions.TimelineItem{all[2]})
		// A kept item is still there once: appending it again adds nothing.
		if got := f.appendTimeline(item("c", "m4", "four")); got != all[4].Cursor {
			t.Errorf("appending a kept item again = cursor %q, want its own %q", got, all[4].Cursor)
		}
		wantTimeline(t, "ReadTimeline after appending a kept item again", f.readTimeline("c", "", 10), kept)
		// A dropped item's id went with it: appending it adds it anew,
		// last, and drops the oldest kept.
		again := f.appendTimelineAll(item("c", "m1", "one"))
		wantTimeline(t, "ReadTimeline after appending a dropped item again", f.readTimeline("c", "", 10),
			[]sessions.TimelineItem{all[4], all[5], again[0]})
		if got := f.timelineEnd("c"); got != again[0].Cursor {
			t.Errorf("TimelineEnd with a bound = %q, want the newest item's %q", got, again[0].Cursor)
		}
	})

	t.Run("items in order with their cursors, the store's time and every field, files too", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		notice := item("c", "m3", "Working on it…\n\n— with a blank line")
		notice.Kind = "notice"
		// What the caller puts in Cursor and At is not kept: the store
		// sets both.
		early := item("c", "m1", "one")
		early.Cursor, early.At = "999", t0.Add(-time.Hour)
		early.ReplyTo = "in-7"
		early.Meta = map[string]string{"herald.end": "done", "herald.prompt_tokens": "12", "quote": `"a}b'`}
		sent := item("c", "m4", "")
		sent.Kind = "file"
		sent.Files = []sessions.TimelineFile{
			{Name: "chart \"final\".png", MIME: "image/png", Size: 2048, URL: "/api/v1/conversations/c/files/out-1"},
			{Name: "notes", Size: 1, URL: "/f/2"},
		}
		want := f.appendTimelineAll(early, item("d", "m2", "elsewhere"), notice, sent)
		c := []sessions.TimelineItem{want[0], want[2], want[3]}

		wantTimeline(t, "ReadTimeline(c)", f.readTimeline("c", "", 10), c)
		wantTimeline(t, "ReadTimeline(d)", f.readTimeline("d", "", 10), want[1:2])
		seen := map[string]bool{}
		for _, it := range c {
			if seen[it.Cursor] {
				t.Errorf("cursor %q handed out twice", it.Cursor)
			}
			seen[it.Cursor] = true
		}
		if got := f.readTimeline("never-used", "", 10); len(got) != 0 {
			t.Errorf("ReadTimeline of a conversation without items = %+v, want none", got)
		}
	})

	t.Run("read after a cursor, up to a limit", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		all := f.appendTimelineAll(item("c", "1", "a"), item("c", "2", "b"), item("c", "3", "c"), item("c", "4", "d"), item("c", "5", "e"))
		f.appendTimelineAll(item("other", "6", "not c's"))

		wantTimeline(t, "first page", f.readTimeline("c", "", 2), all[:2])
		wantTimeline(t, "second page", f.readTimeline("c", all[1].Cursor, 2), all[2:4])
		wantTimeline(t, "last page", f.readTimeline("c", all[3].Cursor, 2), all[4:])
		wantTimeline(t, "after the end", f.readTimeline("c", all[4].Cursor, 2), nil)
		wantTimeline(t, "after the first, no smaller limit", f.readTimeline("c", all[0].Cursor, 10), all[1:])

		// A reader that caught up sees what comes next.
		more := f.appendTimelineAll(item("c", "7", "f"))
		wantTimeline(t, "after the end once more arrived", f.readTimeline("c", all[4].Cursor, 10), more)
	})

	t.Run("the end is the newest item's cursor", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		if got := f.timelineEnd("c"); got != "" {
			t.Errorf("TimelineEnd of a conversation without items = %q, want \"\"", got)
		}
		all := f.appendTimelineAll(item("c", "m1", "one"), item("c", "m2", "two"), item("d", "n1", "d's"))
		if got := f.timelineEnd("c"); got != all[1].Cursor {
			t.Errorf("TimelineEnd(c) = %q, want its newest item's %q", got, all[1].Cursor)
		}
		if got := f.timelineEnd("d"); got != all[2].Cursor {
			t.Errorf("TimelineEnd(d) = %q, want %q", got, all[2].Cursor)
		}
		// An item appended again is not newer: the end stays.
		f.appendTimeline(item("c", "m1", "one again"))
		end := f.timelineEnd("c")
		if end != all[1].Cursor {
			t.Errorf("TimelineEnd after a repeated append = %q, want %q", end, all[1].Cursor)
		}
		// A read after the end returns only what is added since.
		wantTimeline(t, "ReadTimeline after the end", f.readTimeline("c", end, 10), nil)
		more := f.appendTimelineAll(item("c", "m3", "three"))
		wantTimeline(t, "ReadTimeline after the end once more arrived", f.readTimeline("c", end, 10), more)
		if got := f.timelineEnd("c"); got != more[0].Cursor {
			t.Errorf("TimelineEnd after another append = %q, want %q", got, more[0].Cursor)
		}
	})

	t.Run("appending an item id again adds nothing", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		first := f.appendTimelineAll(item("c", "m1", "the reply"), item("c", "m2", "next"))
		// A resend after a crash between the append and the outbox ack.
		again := item("c", "m1", "the reply, sent again")
		again.Kind = "notice"
		if cursor := f.appendTimeline(again); cursor != first[0].Cursor {
			t.Errorf("AppendTimeline of a seen id = cursor %q, want the first one's %q", cursor, first[0].Cursor)
		}
		wantTimeline(t, "ReadTimeline after the repeat", f.readTimeline("c", "", 10), first)

		// Ids are per conversation: another conversation's item with the
		// same id is its own.
		other := f.appendTimelineAll(item("d", "m1", "d's own"))
		wantTimeline(t, "ReadTimeline(d)", f.readTimeline("d", "", 10), other)
		wantTimeline(t, "ReadTimeline(c) after d's item", f.readTimeline("c", "", 10), first)
	})

	for _, cursor := range []string{"not a cursor", "-1", "1.5", "abc-def", "1;2"} {
		t.Run("bad cursor "+cursor, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			f.appendTimelineAll(item("c", "m1", "one"))
			_, err := f.tl.ReadTimeline(f.ctx, "c", cursor, 10)
			wantCode(t, "ReadTimeline", err, errs.Invalid)
		})
	}

	bad := []struct {
		desc string
		item sessions.TimelineItem
		code errs.Code
	}{
		{"empty conversation key", item("", "m1", "x"), errs.Invalid},
		{"blank conversation key", item(" \t", "m1", "x"), errs.Invalid},
		{"control character in the key", item("c\n", "m1", "x"), errs.Invalid},
		{"empty item id", item("c", "", "x"), errs.Invalid},
		{"text over the size limit", item("c", "m1", big(2*smallLimit)), errs.TooLarge},
		{"reply_to over the size limit", sessions.TimelineItem{ID: "m1", Conv: "c", Kind: "reply", Text: "x", ReplyTo: big(2 * smallLimit)}, errs.TooLarge},
		{"meta over the size limit", sessions.TimelineItem{ID: "m1", Conv: "c", Kind: "reply", Text: "x", Meta: map[string]string{"k": big(2 * smallLimit)}}, errs.TooLarge},
		{"files over the size limit", sessions.TimelineItem{ID: "m1", Conv: "c", Kind: "file", Files: []sessions.TimelineFile{{Name: big(2 * smallLimit)}}}, errs.TooLarge},
	}
	for _, tc := range bad {
		t.Run("bad item: "+tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{MaxEntryBytes: smallLimit})
			_, err := f.tl.AppendTimeline(f.ctx, tc.item)
			wantCode(t, "AppendTimeline", err, tc.code)
			if got := f.readTimeline("c", "", 10); len(got) != 0 {
				t.Errorf("ReadTimeline after a refused append = %+v, want none", got)
			}
			// Its id was not remembered either.
			want := f.appendTimelineAll(item("c", "m1", "fine"))
			wantTimeline(t, "ReadTimeline after a good append", f.readTimeline("c", "", 10), want)
		})
	}

	t.Run("read of a bad conversation key", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		_, err := f.tl.ReadTimeline(f.ctx, "", "", 10)
		wantCode(t, "ReadTimeline", err, errs.Invalid)
		_, err = f.tl.TimelineEnd(f.ctx, "c\n")
		wantCode(t, "TimelineEnd", err, errs.Invalid)
	})

	for _, restart := range []bool{false, true} {
		desc := "kept across close and reopen"
		if restart {
			desc = "kept across a server restart"
		}
		t.Run(desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			before := f.appendTimelineAll(item("c", "m1", "one"), item("c", "m2", "two"))
			f.reopen(restart)
			wantTimeline(t, "ReadTimeline after reopening", f.readTimeline("c", "", 10), before)
			if got := f.timelineEnd("c"); got != before[1].Cursor {
				t.Errorf("TimelineEnd after reopening = %q, want %q", got, before[1].Cursor)
			}
			if cursor := f.appendTimeline(item("c", "m1", "again")); cursor != before[0].Cursor {
				t.Errorf("AppendTimeline of a seen id after reopening = %q, want %q", cursor, before[0].Cursor)
			}
			after := f.appendTimelineAll(item("c", "m3", "three"))
			wantTimeline(t, "ReadTimeline after the last cursor from before", f.readTimeline("c", before[1].Cursor, 10), after)
		})
	}
}
