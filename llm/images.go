package llm

import (
	"cmp"
	"encoding/base64"
	"net/http"
	"path"
	"strings"

	"github.com/heraldgw/herald/chat"
)

// imageTypes are the image types both APIs take inline. An image of
// another type is named in a line instead of sent, so one odd file does
// not make the whole request fail.
var imageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// ImageName is how a line of text names img to the model: its name, else
// its file's, else "image". Only the last element of a name that looks
// like a URL or a path is kept, so no address reaches the provider.
func ImageName(img chat.Image) string {
	name := strings.TrimSpace(img.Name)
	if name == "" {
		name = path.Base(strings.ReplaceAll(img.Path, `\`, "/"))
	}
	if i := strings.IndexAny(name, "?#"); i >= 0 && strings.Contains(name, "://") {
		name = name[:i]
	}
	if strings.ContainsAny(name, `/\`) {
		name = path.Base(strings.ReplaceAll(name, `\`, "/"))
	}
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '[' || r == ']' {
			return ' '
		}
		return r
	}, name)
	if name = strings.TrimSpace(name); name == "" || name == "." || name == "/" {
		return "image"
	}
	return name
}

// ImageUnshown is the line a message carries in place of an image the
// model is not shown, and why not.
func ImageUnshown(img chat.Image, reason string) string {
	return "[image " + ImageName(img) + " could not be shown: " + oneLine(reason) + "]"
}

// oneLine is s with its line breaks as spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// shownImage is an image as a request carries it: its type and its
// bytes in base64.
type shownImage struct {
	mime, base64 string
}

// dataURL is the image as an image_url part's URL. It is always a data
// URL: herald never hands a provider an address to fetch an image from.
func (s shownImage) dataURL() string { return "data:" + s.mime + ";base64," + s.base64 }

// splitImages parts imgs into those a request can show, in order, and
// a line for each it cannot: one without bytes (never sent as a URL) or
// of a type the APIs do not take.
func splitImages(imgs []chat.Image) (shown []shownImage, lines []string) {
	for _, img := range imgs {
		if len(img.Data) == 0 {
			lines = append(lines, ImageUnshown(img, "it was not loaded"))
			continue
		}
		mime := strings.ToLower(strings.TrimSpace(img.MIME))
		if mime == "" {
			mime = http.DetectContentType(img.Data)
		}
		if !imageTypes[mime] {
			lines = append(lines, ImageUnshown(img, "its type "+mime+" is not one the model takes"))
			continue
		}
		shown = append(shown, shownImage{mime: mime, base64: base64.StdEncoding.EncodeToString(img.Data)})
	}
	return shown, lines
}

// withLines is text with lines after it, one a line.
func withLines(text string, lines []string) string {
	for _, l := range lines {
		if text != "" {
			text += "\n"
		}
		text += l
	}
	return text
}

// unshownLines is a line for each of imgs, for a message of a role that
// cannot show images.
func unshownLines(role string, imgs []chat.Image) []string {
	var lines []string
	for _, img := range imgs {
		lines = append(lines, ImageUnshown(img, "a "+role+" message cannot show images"))
	}
	return lines
}

// toolImagesIntro opens what a tool's images are shown with where the
// API takes no images in a tool result (Chat Completions).
func toolImagesIntro(m chat.Message) string {
	name := cmp.Or(m.Name, "a tool")
	return "Images from the result of " + name + " (call " + m.ToolCallID + "):"
}
