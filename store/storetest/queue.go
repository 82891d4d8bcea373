package storetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/sessions"
)

func runQueue(t *testing.T, b Backend) {
	const conv = "telegram:1"
	order := []struct {
		desc string
		in   []sessions.Inbound
		want []string // texts in the order the entries are handed out
	}{
		{
			desc: "FIFO within one lane",
			in: []sessions.Inbound{
				user(conv, "1"), user(conv, "2"), user(conv, "3"), user(conv, "4"), user(conv, "5"),
				user(conv, "6"), user(conv, "7"), user(conv, "8"), user(conv, "9"), user(conv, "10"),
			},
			want: []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"},
		},
		{
			desc: "user entries before synthetic ones",
			in: []sessions.Inbound{
				synthetic(conv, "s1"), user(conv, "u1"), synthetic(conv, "s2"), user(conv, "u2"), synthetic(conv, "s3"),
			},
			want: []string{"u1", "u2", "s1", "s2", "s3"},
		},
		{
			desc: "higher priority first within user entries",
			in: []sessions.Inbound{
				withPriority(user(conv, "low"), sessions.PriorityLow),
				user(conv, "normal1"),
				withPriority(user(conv, "high1"), sessions.PriorityHigh),
				user(conv, "normal2"),
				withPriority(user(conv, "high2"), sessions.PriorityHigh),
			},
			want: []string{"high1", "high2", "normal1", "normal2", "low"},
		},
		{
			desc: "higher priority first within synthetic entries, all after user entries",
			in: []sessions.Inbound{
				withPriority(synthetic(conv, "s-high"), sessions.PriorityHigh),
				withPriority(user(conv, "u-low"), sessions.PriorityLow),
				withPriority(synthetic(conv, "s-low"), sessions.PriorityLow),
				synthetic(conv, "s-normal"),
			},
			want: []string{"u-low", "s-high", "s-normal", "s-low"},
		},
		{
			desc: "priorities beyond the range count as high and low",
			in: []sessions.Inbound{
				withPriority(user(conv, "low"), -100),
				withPriority(user(conv, "high1"), sessions.PriorityHigh),
				user(conv, "normal"),
				withPriority(user(conv, "high2"), 100),
			},
			want: []string{"high1", "high2", "normal", "low"},
		},
		{
			desc: "an empty kind is a user entry",
			in: []sessions.Inbound{
				synthetic(conv, "s"),
				{Conv: conv, Text: "no kind"},
			},
			want: []string{"no kind", "s"},
		},
	}
	for _, tc := range order {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, b, sessions.Limits{})
			f.appendAll(tc.in...)
			if d := cmp.Diff(tc.want, f.drain("w1", conv)); d != "" {
				t.Errorf("order (-want +got):\n%s", d)
			}
			f.noClaim("w1")
		})
	}

	t.Run("conversations do not mix", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		for _, text := range []string{"1", "2", "3"} {
			f.appendAll(user("a", "a"+text), user("b", "b"+text))
		}
		if d := cmp.Diff([]string{"a1", "a2", "a3"}, f.drain("w1", "a")); d != "" {
			t.Errorf("conversation a (-want +got):\n%s", d)
		}
		if d := cmp.Diff([]string{"b1", "b2", "b3"}, f.drain("w1", "b")); d != "" {
			t.Errorf("conversation b (-want +got):\n%s", d)
		}
	})

	// Backends build key names from conversation keys; keys that differ
	// only in characters a backend escapes must stay apart.
	t.Run("conversation keys with odd characters stay apart", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		convs := []string{"a}b", "a%7Db", "a{b}", "a%b", "a%25b", "ü:ñ", "x y", "*", "a:q0", "discord:1:2:3"}
		for _, conv := range convs {
			f.appendAll(user(conv, "1 "+conv), user(conv, "2 "+conv))
			if err := f.ss.SetMeta(f.ctx, conv, "k", conv); err != nil {
				t.Fatalf("SetMeta(%q): %v", conv, err)
			}
		}
		want := map[string][]string{}
		for _, conv := range convs {
			want[conv] = []string{"1 " + conv, "2 " + conv}
		}
		checkQueued(f, want)
		for _, conv := range convs {
			if d := cmp.Diff(map[string]string{"k": conv}, f.meta(conv)); d != "" {
				t.Errorf("Meta(%q) (-want +got):\n%s", conv, d)
			}
		}
	})

	t.Run("entry and lease fields round-trip", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		in := sessions.Inbound{
			Conv:      "slack:T1:C2",
			Sender:    "U123",
			MessageID: "1712345678.000100",
			Text:      "héllo, wörld ✓\nsecond line",
			Attachments: []sessions.Attachment{
				{Name: "report.pdf", MIME: "application/pdf", Size: 12345, URL: "https://files.example/report.pdf", PlatformID: "F1"},
				{Name: "photo.jpg", MIME: "image/jpeg"},
			},
			Kind:     sessions.KindUser,
			Priority: sessions.PriorityHigh,
			Meta:     map[string]string{"thread_ts": "1712345000.000001", "reply_to": "42"},
		}
		enqueued := f.clk.Now()
		r := f.append(in)
		if r.Duplicate || r.EntryID == "" {
			t.Fatalf("Append = %+v, want a new entry with an id", r)
		}
		f.clk.Advance(5 * tick)
		claimedAt := f.clk.Now()
		turn := f.mustClaim("w1")

		want := sessions.Turn{
			Lease: sessions.Lease{Conv: in.Conv, Worker: "w1", Token: turn.Lease.Token, Expires: claimedAt.Add(ttl)},
			Entry: sessions.Entry{Inbound: in, ID: r.EntryID, EnqueuedAt: enqueued, Deliveries: 1},
			// A new conversation's history is empty, and the claim read
			// it, and found no controller's state.
			HistoryRead:  true,
			Uncontrolled: true,
		}
		if d := cmp.Diff(want, *turn, timeOpts); d != "" {
			t.Errorf("Claim (-want +got):\n%s", d)
		}
		if turn.Lease.Token <= 0 {
			t.Errorf("lease token = %d, want > 0", turn.Lease.Token)
		}
	})

	t.Run("next before the ack returns the same entry", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.appendAll(user("c", "first"), user("c", "second"))
		turn := f.mustClaim("w1")
		e := f.next(turn.Lease)
		if e == nil || e.ID != turn.Entry.ID {
			t.Fatalf("Next before the ack = %+v, want entry %q again", e, turn.Entry.ID)
		}
		f.finish(turn.Lease, sessions.Finish{EntryID: e.ID})
		if e := f.next(turn.Lease); e == nil || e.Text != "second" {
			t.Errorf("Next after the ack = %+v, want entry \"second\"", e)
		}
	})
}

// runAppendMeta: Append hands back the conversation's metadata, which is
// what the router decides on, and only for a new entry.
func runAppendMeta(t *testing.T, b Backend) {
	f := newFixture(t, b, sessions.Limits{})
	if r := f.append(user("c", "first")); len(r.Meta) != 0 {
		t.Errorf("Append to a conversation without metadata: Meta = %v, want none", r.Meta)
	}
	for k, v := range map[string]string{sessions.ConvMetaSession: "s-1", sessions.ConvMetaBusyInputMode: "steer"} {
		if err := f.ss.SetMeta(f.ctx, "c", k, v); err != nil {
			t.Fatalf("SetMeta(%s): %v", k, err)
		}
	}
	r := f.append(withMessageID(user("c", "second"), "m2"))
	want := map[string]string{sessions.ConvMetaSession: "s-1", sessions.ConvMetaBusyInputMode: "steer"}
	if diff := cmp.Diff(want, r.Meta); diff != "" {
		t.Errorf("Append: Meta mismatch (-want +got):\n%s", diff)
	}
	if r := f.append(user("other", "x")); len(r.Meta) != 0 {
		t.Errorf("Append to another conversation: Meta = %v, want none", r.Meta)
	}
	if r := f.append(withMessageID(user("c", "again"), "m2")); !r.Duplicate || r.Meta != nil {
		t.Errorf("duplicate Append = %+v, want Duplicate and no Meta", r)
	}
}
