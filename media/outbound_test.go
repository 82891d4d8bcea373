package media_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/tools"
)

// memFiles is a media.Store in memory.
type memFiles struct {
	mu    sync.Mutex
	files map[string][]byte
	fail  error // returned by every PutFile when set
}

var _ media.Store = (*memFiles)(nil)

func newMemFiles() *memFiles { return &memFiles{files: map[string][]byte{}} }

func (m *memFiles) PutFile(_ context.Context, id string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.files[id] = bytes.Clone(data)
	return nil
}

func (m *memFiles) File(_ context.Context, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.files[id]
	if !ok {
		return nil, errs.E("mem.File", errs.NotFound, "no file %q", id)
	}
	return data, nil
}

func (m *memFiles) DeleteFile(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.files, id)
	return nil
}

func (m *memFiles) ids() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for id := range m.files {
		out = append(out, id)
	}
	return out
}

// outboundAssembly is what media.Outbound is made with in these tests.
type outboundAssembly struct {
	base  *capability.Assembly
	files *memFiles
}

func (a *outboundAssembly) Assembly() *capability.Assembly { return a.base }
func (a *outboundAssembly) Files() media.Store             { return a.files }

// runnerFunc is a sessions.TurnRunner made of a function.
type runnerFunc func(ctx context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error)

func (f runnerFunc) Run(ctx context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error) {
	return f(ctx, in)
}

const secret = "tg-secret-token-0123456789"

// outboundHarness is the capability made on a home, a workspace and a
// telegram platform whose home channel is 777.
type outboundHarness struct {
	t         *testing.T
	home, ws  string
	files     *memFiles
	cap       *capability.Capability
	set       *tools.Set
	inner     runnerFunc
	innerText string
}

func newOutbound(t *testing.T, change func(cfg *config.Config)) *outboundHarness {
	t.Helper()
	h := &outboundHarness{t: t, home: t.TempDir(), ws: t.TempDir(), files: newMemFiles()}
	cfg := config.Default()
	cfg.Home = h.home
	cfg.Tools.Workspace = h.ws
	cfg.Platforms.Telegram.HomeChannel = "777"
	if change != nil {
		change(&cfg)
	}
	reg := tools.NewRegistry()
	if err := tools.RegisterCore(reg, tools.CoreOptions{AllowedTargets: cfg.SendMessage.AllowedTargets}); err != nil {
		t.Fatal(err)
	}
	h.inner = func(_ context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error) {
		return &sessions.TurnOutput{Outbox: []outbox.Message{
			{Target: outbox.Target{Platform: "telegram", Chat: "42"}, Text: "a note", Kind: "message"},
			{Target: in.Origin, Text: h.innerText, Kind: "reply", ReplyTo: in.Entry.MessageID},
		}}, nil
	}
	a := &outboundAssembly{files: h.files, base: &capability.Assembly{
		Config:   cfg,
		Logger:   slog.New(slog.DiscardHandler),
		Redact:   func(s string) string { return strings.ReplaceAll(s, secret, "[REDACTED]") },
		Adapters: []adapters.Adapter{&adaptertest.Adapter{Name: "telegram"}},
		Registry: reg,
		Runner: runnerFunc(func(ctx context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error) {
			return h.inner(ctx, in)
		}),
	}}
	c, err := media.Outbound(a)
	if err != nil {
		t.Fatalf("Outbound: %v", err)
	}
	h.cap = c
	if h.set, err = reg.Set([]string{tools.Core}); err != nil {
		t.Fatal(err)
	}
	return h
}

// write puts a file of data at path under dir, its directories made.
func write(t *testing.T, dir, path string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// webpBytes is the start of a WebP file, as much as sniffing reads.
var webpBytes = []byte("RIFF\x24\x00\x00\x00WEBPVP8 \x18\x00\x00\x00\x30\x01\x00\x9d\x01\x2a\x01\x00\x01\x00")

// turn is a turn of the conversation telegram:42 answering entry e1.
func turn() *tools.Turn {
	return &tools.Turn{Conv: "telegram:42", Origin: outbox.Target{Platform: "telegram", Chat: "42"}, EntryID: "e1"}
}

// call runs send_file with args as call id on turn, and returns its
// result decoded, or its error.
func (h *outboundHarness) call(tn *tools.Turn, id, args string) (map[string]any, string) {
	h.t.Helper()
	res := h.set.Call(context.Background(), tn, chat.ToolCall{ID: id, Name: media.SendFileTool, Arguments: args})
	var out map[string]any
	if err := json.Unmarshal([]byte(res.Content), &out); err != nil {
		h.t.Fatalf("send_file result %q: %v", res.Content, err)
	}
	if res.IsError {
		return nil, out["error"].(string)
	}
	return out, ""
}

func TestSendFileSendsPicturesAndDocuments(t *testing.T) {
	h := newOutbound(t, nil)
	write(t, h.ws, "out/chart.png", pngBytes(t))
	write(t, h.ws, "report.pdf", []byte("%PDF-1.4\n1 0 obj\n"))
	write(t, h.ws, "notes.csv", []byte("a,b\n1,2\n"))
	write(t, h.ws, "anim.webp", webpBytes)
	write(t, h.ws, "image.bin", pngBytes(t))
	tests := []struct {
		desc, path string
		mime       string
		photo      bool
	}{
		{"a PNG is a picture", "out/chart.png", "image/png", true},
		{"a WebP is a picture", "anim.webp", "image/webp", true},
		{"a PDF is a document", "report.pdf", "application/pdf", false},
		{"a CSV is a document, typed by its name", "notes.csv", "text/csv; charset=utf-8", false},
		{"an image named as something else is a document", "image.bin", "image/png", false},
		{"an absolute path in the workspace", filepath.Join(h.ws, "report.pdf"), "application/pdf", false},
	}
	for i, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			tn := turn()
			args, _ := json.Marshal(map[string]string{"path": tc.path, "caption": "here it is"})
			out, failed := h.call(tn, "call_"+string(rune('a'+i)), string(args))
			if failed != "" {
				t.Fatalf("send_file %s: %s", tc.path, failed)
			}
			q := tn.Queued()
			if len(q) != 1 || len(q[0].Files) != 1 {
				t.Fatalf("queued %+v, want one message with one file", q)
			}
			m, f := q[0], q[0].Files[0]
			want, _ := os.ReadFile(filepath.Join(h.ws, strings.TrimPrefix(tc.path, h.ws)))
			if m.Kind != media.KindFile || m.Text != "here it is" || m.Target != tn.Origin {
				t.Errorf("message %+v, want a file message to the turn's chat with the caption", m)
			}
			if f.Name != filepath.Base(tc.path) || f.MIME != tc.mime || f.Photo != tc.photo || f.Size != int64(len(want)) || len(f.Data) != 0 {
				t.Errorf("file %+v, want %s, %s, photo %v, %d bytes, no data in the message", f, filepath.Base(tc.path), tc.mime, tc.photo, len(want))
			}
			if got, err := h.files.File(context.Background(), f.Blob); err != nil || !bytes.Equal(got, want) {
				t.Errorf("the store holds %d bytes under %s (%v), want the file's %d", len(got), f.Blob, err, len(want))
			}
			if !media.SentTo(f.Blob, tn.Origin) || media.SentTo(f.Blob, outbox.Target{Platform: "telegram", Chat: "43"}) {
				t.Errorf("blob %s is not named for its chat alone", f.Blob)
			}
			if wantAs := map[bool]string{true: "picture", false: "document"}[tc.photo]; out["as"] != wantAs || out["status"] != "queued" {
				t.Errorf("result %v, want queued as a %s", out, wantAs)
			}
		})
	}
}

func TestSendFileRefuses(t *testing.T) {
	h := newOutbound(t, func(cfg *config.Config) { cfg.Attachments.MaxBytes = 64 })
	outside := t.TempDir()
	write(t, outside, "secret.txt", []byte("not yours"))
	write(t, h.ws, "big.txt", bytes.Repeat([]byte("x"), 65))
	write(t, h.ws, "empty.txt", nil)
	write(t, h.ws, "dir/inside.txt", []byte("in"))
	write(t, media.ConvDir(h.home, "telegram:43"), "m1-theirs.txt", []byte("another chat's"))
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(h.ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc, path, want string
	}{
		{"a path out of the workspace", "../" + filepath.Base(outside) + "/secret.txt", "outside the workspace"},
		{"an absolute path outside", filepath.Join(outside, "secret.txt"), "outside the workspace"},
		{"a link that leads outside", "link.txt", "outside the workspace"},
		{"another conversation's kept file", filepath.Join(media.ConvDir(h.home, "telegram:43"), "m1-theirs.txt"), "outside the workspace"},
		{"a directory", "dir", "is a directory"},
		{"a missing file", "nope.txt", "does not exist"},
		{"an empty file", "empty.txt", "is empty"},
		{"a file over attachments.max_bytes", "big.txt", "over the 64 bytes"},
	}
	for i, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			tn := turn()
			args, _ := json.Marshal(map[string]string{"path": tc.path})
			_, failed := h.call(tn, "call_"+string(rune('a'+i)), string(args))
			if !strings.Contains(failed, tc.want) {
				t.Errorf("send_file %s: error %q, want one saying %q", tc.path, failed, tc.want)
			}
			if len(tn.Queued()) != 0 {
				t.Errorf("send_file %s queued %+v, want nothing", tc.path, tn.Queued())
			}
		})
	}
	if ids := h.files.ids(); len(ids) != 0 {
		t.Errorf("the refused calls kept %v, want nothing", ids)
	}
}

func TestSendFileReachesKeptFilesAndLinksInside(t *testing.T) {
	h := newOutbound(t, func(cfg *config.Config) { cfg.Tools.Workspace = "" })
	kept := write(t, media.ConvDir(h.home, "telegram:42"), "m7-scan.png", pngBytes(t))
	tn := turn()
	if _, failed := h.call(tn, "c1", `{"path": "scan.png"}`); !strings.Contains(failed, "there is no workspace") {
		t.Errorf("a relative path without a workspace: %q, want it refused naming the kept files", failed)
	}
	args, _ := json.Marshal(map[string]string{"path": kept})
	if _, failed := h.call(tn, "c2", string(args)); failed != "" {
		t.Fatalf("a file herald keeps for the conversation: %s", failed)
	}
	if q := tn.Queued(); len(q) != 1 || q[0].Files[0].Name != "m7-scan.png" || !q[0].Files[0].Photo {
		t.Errorf("queued %+v, want the kept picture", q)
	}

	// A link inside the workspace to a file inside it is followed.
	h = newOutbound(t, nil)
	write(t, h.ws, "real/data.txt", []byte("data"))
	if err := os.Symlink(filepath.Join(h.ws, "real", "data.txt"), filepath.Join(h.ws, "latest.txt")); err != nil {
		t.Fatal(err)
	}
	tn = turn()
	if _, failed := h.call(tn, "c3", `{"path": "latest.txt"}`); failed != "" {
		t.Fatalf("a link inside the workspace: %s", failed)
	}
	if q := tn.Queued(); len(q) != 1 || q[0].Files[0].Name != "latest.txt" || q[0].Files[0].MIME != "text/plain; charset=utf-8" {
		t.Errorf("queued %+v, want latest.txt as text", q)
	}
}

func TestSendFileTargets(t *testing.T) {
	h := newOutbound(t, func(cfg *config.Config) { cfg.SendMessage.AllowedTargets = []string{"telegram:555"} })
	write(t, h.ws, "a.txt", []byte("a"))
	tests := []struct {
		desc, target string
		want         outbox.Target
		refused      string
	}{
		{"none is this chat", "", outbox.Target{Platform: "telegram", Chat: "42"}, ""},
		{"origin is this chat", "origin", outbox.Target{Platform: "telegram", Chat: "42"}, ""},
		{"a platform is its home channel", "telegram", outbox.Target{Platform: "telegram", Chat: "777"}, ""},
		{"an allowed chat", "telegram:555", outbox.Target{Platform: "telegram", Chat: "555"}, ""},
		{"this chat by name", "telegram:42", outbox.Target{Platform: "telegram", Chat: "42"}, ""},
		{"a chat not allowed", "telegram:556", outbox.Target{}, "not in send_message.allowed_targets"},
		{"a platform not served", "discord:1", outbox.Target{}, "no adapter configured"},
		{"local", "local", outbox.Target{}, "give one chat"},
		{"two targets", "origin,telegram", outbox.Target{}, "give one chat"},
	}
	for i, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			tn := turn()
			args, _ := json.Marshal(map[string]string{"path": "a.txt", "target": tc.target})
			out, failed := h.call(tn, "call_"+string(rune('a'+i)), string(args))
			if tc.refused != "" {
				if !strings.Contains(failed, tc.refused) || len(tn.Queued()) != 0 {
					t.Errorf("target %q: %q, queued %v; want it refused saying %q", tc.target, failed, tn.Queued(), tc.refused)
				}
				return
			}
			if failed != "" {
				t.Fatalf("target %q: %s", tc.target, failed)
			}
			if q := tn.Queued(); len(q) != 1 || q[0].Target != tc.want || out["target"] != tc.want.String() {
				t.Errorf("target %q: queued %+v (result %v), want it to %s", tc.target, q, out, tc.want)
			}
		})
	}

	// A turn without a chat of its own must name one.
	tn := turn()
	tn.Origin = outbox.Target{}
	if _, failed := h.call(tn, "c9", `{"path": "a.txt"}`); !strings.Contains(failed, "no chat of its own") {
		t.Errorf("no origin: %q, want it refused", failed)
	}
}

func TestSendFileIDsRepeatWithTheTurn(t *testing.T) {
	h := newOutbound(t, nil)
	write(t, h.ws, "a.txt", []byte("a"))
	blob := func(tn *tools.Turn, call string) string {
		t.Helper()
		if _, failed := h.call(tn, call, `{"path": "a.txt"}`); failed != "" {
			t.Fatal(failed)
		}
		q := tn.Queued()
		return q[len(q)-1].Files[0].Blob
	}
	first := blob(turn(), "call_1")
	if again := blob(turn(), "call_1"); again != first {
		t.Errorf("the same call of the turn run again keeps the file under %s, want %s", again, first)
	}
	if other := blob(turn(), "call_2"); other == first {
		t.Errorf("another call keeps the file under the same id %s", other)
	}
	tn := turn()
	tn.EntryID = "e2"
	if other := blob(tn, "call_1"); other == first {
		t.Errorf("another turn's call keeps the file under the same id %s", other)
	}
	write(t, h.ws, "a.txt", []byte("b"))
	if other := blob(turn(), "call_1"); other == first {
		t.Errorf("other bytes are kept under the same id %s", other)
	}
}

func TestSendFileMasksSecretsAndSaysWhenKeepingFails(t *testing.T) {
	h := newOutbound(t, nil)
	write(t, h.ws, "env.txt", []byte("TOKEN="+secret+"\n"))
	tn := turn()
	out, failed := h.call(tn, "c1", `{"path": "env.txt"}`)
	if failed != "" {
		t.Fatal(failed)
	}
	f := tn.Queued()[0].Files[0]
	got, _ := h.files.File(context.Background(), f.Blob)
	if bytes.Contains(got, []byte(secret)) || !bytes.Contains(got, []byte("TOKEN=[REDACTED]")) || f.Size != int64(len(got)) {
		t.Errorf("kept %q (size %d), want the secret masked", got, f.Size)
	}
	if out["masked"] == nil {
		t.Errorf("result %v does not say the secret was masked", out)
	}

	h.files.fail = errs.E("mem.PutFile", errs.Unavailable, "the store is down")
	tn = turn()
	if _, failed := h.call(tn, "c2", `{"path": "env.txt"}`); !strings.Contains(failed, "could not be kept") || len(tn.Queued()) != 0 {
		t.Errorf("a store that cannot keep the file: %q, queued %v; want it said and nothing queued", failed, tn.Queued())
	}
}

func TestOutboundForgetsAcceptedFilesOnly(t *testing.T) {
	h := newOutbound(t, nil)
	ctx := context.Background()
	put := func(id string) outbox.File {
		if err := h.files.PutFile(ctx, id, []byte(id)); err != nil {
			t.Fatal(err)
		}
		return outbox.File{Name: id + ".txt", Blob: id}
	}
	tg := outbox.Target{Platform: "telegram", Chat: "42"}
	h.cap.Settled(outbox.Message{Target: tg, Files: []outbox.File{put("sent"), put("sent2")}}, true, "")
	h.cap.Settled(outbox.Message{Target: tg, Files: []outbox.File{put("dead")}}, false, "refused")
	h.cap.Settled(outbox.Message{Target: outbox.Target{Platform: "api", Chat: "k"}, Files: []outbox.File{put("served")}}, true, "")
	for id, want := range map[string]bool{"sent": false, "sent2": false, "dead": true, "served": true} {
		_, err := h.files.File(ctx, id)
		if kept := err == nil; kept != want {
			t.Errorf("file %s kept = %v, want %v", id, kept, want)
		}
	}
}
