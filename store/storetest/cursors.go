package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// runCursors checks adapters.Cursors: the last value put per platform and
// channel, read back within a window by the store's clock.
func runCursors(t *testing.T, b Backend) {
	t.Run("the last put per channel, within the window", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		cs := f.st.Cursors()
		put := func(platform, channel, value string) {
			t.Helper()
			if err := cs.PutCursor(f.ctx, platform, channel, value); err != nil {
				t.Fatalf("PutCursor(%s, %s, %s): %v", platform, channel, value, err)
			}
		}
		read := func(platform string, within time.Duration, want map[string]string) {
			t.Helper()
			got, err := cs.Cursors(f.ctx, platform, within)
			if err != nil {
				t.Fatalf("Cursors(%s, %v): %v", platform, within, err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("Cursors(%s, %v) (-want +got):\n%s", platform, within, d)
			}
		}
		read("discord", time.Hour, map[string]string{})
		put("discord", "c1", "100")
		put("discord", "c1", "105")
		put("telegram", "c1", "7")
		f.clk.Advance(30 * time.Minute)
		put("discord", "c2", "|200|")
		read("discord", time.Hour, map[string]string{"c1": "105", "c2": "|200|"})
		read("telegram", time.Hour, map[string]string{"c1": "7"})
		// c1 was put 40 minutes ago, c2 10.
		f.clk.Advance(10 * time.Minute)
		read("discord", 20*time.Minute, map[string]string{"c2": "|200|"})
		// Kept across a reopen.
		f.reopen(false)
		cs = f.st.Cursors()
		read("discord", time.Hour, map[string]string{"c1": "105", "c2": "|200|"})
		f.clk.Advance(time.Hour)
		read("discord", time.Hour, map[string]string{})
	})

	t.Run("bad input is Invalid", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		cs := f.st.Cursors()
		long := strings.Repeat("x", adapters.MaxCursorBytes+1)
		for _, tc := range []struct{ desc, platform, channel, value string }{
			{"empty platform", "", "c", "1"},
			{"empty channel", "discord", "", "1"},
			{"empty value", "discord", "c", ""},
			{"overlong channel", "discord", long, "1"},
			{"overlong value", "discord", "c", long},
		} {
			wantCode(t, "PutCursor with "+tc.desc, cs.PutCursor(f.ctx, tc.platform, tc.channel, tc.value), errs.Invalid)
		}
		_, err := cs.Cursors(f.ctx, "", time.Hour)
		wantCode(t, "Cursors with an empty platform", err, errs.Invalid)
		_, err = cs.Cursors(f.ctx, "discord", 0)
		wantCode(t, "Cursors with a zero window", err, errs.Invalid)
		if got, err := cs.Cursors(f.ctx, "discord", time.Hour); err != nil || len(got) != 0 {
			t.Errorf("Cursors after the refused puts = %v, %v; want none", got, err)
		}
	})
}
