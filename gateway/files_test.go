package gateway

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// fileChat is a platform whose adapter records what it is sent, each
// file with the bytes it was given; the first send waits for held to
// be closed, when set.
type fileChat struct {
	adaptertest.Adapter
	held chan struct{}

	mu   sync.Mutex
	sent []outbox.Message
}

func newFileChat(held chan struct{}) *fileChat {
	c := &fileChat{held: held}
	c.Name = "chatfake"
	c.OnSend = c.send
	return c
}

func (c *fileChat) send(ctx context.Context, m outbox.Message) adapters.SendResult {
	c.mu.Lock()
	first := len(c.sent) == 0
	c.sent = append(c.sent, m)
	c.mu.Unlock()
	if first && c.held != nil {
		select {
		case <-c.held:
		case <-ctx.Done():
			return adapters.SendResult{Outcome: adapters.Transient, Reason: "held"}
		}
	}
	return adapters.SendResult{Outcome: adapters.Accepted, MessageID: "p-" + m.ID}
}

func (c *fileChat) messages() []outbox.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]outbox.Message(nil), c.sent...)
}

// gatewayStores are the backends a gateway test runs on.
var gatewayStores = []struct {
	name string
	set  func(t *testing.T, cfg *config.Config)
}{
	{"sqlite", func(*testing.T, *config.Config) {}},
	{"redis", func(t *testing.T, cfg *config.Config) {
		cfg.Store.Backend, cfg.Store.RedisURL = config.BackendRedis, testkit.StartRedis(t).URL()
	}},
}

// filesConfig is a gateway config on a store of gatewayStores (set)
// whose workspace holds files, by name, and the model it runs on.
func filesConfig(t *testing.T, set func(*testing.T, *config.Config), files map[string][]byte) (config.Config, *testkit.ModelServer) {
	t.Helper()
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Tools.Workspace = t.TempDir()
	set(t, &cfg)
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(cfg.Tools.Workspace, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cfg, model
}

func pictureBytes(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 3, 3))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Through the gateway on each store: a file send_file queued goes out
// with its bytes after the reply committed before it, which the platform
// holds, and before its own turn's reply, which carries the picture its
// text shows; once each was accepted, its bytes are forgotten.
func TestGatewaySendsFilesInOrder(t *testing.T) {
	for _, store := range gatewayStores {
		t.Run(store.name, func(t *testing.T) {
			ctx := context.Background()
			report, picture := []byte("%PDF-1.4\nthe report\n"), pictureBytes(t)
			cfg, model := filesConfig(t, store.set, map[string][]byte{"report.pdf": report, "chart.png": picture})
			held := make(chan struct{})
			chat := newFileChat(held)
			h := startGateway(t, cfg, Options{Adapters: []adapters.Adapter{chat}})
			model.Script(
				testkit.Reply("first reply"),
				testkit.CallTools(testkit.ToolCall("send_file", `{"path": "report.pdf", "caption": "the report"}`)),
				testkit.Reply("Sent. The chart:\n\n![chart](chart.png)"),
			)
			deliver := func(id, text string) {
				t.Helper()
				in := sessions.Inbound{Conv: "chatfake:42", Sender: "u1", MessageID: id, Text: text}
				if err := h.g.Router().Deliver(ctx, in); err != nil {
					t.Fatalf("Deliver: %v", err)
				}
			}
			deliver("m1", "hello")
			testkit.Eventually(t, "the first reply held by the platform", func() bool { return len(chat.messages()) == 1 })
			deliver("m2", "send me the report")
			testkit.Eventually(t, "the second turn committed behind the held reply", func() bool {
				ms, err := h.g.Store().Outbox().Pending(ctx, 10)
				return err == nil && len(ms) == 3
			})
			if n := len(chat.messages()); n != 1 {
				t.Fatalf("%d messages sent while the first is held, want 1", n)
			}
			close(held)
			testkit.Eventually(t, "all three sent", func() bool { return len(chat.messages()) == 3 })

			got := chat.messages()
			if got[0].Text != "first reply" || len(got[0].Files) != 0 {
				t.Errorf("first sent %q with %d files, want the first reply", got[0].Text, len(got[0].Files))
			}
			if m := got[1]; m.Kind != media.KindFile || m.Text != "the report" || len(m.Files) != 1 ||
				m.Files[0].Name != "report.pdf" || m.Files[0].Photo || !bytes.Equal(m.Files[0].Data, report) {
				t.Errorf("second sent %+v, want report.pdf with its bytes as a document", m)
			}
			if m := got[2]; m.Kind != "reply" || m.Text != "Sent. The chart:" || len(m.Files) != 1 ||
				m.Files[0].Name != "chart.png" || !m.Files[0].Photo || !bytes.Equal(m.Files[0].Data, picture) {
				t.Errorf("third sent %+v, want the reply with chart.png as a picture", m)
			}
			for _, m := range got[1:] {
				blob := m.Files[0].Blob
				testkit.Eventually(t, "the bytes of "+m.Files[0].Name+" forgotten", func() bool {
					_, err := h.g.Store().Files().File(ctx, blob)
					return errs.Is(err, errs.NotFound)
				})
			}
			if reqs := model.Requests(); len(reqs) != 3 {
				t.Errorf("%d model requests, want 3", len(reqs))
			} else if r := reqs[2].Messages; !strings.Contains(r[len(r)-1].Content, `"status":"queued"`) {
				t.Errorf("send_file's result %q, want it queued", r[len(r)-1].Content)
			}
		})
	}
}

// A message whose file's bytes are gone is dead-lettered with a reason a
// person reads, and the adapter is not called; `herald outbox retry`
// finds the bytes of one still kept.
func TestGatewayDeadLettersAFileNoLongerKept(t *testing.T) {
	for _, store := range gatewayStores {
		t.Run(store.name, func(t *testing.T) {
			ctx := context.Background()
			cfg, _ := filesConfig(t, store.set, nil)
			chat := newFileChat(nil)
			h := startGateway(t, cfg, Options{Adapters: []adapters.Adapter{chat}})
			to := outbox.Target{Platform: "chatfake", Chat: "42"}
			m := outbox.Message{Target: to, Conv: "chatfake:42", Kind: media.KindFile, Text: "the log",
				Files: []outbox.File{{Name: "run.log", MIME: "text/plain", Size: 3, Blob: media.OutboundID(to, "gone")}}}
			id, _, err := h.g.Store().Outbox().Enqueue(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			h.g.delivery.Notify()
			var dead []outbox.Message
			testkit.Eventually(t, "the dead letter", func() bool {
				dead, err = h.g.Store().Outbox().DeadLetters(ctx, 10)
				return err == nil && len(dead) == 1
			})
			if dead[0].ID != id || !strings.Contains(dead[0].LastError, "the file's bytes are no longer kept: run.log") {
				t.Errorf("dead letter %+v, want its reason to say the bytes are gone", dead[0])
			}
			if n := len(chat.messages()); n != 0 {
				t.Errorf("the adapter was sent %d messages, want none", n)
			}

			// Its bytes kept again, the operator's retry sends it.
			if err := h.g.Store().Files().PutFile(ctx, m.Files[0].Blob, []byte("log")); err != nil {
				t.Fatal(err)
			}
			if err := h.g.Store().Outbox().Requeue(ctx, id); err != nil {
				t.Fatal(err)
			}
			h.g.delivery.Notify()
			testkit.Eventually(t, "sent after the retry", func() bool { return len(chat.messages()) == 1 })
			if got := chat.messages()[0]; string(got.Files[0].Data) != "log" {
				t.Errorf("sent %+v, want the file's bytes", got.Files)
			}
		})
	}
}

// Through the local API on each store: a file send_file sends to an API
// conversation is listed in the completion's answer and served at its
// URL, under the key; its bytes stay once it was accepted.
func TestGatewayServesFilesSentToTheAPI(t *testing.T) {
	for _, store := range gatewayStores {
		t.Run(store.name, func(t *testing.T) {
			picture := pictureBytes(t)
			cfg, model := filesConfig(t, store.set, map[string][]byte{"chart.png": picture})
			cfg.HTTP.APIKey = "hk-files-0123456789"
			h := startGateway(t, cfg, Options{})
			model.Script(
				testkit.CallTools(testkit.ToolCall("send_file", `{"path": "chart.png", "caption": "the chart"}`)),
				testkit.Reply("here it is"),
			)
			answer := h.chat("k", "chart please")
			_, list, ok := strings.Cut(answer, "\n\nFiles sent:\n- chart.png (image/png, ")
			if !strings.HasPrefix(answer, "here it is") || !ok {
				t.Fatalf("answer %q, want the reply and the file sent", answer)
			}
			url := list[strings.Index(list, "/api/v1/"):]
			code, body := h.do("GET", url, "")
			if code != 200 || body != string(picture) {
				t.Fatalf("GET %s: %d, %d bytes; want the picture's %d", url, code, len(body), len(picture))
			}
			// Accepted, and still kept once the gateway stopped, which
			// waits for every delivery's Settled: the API's files stay.
			ctx := context.Background()
			testkit.Eventually(t, "the file's message acked", func() bool {
				ms, err := h.g.Store().Outbox().Pending(ctx, 10)
				return err == nil && len(ms) == 0
			})
			h.stop()
			blob, _, _ := strings.Cut(url[strings.LastIndex(url, "/")+1:], "?")
			if data, err := reopen(t, cfg).Store().Files().File(ctx, blob); err != nil || !bytes.Equal(data, picture) {
				t.Errorf("the bytes of %s once its message was accepted: %d bytes (%v), want them kept", blob, len(data), err)
			}
		})
	}
}
