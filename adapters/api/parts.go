package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// contentPart is one part of an array content, after OpenAI's: text, an
// image by URL (a data URL, or http(s) herald fetches), or audio inline.
type contentPart struct {
	Type       string      `json:"type"`
	Text       string      `json:"text"`
	ImageURL   *imageURL   `json:"image_url"`
	InputAudio *inputAudio `json:"input_audio"`
}

// imageURL is an image_url part's image. Some clients send the URL as a
// bare string; it reads the same.
type imageURL struct {
	URL string `json:"url"`
}

func (u *imageURL) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &u.URL); err == nil {
		return nil
	}
	var v struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return errors.New("image_url is neither a URL nor an object with one")
	}
	u.URL = v.URL
	return nil
}

// inputAudio is an input_audio part's recording: base64 data and its
// format.
type inputAudio struct {
	Data   string `json:"data"`
	Format string `json:"format"`
}

// audioTypes are the input_audio formats herald takes, and their types.
var audioTypes = map[string]string{
	"wav": "audio/wav", "mp3": "audio/mpeg", "flac": "audio/flac", "ogg": "audio/ogg",
	"opus": "audio/ogg", "m4a": "audio/mp4", "mp4": "audio/mp4", "webm": "audio/webm", "aac": "audio/aac",
}

// userMessage is the last user message of a completion request: the new
// turn. Its text is its text parts joined; files are its image_url and
// input_audio parts, checked but not yet read when they are URLs.
type userMessage struct {
	text  string
	files []filePart
}

// filePart is an image_url or input_audio part of the last user
// message. An image by http(s) URL has url set and its bytes fetched
// later; any other has its upload whole.
type filePart struct {
	where string
	index int
	url   *url.URL
	up    upload
}

// lastUserMessage reads the last user message: the new turn. Earlier
// messages are the client's copy of a history the gateway keeps. Every
// part is checked here, before any URL is fetched, so a bad part costs
// no download.
func (s *Server) lastUserMessage(msgs []chatMessage) (userMessage, error) {
	const op = "api.chatCompletions"
	if len(msgs) == 0 {
		return userMessage{}, errs.E(op, errs.Invalid, "messages is missing or empty")
	}
	i := len(msgs) - 1
	for i >= 0 && msgs[i].Role != "user" {
		i--
	}
	if i < 0 {
		return userMessage{}, errs.E(op, errs.Invalid, "messages has no user message")
	}
	m, err := s.readUserContent(fmt.Sprintf("messages[%d].content", i), msgs[i].Content)
	if err != nil {
		return userMessage{}, err
	}
	if strings.TrimSpace(m.text) == "" && len(m.files) == 0 {
		return userMessage{}, errs.E(op, errs.Invalid, "messages[%d] (the last user message) has no text and no files", i)
	}
	if err := s.filesTaken(op, len(m.files)); err != nil {
		return userMessage{}, err
	}
	return m, nil
}

// readUserContent reads a user content (at where): a string, or parts.
func (s *Server) readUserContent(where string, raw json.RawMessage) (userMessage, error) {
	const op = "api.chatCompletions"
	var m userMessage
	if len(raw) == 0 || string(raw) == "null" {
		return m, nil
	}
	if err := json.Unmarshal(raw, &m.text); err == nil {
		return m, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return m, errs.E(op, errs.Invalid, "%s: want a string or an array of content parts (%v)", where, err)
	}
	var texts []string
	for j, p := range parts {
		at := fmt.Sprintf("%s[%d]", where, j)
		switch p.Type {
		case "text":
			if p.Text != "" {
				texts = append(texts, p.Text)
			}
		case "image_url":
			f, err := s.imagePart(at, j, p.ImageURL)
			if err != nil {
				return m, err
			}
			m.files = append(m.files, f)
		case "input_audio":
			f, err := s.audioPart(at, j, p.InputAudio)
			if err != nil {
				return m, err
			}
			m.files = append(m.files, f)
		default:
			return m, errs.E(op, errs.Invalid, "%s: part type %q is not one herald takes (text, image_url, input_audio)", at, p.Type)
		}
	}
	m.text = strings.Join(texts, "\n")
	return m, nil
}

// imagePart checks an image_url part: a data URL is decoded now and must
// hold an image; an http(s) URL is fetched later.
func (s *Server) imagePart(at string, index int, img *imageURL) (filePart, error) {
	const op = "api.chatCompletions"
	where := at + " (image_url)"
	if img == nil || img.URL == "" {
		return filePart{}, errs.E(op, errs.Invalid, "%s has no url", where)
	}
	f := filePart{where: where, index: index}
	if strings.HasPrefix(strings.ToLower(img.URL), "data:") {
		mimeType, data, err := decodeDataURL(img.URL)
		if err != nil {
			return filePart{}, errs.E(op, errs.Invalid, "%s: %v", where, err)
		}
		if !strings.HasPrefix(mimeType, "image/") {
			return filePart{}, errs.E(op, errs.Invalid, "%s: the data URL holds %s, not an image", where, mimeType)
		}
		if err := s.checkFile(op, where, int64(len(data))); err != nil {
			return filePart{}, err
		}
		f.up = upload{index: index, name: fileName("", "image", index, mimeType), mime: mimeType, kind: sessions.AttachImage, data: data}
		return f, nil
	}
	u, err := fetchURL(img.URL)
	if err != nil {
		return filePart{}, errs.E(op, errs.Invalid, "%s: %v", where, err)
	}
	f.url = u
	return f, nil
}

// audioPart decodes an input_audio part: a recording the person spoke,
// which reaches the agent as a voice note.
func (s *Server) audioPart(at string, index int, a *inputAudio) (filePart, error) {
	const op = "api.chatCompletions"
	where := at + " (input_audio)"
	if a == nil || a.Data == "" {
		return filePart{}, errs.E(op, errs.Invalid, "%s has no data", where)
	}
	format := strings.ToLower(a.Format)
	mimeType, ok := audioTypes[format]
	if !ok {
		names := make([]string, 0, len(audioTypes))
		for n := range audioTypes {
			names = append(names, n)
		}
		slices.Sort(names)
		return filePart{}, errs.E(op, errs.Invalid, "%s: format %q is not one herald takes (%s)", where, a.Format, strings.Join(names, ", "))
	}
	data, err := decodeBase64(a.Data)
	if err != nil {
		return filePart{}, errs.E(op, errs.Invalid, "%s: data is not base64: %v", where, err)
	}
	if err := s.checkFile(op, where, int64(len(data))); err != nil {
		return filePart{}, err
	}
	up := upload{index: index, name: "audio-" + fmt.Sprint(index) + "." + format, mime: mimeType, kind: sessions.AttachVoice, data: data}
	return filePart{where: where, index: index, up: up}, nil
}

// decodeDataURL reads a data URL, data:[<type>][;base64],<data>: its
// type (text/plain when it names none, as RFC 2397 has it) and bytes.
func decodeDataURL(s string) (string, []byte, error) {
	head, body, ok := strings.Cut(s[len("data:"):], ",")
	if !ok {
		return "", nil, errors.New("the data URL has no comma before its data")
	}
	const b64Suffix = ";base64"
	b64 := len(head) >= len(b64Suffix) && strings.EqualFold(head[len(head)-len(b64Suffix):], b64Suffix)
	if b64 {
		head = head[:len(head)-len(b64Suffix)]
	}
	mimeType := mediaType(head)
	if head == "" || strings.HasPrefix(head, ";") {
		mimeType = "text/plain"
	}
	if mimeType == "" {
		return "", nil, fmt.Errorf("the data URL's type %q is not a media type", head)
	}
	if !b64 {
		data, err := url.PathUnescape(body)
		if err != nil {
			return "", nil, fmt.Errorf("the data URL's data is not percent-encoded: %v", err)
		}
		return mimeType, []byte(data), nil
	}
	data, err := decodeBase64(body)
	if err != nil {
		return "", nil, fmt.Errorf("the data URL's data is not base64: %v", err)
	}
	return mimeType, data, nil
}

// decodeBase64 decodes standard base64, padded or not, and the URL-safe
// alphabet some encoders use; white space (line breaks) is skipped.
func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
			return -1
		}
		return r
	}, s)
	if s == "" {
		return nil, errors.New("it is empty")
	}
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	return enc.DecodeString(strings.TrimRight(s, "="))
}

// readFiles reads the files of m: its uploads as they are, and the
// images it names by URL, fetched one after the other.
func (s *Server) readFiles(ctx context.Context, m userMessage) ([]upload, error) {
	ups := make([]upload, 0, len(m.files))
	for _, f := range m.files {
		if f.url == nil {
			ups = append(ups, f.up)
			continue
		}
		up, err := s.fetchImage(ctx, f.where, f.index, f.url)
		if err != nil {
			return nil, err
		}
		ups = append(ups, up)
	}
	return ups, nil
}
