package media

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/llm"
)

// see readies a picture: checked by loading it as a model request
// carries it (LoadImage, whose work the turn's first model call then
// finds done), then shown to the model or described to it, as
// agent.image_input_mode says. caption is what the person wrote with it.
func (r *Runner) see(ctx context.Context, t *turnFiles, f file, platform, caption string) {
	data, ok := r.get(ctx, t, f, platform)
	if !ok {
		return
	}
	img, err := LoadImage(ctx, chat.Image{Name: f.name, Path: f.path})
	switch {
	case errors.Is(err, ErrImageType):
		t.lines = append(t.lines, lineNotImage(f.name, typeOf(f.att.MIME, data)))
		return
	case err != nil:
		r.log.Warn("a picture of the message could not be read", "name", f.name, "err", err)
		t.lines = append(t.lines, lineDamaged(f.name))
		return
	}
	if r.shows() {
		mime, _ := ImageType(data)
		t.images = append(t.images, chat.Image{Name: f.name, MIME: mime, Path: f.path})
		return
	}
	t.lines = append(t.lines, r.describe(ctx, f, img, caption))
}

// shows reports whether pictures are shown to the model itself rather
// than described: agent.image_input_mode native, or auto on a model
// known to take them.
func (r *Runner) shows() bool {
	switch r.opts.ImageMode {
	case config.ImagesNative:
		return true
	case config.ImagesText:
		return false
	}
	return llm.TakesImages(r.opts.Model)
}

// describe is the line that describes img, made by the vision model with
// one request, and kept beside the file for a run of the turn again.
func (r *Runner) describe(ctx context.Context, f file, img chat.Image, caption string) string {
	kept := f.path + ".description.txt"
	if b, err := os.ReadFile(kept); err == nil && len(b) > 0 {
		return lineDescribed(f.name, string(b))
	}
	if r.opts.Vision == nil {
		return lineNotDescribed(f.name, "no vision model is set up (auxiliary.vision)")
	}
	resp, err := r.opts.Vision.Complete(ctx, llm.Request{Messages: []chat.Message{
		{Role: "user", Content: describePrompt(caption), Images: []chat.Image{img}},
	}})
	if err != nil {
		r.log.Warn("describing a picture failed", "name", f.name, "err", err)
		return lineNotDescribed(f.name, llm.UserMessage(err))
	}
	text := strings.TrimSpace(resp.Message.Content)
	if text == "" {
		return lineNotDescribed(f.name, "the vision model said nothing of it")
	}
	if err := writeFile(kept, []byte(text)); err != nil {
		r.log.Warn("keeping a picture's description failed", "path", kept, "err", err)
	}
	return lineDescribed(f.name, text)
}
