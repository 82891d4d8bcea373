package media

import (
	"cmp"
	"context"
	"net/url"
	"regexp"
	"strings"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
)

// maxPictures bounds the pictures one reply sends: as many as one album
// of Telegram's holds. Those after stay text.
const maxPictures = 10

// pictures decorates what the turns run: the markdown images of a reply
// (![alt](path)) whose path is a picture in the workspace go with the
// reply as pictures, and leave its text. A URL, a path outside the
// workspace, a file that is not a picture (JPEG, PNG, GIF, WebP) or is
// too large stays in the text as the model wrote it.
type pictures struct {
	next sessions.TurnRunner
	o    *outbound
}

func (p *pictures) Run(ctx context.Context, in *sessions.TurnInput) (*sessions.TurnOutput, error) {
	out, err := p.next.Run(ctx, in)
	p.o.attachAll(ctx, in, out)
	return out, err
}

// attachAll attaches the pictures of out's replies. It is apart from
// Run so that its locals are off the goroutine's stack while the turn
// waits on the model.
func (o *outbound) attachAll(ctx context.Context, in *sessions.TurnInput, out *sessions.TurnOutput) {
	for i := range out.Outbox {
		if m := &out.Outbox[i]; m.Kind == agent.KindReply && len(m.Files) == 0 {
			o.attachPictures(ctx, in, m)
		}
	}
}

// attachPictures moves the pictures m's text shows from the workspace
// into m's files, kept in the store under ids the same reply of a turn
// run again makes again. A picture that cannot be kept stays text: the
// reply matters more than its pictures.
func (o *outbound) attachPictures(ctx context.Context, in *sessions.TurnInput, m *outbox.Message) {
	const op = "media.pictures"
	workspace := cmp.Or(in.Workspace, o.workspace)
	if workspace == "" || !strings.Contains(m.Text, "![") {
		// Most replies show no picture: they cost one search, not a
		// reading line by line.
		return
	}
	refs := imageRefs(m.Text)
	if len(refs) == 0 {
		return
	}
	conv := cmp.Or(in.Conv, in.Entry.Conv)
	log := o.log.With("conv", conv, "entry", in.Entry.ID)
	var taken []imageRef
	kept := map[string]bool{}
	for _, r := range refs {
		if len(m.Files) == maxPictures {
			break
		}
		if isURL(r.dest) {
			continue
		}
		f, err := o.picture(op, workspace, r.dest)
		if err != nil {
			log.Debug("a picture of the reply stays text", "path", r.dest, "why", errs.Reason(err))
			continue
		}
		o.mask(&f)
		id := OutboundID(m.Target, conv, in.Entry.ID, "reply", f.hash())
		if !kept[id] {
			if err := o.files.PutFile(ctx, id, f.Data); err != nil {
				log.Warn("keeping a picture of the reply failed; it stays text", "path", r.dest, "err", err)
				continue
			}
			kept[id] = true
			m.Files = append(m.Files, outbox.File{Name: f.Name, MIME: f.MIME, Size: int64(len(f.Data)), Blob: id, Photo: true})
		}
		taken = append(taken, r)
	}
	m.Text = without(m.Text, taken)
}

// picture reads the picture at dest, a path in the workspace as a
// markdown destination gives it (percent-escapes allowed).
func (o *outbound) picture(op, workspace, dest string) (outFile, error) {
	rs := roots{workspace: workspace}
	f, err := readOut(op, rs, dest, o.maxBytes)
	if errs.Is(err, errs.NotFound) && strings.Contains(dest, "%") {
		if plain, uerr := url.PathUnescape(dest); uerr == nil {
			f, err = readOut(op, rs, plain, o.maxBytes)
		}
	}
	if err != nil {
		return outFile{}, err
	}
	if !f.Photo {
		return outFile{}, errs.E(op, errs.Invalid, "%q is %s, not a picture", dest, f.MIME)
	}
	return f, nil
}

// imageRef is a markdown image in a text: its span and its destination.
type imageRef struct {
	start, end int
	dest       string
}

// imagePattern is an inline markdown image: ![alt](dest) or
// ![alt](dest "title"), dest in angle brackets when it has spaces.
var imagePattern = regexp.MustCompile(`!\[[^\]\n]*\]\([ \t]*(<[^<>\n]*>|[^\s()<>]+)(?:[ \t]+(?:"[^"\n]*"|'[^'\n]*'))?[ \t]*\)`)

// imageRefs are the markdown images of text, in order, but those in
// code: a fenced block (``` or ~~~) or an inline code span.
func imageRefs(text string) []imageRef {
	var (
		out   []imageRef
		fence string // the open block's fence; empty outside one
		at    int
	)
	for line := range strings.Lines(text) {
		start := at
		at += len(line)
		if f := fenceOf(line); f != "" {
			switch {
			case fence == "":
				fence = f
			case f[0] == fence[0] && len(f) >= len(fence) && strings.TrimSpace(strings.TrimLeft(line, " ")[len(f):]) == "":
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		spans := codeSpans(line)
		for _, m := range imagePattern.FindAllStringSubmatchIndex(line, -1) {
			if inSpan(spans, m[0]) {
				continue
			}
			dest := strings.TrimSuffix(strings.TrimPrefix(line[m[2]:m[3]], "<"), ">")
			out = append(out, imageRef{start: start + m[0], end: start + m[1], dest: dest})
		}
	}
	return out
}

// fenceOf is the fence a line opens or closes a code block with (three
// or more backticks or tildes after at most three spaces), or "".
func fenceOf(line string) string {
	trimmed := strings.TrimLeft(line, " ")
	if len(line)-len(trimmed) > 3 || trimmed == "" || (trimmed[0] != '`' && trimmed[0] != '~') {
		return ""
	}
	n := len(trimmed) - len(strings.TrimLeft(trimmed, trimmed[:1]))
	if n < 3 {
		return ""
	}
	return trimmed[:n]
}

// codeSpans are the inline code spans of a line: from a run of
// backticks to the next run of as many.
func codeSpans(line string) [][2]int {
	var spans [][2]int
	for i := 0; i < len(line); {
		if line[i] != '`' {
			i++
			continue
		}
		n := runOf(line, i)
		end := -1
		for j := i + n; j < len(line); {
			if line[j] != '`' {
				j++
				continue
			}
			m := runOf(line, j)
			if m == n {
				end = j + m
				break
			}
			j += m
		}
		if end < 0 {
			i += n
			continue
		}
		spans = append(spans, [2]int{i, end})
		i = end
	}
	return spans
}

// runOf is the length of the run of backticks at line[i].
func runOf(line string, i int) int {
	n := 0
	for i+n < len(line) && line[i+n] == '`' {
		n++
	}
	return n
}

func inSpan(spans [][2]int, at int) bool {
	for _, s := range spans {
		if s[0] <= at && at < s[1] {
			return true
		}
	}
	return false
}

// without is text with the images taken cut out; a line left blank by
// the cut goes whole, and with it a blank line it would leave doubled.
func without(text string, taken []imageRef) string {
	if len(taken) == 0 {
		return text
	}
	var b strings.Builder
	from := 0
	for _, r := range taken {
		start, end := r.start, r.end
		lineStart := strings.LastIndexByte(text[:start], '\n') + 1
		lineEnd := len(text)
		if i := strings.IndexByte(text[end:], '\n'); i >= 0 {
			lineEnd = end + i + 1
		}
		whole := strings.TrimSpace(text[lineStart:start]) == "" && strings.TrimSpace(text[end:lineEnd]) == "" && lineStart >= from
		if whole {
			start, end = lineStart, lineEnd
		}
		b.WriteString(text[from:start])
		if whole && (b.Len() == 0 || strings.HasSuffix(b.String(), "\n\n")) && strings.HasPrefix(text[end:], "\n") {
			end++
		}
		from = end
	}
	b.WriteString(text[from:])
	return strings.TrimSpace(b.String())
}

// isURL reports whether a picture's destination is a URL (it has a
// scheme, or starts with //), not a path.
func isURL(dest string) bool {
	if strings.HasPrefix(dest, "//") {
		return true
	}
	scheme, _, ok := strings.Cut(dest, ":")
	if !ok || len(scheme) < 2 {
		return false
	}
	for _, r := range scheme {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '+' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
