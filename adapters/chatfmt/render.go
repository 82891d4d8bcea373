package chatfmt

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Render renders herald's markdown in dialect d. Headings become bold
// where the platform has none, bullets become "•" where it has no lists,
// and markers that close nothing are shown as the characters they are.
func Render(text string, d Dialect) string {
	blocks := parseBlocks(normalize(text))
	var out string
	switch d {
	case TelegramMarkdownV2:
		out = renderBlocks(blocks, markdownV2Syntax.block)
	case TelegramHTML:
		out = renderBlocks(blocks, telegramHTMLSyntax.block)
	case SlackMrkdwn:
		out = renderBlocks(blocks, slackBlock)
	case DiscordMarkdown:
		out = disarmMentions(renderBlocks(blocks, discordBlock))
	default:
		out = renderBlocks(blocks, plainBlock)
	}
	return strings.Trim(out, "\n")
}

// Plain is text without markup: what is resent when a platform refuses
// the formatted message. Links keep their address in parentheses, code
// keeps its text, and lists and quotes keep "•" and ">".
func Plain(text string) string {
	return Render(text, PlainText)
}

// RenderParts splits text and renders each part in d, so that every part
// is under limit once rendered, measured as d's platform measures (a
// Measure option overrides that, as resending PlainText to Telegram
// needs). A limit of zero or less means d's own; one below MinLimit is
// raised to it. It cuts where Split would, and each part is rendered, and
// valid, on its own: a code block cut in two is closed and reopened, and
// emphasis that a cut splits (which takes a line over the limit) shows
// its markers as text rather than running into the next part.
func RenderParts(text string, d Dialect, limit int, opts ...Option) []string {
	o := options{measure: d.Measure()}
	for _, opt := range opts {
		opt.apply(&o)
	}
	switch {
	case limit <= 0:
		limit = d.Limit()
	case limit < MinLimit:
		limit = MinLimit
	}
	text = normalize(text)
	if onlySpace(text) {
		return nil
	}
	// Rendering can shrink text (markers dropped) as well as grow it
	// (escapes), so a part may take more source than the limit; four
	// times the limit is more than any rendering shrinks by.
	sp := newSplitter(text, o.measure, 4*limit, func(part string) bool {
		return o.measure.Len(Render(part, d)) <= limit
	})
	return sp.split(func(part string) string {
		out := Render(part, d)
		if onlySpace(out) {
			return ""
		}
		return out
	})
}

// normalize makes text safe to parse and send: valid UTF-8, LF line ends,
// no NUL.
func normalize(text string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	return strings.ReplaceAll(text, "\x00", "\uFFFD")
}

// renderBlocks renders each block with render and joins them a line
// apart; a blank source line stays a blank line.
func renderBlocks(blocks []block, render func(block) string) string {
	var b strings.Builder
	for i, bl := range blocks {
		if i > 0 {
			b.WriteByte('\n')
		}
		if bl.kind != blankBlock {
			b.WriteString(render(bl))
		}
	}
	return b.String()
}

// rule is what a thematic break (---) becomes: no platform draws one.
const rule = "———"

// linkable reports whether a link's destination is one a platform will
// take as a link: an absolute http(s) URL with a host, mailto or tg.
// Others (relative paths, javascript:) are shown as text.
func linkable(dest string) bool {
	if dest == "" || strings.IndexFunc(dest, func(r rune) bool { return r <= ' ' || unicode.IsSpace(r) }) >= 0 {
		return false
	}
	u, err := url.Parse(dest)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		return u.Host != ""
	case "mailto", "tg":
		return u.Opaque != "" || u.Host != ""
	}
	return false
}

// plainText is the text of inline nodes without any markup.
func plainText(nodes []*node) string {
	var b strings.Builder
	writePlain(&b, nodes)
	return b.String()
}

func writePlain(b *strings.Builder, nodes []*node) {
	for _, n := range nodes {
		switch n.kind {
		case textNode, codeNode, urlNode:
			b.WriteString(n.text)
		case linkNode:
			text := plainText(n.kids)
			b.WriteString(text)
			if n.url != "" && n.url != text {
				if strings.TrimSpace(text) != "" {
					b.WriteString(" (")
					b.WriteString(n.url)
					b.WriteString(")")
				} else {
					b.WriteString(n.url)
				}
			}
		default:
			writePlain(b, n.kids)
		}
	}
}

func plainBlock(b block) string {
	switch b.kind {
	case headingBlock, paragraphBlock:
		return plainText(parseInline(b.text))
	case listItemBlock:
		return b.indent + bullet(b.marker) + " " + plainText(parseInline(b.text))
	case quoteBlock:
		lines := make([]string, len(b.lines))
		for i, l := range b.lines {
			lines[i] = strings.TrimRight("> "+plainText(parseInline(l)), " ")
		}
		return strings.Join(lines, "\n")
	case codeBlock:
		if strings.TrimSpace(b.text) == "" {
			return ""
		}
		return b.text
	case ruleBlock:
		return rule
	}
	return ""
}

// blankQuote reports a quote of empty lines, which Telegram would take
// as an empty entity.
func blankQuote(b block) bool {
	for _, l := range b.lines {
		if strings.TrimSpace(l) != "" {
			return false
		}
	}
	return true
}

// bullet is how a list marker is shown where the platform draws no lists.
func bullet(marker string) string {
	if marker == "-" {
		return "•"
	}
	return marker
}

// codeLang keeps the characters of a code block's language that every
// platform takes in a fence or class name; "c++", "c#" and "objective-c"
// survive, anything odd is dropped rather than escaped.
func codeLang(lang string) string {
	var b strings.Builder
	for _, r := range lang {
		if b.Len() >= 32 {
			break
		}
		if r < 0x80 && (isASCIILetter(byte(r)) || isDigit(byte(r)) || strings.ContainsRune("+#-_.", r)) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isWordRune is a letter or digit: what makes a marker next to it
// intraword.
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// textOut is a builder that remembers the last rune written, which Slack
// and Discord need to tell whether a marker would land inside a word.
type textOut struct {
	b         strings.Builder
	last      rune // 0 before anything is written
	lineStart bool // nothing but blanks written since the last line break
}

// quote writes lines as a "> " quote, each line's text through inline;
// blank lines stay bare.
func (o *textOut) quote(lines []string, inline func(line string)) {
	for i, l := range lines {
		if i > 0 {
			o.write("\n")
		}
		if strings.TrimSpace(l) != "" {
			o.write("> ")
			inline(l)
		}
	}
}

func (o *textOut) write(s string) {
	if s == "" {
		return
	}
	o.b.WriteString(s)
	o.last, _ = utf8.DecodeLastRuneInString(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		o.lineStart = strings.TrimLeft(s[i+1:], " \t") == ""
	} else if strings.TrimLeft(s, " \t") != "" {
		o.lineStart = false
	}
}

func (o *textOut) writeRune(r rune) {
	o.b.WriteRune(r)
	o.last = r
	switch {
	case r == '\n':
		o.lineStart = true
	case r != ' ' && r != '\t':
		o.lineStart = false
	}
}

// zwsp, a zero-width space, separates a marker from a word where the
// platform would otherwise not see the marker as one (Slack and Discord
// need a boundary around emphasis) or see a literal character as one.
const zwsp = "\u200b"

// firstRune is the first rune of n as Slack or Discord render it, or a
// stand-in of the same kind (a marker is punctuation, not a word).
func firstRune(n *node) rune {
	switch n.kind {
	case textNode:
		r, _ := utf8.DecodeRuneInString(n.text)
		return r
	case codeNode:
		return '`'
	case emphNode:
		return '_'
	case strongNode:
		return '*'
	case strikeNode:
		return '~'
	}
	return '['
}

// neutralizeFences breaks every run of three backticks in code with a
// zero-width space, so code holding a fence cannot end its own block
// where the platform has no escape inside code.
func neutralizeFences(code string) string {
	if !strings.Contains(code, "```") {
		return code
	}
	var b strings.Builder
	ticks := 0
	for _, r := range code {
		if r == '`' {
			if ticks == 2 {
				b.WriteString(zwsp)
				ticks = 0
			}
			ticks++
		} else {
			ticks = 0
		}
		b.WriteRune(r)
	}
	return b.String()
}
