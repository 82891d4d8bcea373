package agent

import (
	"cmp"
	"context"
	"errors"

	"github.com/heraldgw/herald/chat"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/llm"
)

// MaxImages is how many images one model request shows: the most recent
// ones, counted from the request's end. Each is a few hundred kilobytes
// and a thousand or more tokens, so a conversation of photos does not
// grow every request without bound; an older one is a line saying it
// was shown earlier.
const MaxImages = 8

// errNoLoader is why an image is not shown by an agent without a loader.
var errNoLoader = errors.New("images are not loaded for this model")

// loaded is an image's load within a turn: the image with its bytes, or
// why it could not be had.
type loaded struct {
	img chat.Image
	err error
}

// showImages makes msgs, the request's own copy, show their images:
// the MaxImages most recent are loaded, once a turn each (by Path), and
// carry their bytes; an older one, or one that could not be loaded,
// becomes a line of its message's text. A message with images gets a
// new Images slice, so the history msgs was copied from never holds
// bytes.
func (r *run) showImages(ctx context.Context, msgs []chat.Message) {
	left := MaxImages
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if len(m.Images) == 0 {
			continue
		}
		earlier := max(len(m.Images)-left, 0)
		left -= len(m.Images) - earlier
		var (
			shown []chat.Image
			lines []string
		)
		for j, img := range m.Images {
			if j < earlier {
				lines = append(lines, "[image "+llm.ImageName(img)+", shown earlier]")
				continue
			}
			got, err := r.loadImage(ctx, img)
			if err != nil {
				lines = append(lines, llm.ImageUnshown(img, reason(err)))
				continue
			}
			shown = append(shown, got)
		}
		m.Images = shown
		for _, l := range lines {
			if m.Content != "" {
				m.Content += "\n"
			}
			m.Content += l
		}
		msgs[i] = m
	}
}

// loadImage is img with its bytes, through the agent's loader, from the
// turn's cache when the turn loaded it before.
func (r *run) loadImage(ctx context.Context, img chat.Image) (chat.Image, error) {
	if r.a.Images == nil {
		return img, errNoLoader
	}
	if img.Path == "" {
		return img, errors.New("herald keeps no file of it")
	}
	if l, ok := r.images[img.Path]; ok {
		return l.img, l.err
	}
	got, err := r.a.Images(ctx, chat.Image{Name: img.Name, MIME: img.MIME, Path: img.Path})
	if err == nil && len(got.Data) == 0 {
		err = errors.New("it loaded empty")
	}
	if err != nil {
		if ctx.Err() == nil {
			r.logger().WarnContext(ctx, "an image could not be loaded for the model; it is named in a line instead",
				"image", llm.ImageName(img), "err", err)
		}
		got = img
	}
	got.Name, got.Path = cmp.Or(got.Name, img.Name), img.Path
	if r.images == nil {
		r.images = make(map[string]loaded)
	}
	r.images[img.Path] = loaded{img: got, err: err}
	return got, err
}

// reason is err as the model reads why an image is not shown: the
// message of herald's error, without its operation and code.
func reason(err error) string {
	var e *errs.Error
	if errors.As(err, &e) && e.Msg != "" {
		return e.Msg
	}
	return err.Error()
}

// storedImages are imgs as the history keeps them: where each is,
// never its bytes.
func storedImages(imgs []chat.Image) []chat.Image {
	if len(imgs) == 0 {
		return nil
	}
	out := make([]chat.Image, len(imgs))
	for i, img := range imgs {
		img.Data = nil
		out[i] = img
	}
	return out
}
