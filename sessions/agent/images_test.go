package agent_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
)

// loader is a test image loader: an image's bytes are "bytes of <path>",
// a path in fail fails, and every call is counted by path.
type loader struct {
	fail  map[string]error
	calls map[string]int
}

func newLoader() *loader { return &loader{fail: map[string]error{}, calls: map[string]int{}} }

func (l *loader) load(_ context.Context, img chat.Image) (chat.Image, error) {
	l.calls[img.Path]++
	if len(img.Data) > 0 {
		return img, fmt.Errorf("the loader was handed bytes for %s", img.Path)
	}
	if err := l.fail[img.Path]; err != nil {
		return img, err
	}
	img.MIME, img.Data = "image/png", []byte("bytes of "+img.Path)
	return img, nil
}

func (l *loader) total() int {
	n := 0
	for _, c := range l.calls {
		n += c
	}
	return n
}

// shown is the data URL a request carries for the image at path.
func shown(path string) string {
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("bytes of "+path))
}

func photo(name string) chat.Image {
	return chat.Image{Name: name, MIME: "image/jpeg", Path: "/home/files/" + conv + "/m1-" + name}
}

// noBytes fails the test when a history message carries an image's
// bytes, in memory or as the store would write it.
func noBytes(t *testing.T, history []chat.Message) {
	t.Helper()
	for _, m := range history {
		for _, img := range m.Images {
			if img.Data != nil {
				t.Errorf("the history holds the bytes of %s", img.Path)
			}
		}
	}
	b, err := json.Marshal(history)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "bytes of") || strings.Contains(string(b), base64.StdEncoding.EncodeToString([]byte("bytes of"))[:8]) {
		t.Errorf("the stored history holds image bytes: %s", b)
	}
}

// A turn's images reach the model as the images (text first); the
// history the turn returns keeps where they are, never their bytes.
func TestTurnImagesReachTheModel(t *testing.T) {
	f := newFixture(t)
	l := newLoader()
	f.agent.Images = l.load
	f.ms.Script(testkit.Reply("a cat and a dog"))
	in := input("what are these?")
	// Bytes that came with an image are not what is shown (the loader
	// scales and encodes) and never reach the history.
	raw := photo("cat.jpg")
	raw.Data = []byte("bytes of the upload")
	in.Images = []chat.Image{raw, photo("dog.jpg")}
	out, err := f.agent.Run(context.Background(), &in)
	if err != nil {
		t.Fatal(err)
	}
	req := f.ms.Requests()[0]
	want := testkit.ModelMessage{Role: "user", Content: "what are these?", Images: []string{shown(photo("cat.jpg").Path), shown(photo("dog.jpg").Path)}}
	if d := cmp.Diff(want, req.Messages[1]); d != "" {
		t.Errorf("the user message the model saw (-want +got):\n%s", d)
	}
	if strings.Contains(string(req.Body), "http://") || strings.Contains(string(req.Body), "https://") || strings.Contains(string(req.Body), "/home/files") {
		t.Errorf("the request names where an image is:\n%s", req.Body)
	}
	wantHistory := []chat.Message{
		{Role: "user", Content: "what are these?", Images: []chat.Image{photo("cat.jpg"), photo("dog.jpg")}, At: t0},
		said("a cat and a dog"),
	}
	if d := cmp.Diff(wantHistory, out.History); d != "" {
		t.Errorf("history (-want +got):\n%s", d)
	}
	noBytes(t, out.History)
}

// An image that cannot be loaded is a line of its message, for that
// request; the other images are shown and the turn goes on.
func TestAnImageThatFailsToLoadIsALine(t *testing.T) {
	f := newFixture(t)
	l := newLoader()
	gone, bad := photo("gone.jpg"), photo("bad.png")
	l.fail[gone.Path] = errs.E("media.LoadImage", errs.NotFound, "the file is gone")
	l.fail[bad.Path] = fmt.Errorf("image: unknown format")
	f.agent.Images = l.load
	f.ms.Script(testkit.Reply("I see a cat"))
	in := input("look")
	in.Images = []chat.Image{gone, photo("cat.jpg"), bad}
	out, err := f.agent.Run(context.Background(), &in)
	if err != nil {
		t.Fatal(err)
	}
	if out.End != sessions.TurnDone {
		t.Errorf("end %q, want done", out.End)
	}
	want := testkit.ModelMessage{Role: "user", Images: []string{shown(photo("cat.jpg").Path)}, Content: "look" +
		"\n[image gone.jpg could not be shown: the file is gone]" +
		"\n[image bad.png could not be shown: image: unknown format]"}
	if d := cmp.Diff(want, f.ms.Requests()[0].Messages[1]); d != "" {
		t.Errorf("the user message the model saw (-want +got):\n%s", d)
	}
	// The line is the request's: the history keeps the images.
	if d := cmp.Diff(in.Images, out.History[0].Images); d != "" || out.History[0].Content != "look" {
		t.Errorf("the stored message = %q %v, want the text and the images as they came", out.History[0].Content, out.History[0].Images)
	}
}

// Without a loader, images are lines.
func TestImagesWithoutALoaderAreLines(t *testing.T) {
	f := newFixture(t)
	f.ms.Script(testkit.Reply("ok"))
	in := input("look")
	in.Images = []chat.Image{photo("cat.jpg")}
	if _, err := f.agent.Run(context.Background(), &in); err != nil {
		t.Fatal(err)
	}
	want := testkit.ModelMessage{Role: "user", Content: "look\n[image cat.jpg could not be shown: images are not loaded for this model]"}
	if d := cmp.Diff(want, f.ms.Requests()[0].Messages[1]); d != "" {
		t.Errorf("the user message the model saw (-want +got):\n%s", d)
	}
}

// A request shows the MaxImages most recent images, earlier history's
// included; an older one is a line, and is not loaded.
func TestARequestShowsTheMostRecentImages(t *testing.T) {
	f := newFixture(t)
	l := newLoader()
	f.agent.Images = l.load
	f.ms.Script(testkit.Reply("ok"))
	var old, now []chat.Image
	for i := range 3 {
		old = append(old, photo(fmt.Sprintf("old%d.jpg", i)))
	}
	for i := range agent.MaxImages - 1 {
		now = append(now, photo(fmt.Sprintf("new%d.jpg", i)))
	}
	in := input("and these?")
	in.Images = now
	in.History = []chat.Message{{Role: "user", Content: "look", Images: old, At: t0}, said("three photos")}
	out, err := f.agent.Run(context.Background(), &in)
	if err != nil {
		t.Fatal(err)
	}
	req := f.ms.Requests()[0]
	wantOld := testkit.ModelMessage{Role: "user", Images: []string{shown(old[2].Path)},
		Content: "look\n[image old0.jpg, shown earlier]\n[image old1.jpg, shown earlier]"}
	if d := cmp.Diff(wantOld, req.Messages[1]); d != "" {
		t.Errorf("the earlier message (-want +got):\n%s", d)
	}
	if got := len(req.Messages[3].Images); got != agent.MaxImages-1 {
		t.Errorf("the turn's message shows %d images, want %d", got, agent.MaxImages-1)
	}
	if l.calls[old[0].Path] != 0 || l.calls[old[1].Path] != 0 || l.total() != agent.MaxImages {
		t.Errorf("loads = %v, want the %d shown, once each", l.calls, agent.MaxImages)
	}
	noBytes(t, out.History)
	if in.History[0].Content != "look" || len(in.History[0].Images) != 3 {
		t.Errorf("the turn changed the history it was given: %+v", in.History[0])
	}
}

// An image is loaded once a turn, however many model calls show it.
func TestAnImageLoadsOnceATurn(t *testing.T) {
	f := newFixture(t)
	l := newLoader()
	broken := photo("broken.png")
	l.fail[broken.Path] = fmt.Errorf("corrupt")
	f.agent.Images = l.load
	f.ms.Script(testkit.CallTools(testkit.ToolCall("probe", `{}`)), testkit.Reply("done"))
	in := input("look")
	in.Images = []chat.Image{photo("cat.jpg"), broken}
	out, err := f.agent.Run(context.Background(), &in)
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.ms.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	for i, req := range reqs {
		if got := req.Messages[1].Images; len(got) != 1 || got[0] != shown(photo("cat.jpg").Path) {
			t.Errorf("request %d shows %v, want the cat", i+1, got)
		}
	}
	if want := map[string]int{photo("cat.jpg").Path: 1, broken.Path: 1}; !cmp.Equal(want, l.calls) {
		t.Errorf("loads = %v, want one per image", l.calls)
	}
	noBytes(t, out.History)
}

// A photo after a turn that failed on another photo, both without
// text, is a turn of its own; the same photo again goes on with the
// failed turn.
func TestAnotherPhotoIsNotARepeat(t *testing.T) {
	cat, dog := photo("cat.jpg"), photo("dog.jpg")
	failed := []chat.Message{{Role: "user", Images: []chat.Image{cat}, At: t0}}
	for _, tc := range []struct {
		desc  string
		image chat.Image
		added int // messages the turn adds to the history
	}{
		{"another photo", dog, 2},
		{"the same photo", cat, 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t)
			f.agent.Images = newLoader().load
			f.ms.Script(testkit.Reply("ok"))
			in := input("")
			in.History, in.Images = failed, []chat.Image{tc.image}
			out, err := f.agent.Run(context.Background(), &in)
			if err != nil {
				t.Fatal(err)
			}
			if len(out.History) != tc.added {
				t.Errorf("the turn added %d messages, want %d: %+v", len(out.History), tc.added, out.History)
			}
		})
	}
}
