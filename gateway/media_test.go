package gateway

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// fetchAdapter is an adaptertest.Adapter whose platform serves files
// (adapters.Fetcher) and which hands the test its inbox.
type fetchAdapter struct {
	adaptertest.Adapter
	files map[string][]byte // by PlatformID
	inbox chan adapters.Inbox

	mu   sync.Mutex
	sent []outbox.Message
}

var _ adapters.Fetcher = (*fetchAdapter)(nil)

func newFetchAdapter(files map[string][]byte) *fetchAdapter {
	a := &fetchAdapter{files: files, inbox: make(chan adapters.Inbox, 1)}
	a.Adapter = adaptertest.Adapter{
		Name: "chat",
		OnRun: func(ctx context.Context, inbox adapters.Inbox) error {
			a.inbox <- inbox
			<-ctx.Done()
			return nil
		},
		OnSend: func(_ context.Context, m outbox.Message) adapters.SendResult {
			a.mu.Lock()
			a.sent = append(a.sent, m)
			a.mu.Unlock()
			return adapters.SendResult{Outcome: adapters.Accepted}
		},
	}
	return a
}

func (a *fetchAdapter) Fetch(_ context.Context, att sessions.Attachment, _ int64) ([]byte, error) {
	return a.files[att.PlatformID], nil
}

func (a *fetchAdapter) texts() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, m := range a.sent {
		out = append(out, m.Text)
	}
	return out
}

// A photo sent on a platform reaches a model that does not see images
// as its description: the media capability runs around the turns, with
// the platform's adapter as its fetcher and auxiliary.vision (here the
// main model) as its describer.
func TestGatewayDescribesAPhotoFromAPlatform(t *testing.T) {
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Agent.ImageInputMode = config.ImagesText
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for i := range img.Pix {
		img.Pix[i] = byte(i)
	}
	img.SetRGBA(0, 0, color.RGBA{255, 0, 0, 255})
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, img, nil); err != nil {
		t.Fatal(err)
	}
	ad := newFetchAdapter(map[string][]byte{"p1": jpg.Bytes()})
	startGateway(t, cfg, Options{Adapters: []adapters.Adapter{ad}})
	inbox := <-ad.inbox

	model.Script(testkit.Reply("A small red dot on a grey field."), testkit.Reply("It is a dot."))
	err := inbox.Deliver(context.Background(), sessions.Inbound{
		Conv: "chat:1", Sender: "u1", MessageID: "m1", Text: "what is it?",
		Attachments: []sessions.Attachment{{Name: "dot.jpg", MIME: "image/jpeg", Kind: sessions.AttachImage, PlatformID: "p1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the reply sent", func() bool { return strings.Contains(strings.Join(ad.texts(), "|"), "It is a dot.") })
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model had %d requests, want the description and the turn", len(reqs))
	}
	if !strings.Contains(reqs[0].LastUser(), "Describe this picture") {
		t.Errorf("the first request asked %q, want a description", reqs[0].LastUser())
	}
	want := "what is it?\n[dot.jpg, a picture, as a vision model described it: A small red dot on a grey field.]"
	if got := reqs[1].LastUser(); got != want {
		t.Errorf("the turn's message = %q\nwant %q", got, want)
	}
	if b, err := os.ReadFile(media.FilePath(cfg.Home, "chat:1", "m1", "dot.jpg")); err != nil || !bytes.Equal(b, jpg.Bytes()) {
		t.Errorf("the photo kept under the home has %d bytes (%v), want %d", len(b), err, jpg.Len())
	}
}
