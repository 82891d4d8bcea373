package chatfmt

import (
	"strings"
	"unicode/utf8"
)

// Slack's mrkdwn has no escape for its markers, only for &, < and >
// (api.slack.com, "Formatting text for app surfaces"), and it reads a
// marker as one only at a word boundary: *bold* needs no letter or digit
// outside either star and no blank inside. So emphasis next to a word gets
// a zero-width space outside it, and a literal *, _ or ~ that Slack could
// take for a marker gets one on the side that would make it one.
// Backticks, which nothing keeps from pairing, are shown as look-alikes.

type slackWriter struct {
	textOut
	active style
}

func slackBlock(b block) string {
	w := &slackWriter{}
	switch b.kind {
	case paragraphBlock:
		w.inline(parseInline(b.text), 0)
	case headingBlock:
		if b.text != "" {
			w.styled(bold, "*", parseInline(b.text), 0)
		}
	case listItemBlock:
		w.write(b.indent + bullet(b.marker) + " ")
		w.inline(parseInline(b.text), 0)
	case quoteBlock:
		w.quote(b.lines, func(l string) { w.inline(parseInline(l), 0) })
	case codeBlock:
		if strings.TrimSpace(b.text) != "" {
			w.write("```\n" + neutralizeFences(escapeSlack(b.text)) + "\n```")
		}
	case ruleBlock:
		w.write(rule)
	}
	return w.b.String()
}

// inline writes nodes; after is the first rune of what follows them, 0
// for nothing.
func (w *slackWriter) inline(nodes []*node, after rune) {
	for i, n := range nodes {
		next := after
		if i+1 < len(nodes) {
			next = firstRune(nodes[i+1])
		}
		switch n.kind {
		case textNode:
			w.text(n.text, next)
		case codeNode:
			if strings.TrimSpace(n.text) == "" {
				w.text(n.text, next)
				continue
			}
			code := strings.ReplaceAll(escapeSlack(n.text), "`", graveAccent)
			w.marked("`", next, func() { w.write(code) })
		case emphNode:
			w.styled(italic, "_", n.kids, next)
		case strongNode:
			w.styled(bold, "*", n.kids, next)
		case strikeNode:
			w.styled(strike, "~", n.kids, next)
		case linkNode:
			w.link(n, next)
		case urlNode:
			if linkable(n.text) {
				w.write("<" + slackURL(n.text) + ">")
			} else {
				w.text(n.text, next)
			}
		}
	}
}

// styled writes kids between markers, unless the style is on already:
// Slack does not nest a style in itself.
func (w *slackWriter) styled(st style, marker string, kids []*node, after rune) {
	if w.active&st != 0 {
		w.inline(kids, after)
		return
	}
	w.active |= st
	w.marked(marker, after, func() { w.inline(kids, rune(marker[0])) })
	w.active &^= st
}

// marked writes body between two markers, set off from a neighbouring
// word or marker.
func (w *slackWriter) marked(marker string, after rune, body func()) {
	if isWordRune(w.last) || w.last == rune(marker[0]) {
		w.write(zwsp)
	}
	w.write(marker)
	body()
	w.write(marker)
	if isWordRune(after) {
		w.write(zwsp)
	}
}

// link writes <url|text>. Slack shows a label as it is, so the label is
// the link's plain text.
func (w *slackWriter) link(n *node, after rune) {
	text := strings.ReplaceAll(plainText(n.kids), "\n", " ")
	switch {
	case !linkable(n.url) && (n.url == "" || n.url == text):
		w.inline(n.kids, after)
	case !linkable(n.url):
		w.inline(n.kids, ' ')
		w.text(" ("+n.url+")", after)
	case strings.TrimSpace(text) == "" || text == n.url:
		w.write("<" + slackURL(n.url) + ">")
	default:
		label := strings.ReplaceAll(escapeSlack(text), "`", graveAccent)
		w.write("<" + slackURL(n.url) + "|" + label + ">")
	}
}

// graveAccent (ˋ) stands in for a backtick outside code blocks. Slack
// has no escape for one and no word-boundary rule to break: a literal
// backtick pairs with the next into a code span, three open a block.
const graveAccent = "\u02cb"

// text writes literal text, escaping &, < and > and keeping Slack from
// reading a literal *, _ or ~ as a marker: a run of them is split by
// zero-width spaces, and set off from its neighbours unless it sits
// inside a word (snake_case), where Slack sees no marker.
func (w *slackWriter) text(s string, after rune) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch r {
		case '&':
			w.write("&amp;")
		case '<':
			w.write("&lt;")
		case '>':
			w.write("&gt;")
		case '`':
			w.write(graveAccent)
		case '*', '_', '~':
			size = runLen(s[i:], byte(r))
			next := after
			if i+size < len(s) {
				next, _ = utf8.DecodeRuneInString(s[i+size:])
			}
			prev := w.last
			intraword := isWordRune(prev) && isWordRune(next)
			if !gap(prev) && !intraword {
				w.write(zwsp)
			}
			w.write(strings.Join(strings.Split(s[i:i+size], ""), zwsp))
			if !gap(next) && !intraword {
				w.write(zwsp)
			}
		default:
			w.writeRune(r)
		}
		i += size
	}
}

// gap reports a rune a marker cannot lean on: nothing, a blank or a
// zero-width space.
func gap(r rune) bool { return r == 0 || isSpace(r) || r == '\u200b' }

// escapeSlack escapes the three characters Slack reserves.
func escapeSlack(s string) string {
	return slackEscaper.Replace(s)
}

var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// slackURL makes a URL safe inside <...|...>: the characters that would
// end it are percent-encoded, & is escaped as everywhere.
func slackURL(u string) string {
	return slackURLEscaper.Replace(u)
}

var slackURLEscaper = strings.NewReplacer("&", "&amp;", "<", "%3C", ">", "%3E", "|", "%7C")
