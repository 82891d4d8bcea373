package media_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// reply runs the capability's runner over a turn whose reply is text,
// and returns the reply it made and the message queued before it.
func (h *outboundHarness) reply(text string) (outbox.Message, outbox.Message) {
	h.t.Helper()
	h.innerText = text
	in := sessions.TurnInput{
		Conv:   "telegram:42",
		Entry:  sessions.Entry{ID: "e1", Inbound: sessions.Inbound{MessageID: "42:9"}},
		Origin: outbox.Target{Platform: "telegram", Chat: "42"},
	}
	out, err := h.cap.Runner.Run(context.Background(), &in)
	if err != nil || len(out.Outbox) != 2 {
		h.t.Fatalf("Run = %+v, %v; want a note and a reply", out.Outbox, err)
	}
	return out.Outbox[1], out.Outbox[0]
}

func TestRepliesSendTheWorkspacesPictures(t *testing.T) {
	h := newOutbound(t, nil)
	chart := pngBytes(t)
	write(t, h.ws, "out/chart.png", chart)
	write(t, h.ws, "my pics/a b.png", pngBytes(t))
	write(t, h.ws, "notes.txt", []byte("not a picture"))
	outside := write(t, t.TempDir(), "x.png", pngBytes(t))
	abs := filepath.Join(h.ws, "out", "chart.png")

	tests := []struct {
		desc, text, want string
		files            []string
	}{
		{"a relative path on its own line", "Here:\n\n![chart](out/chart.png)\n\nDone.", "Here:\n\nDone.", []string{"chart.png"}},
		{"an absolute path in the workspace, with a title", "See ![c](" + abs + ` "the chart") now`, "See  now", []string{"chart.png"}},
		{"a path with spaces, escaped or in brackets", "![a](my%20pics/a%20b.png)\n![b](<my pics/a b.png>)", "", []string{"a b.png"}},
		{"a URL stays text", "![x](https://example.com/x.png)", "![x](https://example.com/x.png)", nil},
		{"a path outside stays text", "![x](" + outside + ")", "![x](" + outside + ")", nil},
		{"a path out of the workspace stays text", "![x](../x.png)", "![x](../x.png)", nil},
		{"a file that is no picture stays text", "![n](notes.txt)", "![n](notes.txt)", nil},
		{"a missing file stays text", "![m](missing.png)", "![m](missing.png)", nil},
		{"in a code block it is code", "```md\n![chart](out/chart.png)\n```", "```md\n![chart](out/chart.png)\n```", nil},
		{"in inline code it is code", "write `![chart](out/chart.png)` for it", "write `![chart](out/chart.png)` for it", nil},
		{"a link is no picture", "[chart](out/chart.png)", "[chart](out/chart.png)", nil},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m, note := h.reply(tc.text)
			if m.Text != tc.want {
				t.Errorf("reply text %q, want %q", m.Text, tc.want)
			}
			var names []string
			for _, f := range m.Files {
				names = append(names, f.Name)
				if !f.Photo || f.MIME != "image/png" {
					t.Errorf("file %+v, want a PNG picture", f)
				}
				if got, err := h.files.File(context.Background(), f.Blob); err != nil || !bytes.HasPrefix(got, []byte("\x89PNG")) {
					t.Errorf("the store holds %d bytes under %s (%v), want the picture", len(got), f.Blob, err)
				}
			}
			if fmt.Sprint(names) != fmt.Sprint(tc.files) {
				t.Errorf("reply files %v, want %v", names, tc.files)
			}
			if len(note.Files) != 0 || note.Text != "a note" {
				t.Errorf("the message before the reply became %+v, want it as it was", note)
			}
		})
	}
}

func TestRepliesSendTenPicturesAtMost(t *testing.T) {
	h := newOutbound(t, nil)
	var b strings.Builder
	for i := range 12 {
		write(t, h.ws, fmt.Sprintf("p%d.png", i), append(pngBytes(t), byte(i)))
		fmt.Fprintf(&b, "![p](p%d.png)\n", i)
	}
	m, _ := h.reply(b.String())
	if len(m.Files) != 10 || m.Text != "![p](p10.png)\n![p](p11.png)" {
		t.Errorf("%d files and text %q, want 10 and the last two left as text", len(m.Files), m.Text)
	}
	// The same reply of the turn run again keeps its pictures under the
	// same ids.
	again, _ := h.reply(b.String())
	for i := range m.Files {
		if again.Files[i].Blob != m.Files[i].Blob {
			t.Errorf("picture %d kept under %s on a second run, want %s", i, again.Files[i].Blob, m.Files[i].Blob)
		}
	}
}

func TestRepliesKeepTheirPicturesAsTextWithoutAWorkspace(t *testing.T) {
	h := newOutbound(t, func(cfg *config.Config) { cfg.Tools.Workspace = "" })
	kept := write(t, h.home, "files/telegram:42/m1-a.png", pngBytes(t))
	if m, _ := h.reply("![a](" + kept + ")"); len(m.Files) != 0 {
		t.Errorf("files %+v without a workspace, want none", m.Files)
	}
	h = newOutbound(t, nil)
	write(t, h.ws, "a.png", pngBytes(t))
	h.files.fail = fmt.Errorf("the store is down")
	if m, _ := h.reply("![a](a.png)"); len(m.Files) != 0 || m.Text != "![a](a.png)" {
		t.Errorf("reply %+v when the store fails, want the picture left as text", m)
	}
}
