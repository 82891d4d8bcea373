package chatfmt

import (
	"slices"
	"strings"
)

// Both Telegram dialects render from flat runs rather than the tree.
// Bold, italic and strikethrough may nest in any order and inside links,
// but code may be part of nothing but a quote (Bot API, "Formatting
// options"); runs let the writer close whatever is open around a code
// span and reopen it after. They also let it keep two italic markers
// from touching, which MarkdownV2 would read as "__", underline.

type style uint8

const (
	bold style = 1 << iota
	italic
	strike
)

// run is a stretch of inline text with one set of entities.
type run struct {
	text string
	st   style
	code bool
	url  string // the link the run is part of, or ""
}

// flatten turns inline nodes into runs, under the styles and link of the
// nodes around them.
func flatten(nodes []*node, st style, link string, runs []run) []run {
	for _, n := range nodes {
		switch n.kind {
		case textNode, urlNode:
			runs = append(runs, run{text: n.text, st: st, url: link})
		case codeNode:
			// Code inside a link cannot be code: it stays link text.
			runs = append(runs, run{text: n.text, st: st, code: link == "", url: link})
		case emphNode:
			runs = flatten(n.kids, st|italic, link, runs)
		case strongNode:
			runs = flatten(n.kids, st|bold, link, runs)
		case strikeNode:
			runs = flatten(n.kids, st|strike, link, runs)
		case linkNode:
			text := plainText(n.kids)
			switch {
			case link != "" || !linkable(n.url):
				runs = flatten(n.kids, st, link, runs)
				if n.url != "" && n.url != text && link == "" {
					runs = append(runs, run{text: " (" + n.url + ")", st: st})
				}
			case strings.TrimSpace(text) == "":
				runs = append(runs, run{text: n.url, st: st, url: n.url})
			default:
				runs = flatten(n.kids, st, n.url, runs)
			}
		}
	}
	return runs
}

// entity is one open entity: a link (with its URL) or a style.
type entity struct {
	st  style // 0 for a link
	url string
}

// entitySyntax is how a Telegram dialect writes entities and text.
type entitySyntax struct {
	open, close func(e entity) string
	text, code  func(b *strings.Builder, s string)
	// quote wraps a quote's rendered lines; pre renders a code block
	// (lang may be empty).
	quote func(lines []string) string
	pre   func(lang, text string) string
}

// block renders b in syn's parse mode. Entities close at the end of each
// line of a quote, so none spans a quote marker.
func (syn entitySyntax) block(b block) string {
	switch b.kind {
	case paragraphBlock:
		return inlineRuns(b.text, 0, syn)
	case headingBlock:
		return inlineRuns(b.text, bold, syn)
	case listItemBlock:
		var marker strings.Builder
		syn.text(&marker, bullet(b.marker))
		return b.indent + marker.String() + " " + inlineRuns(b.text, 0, syn)
	case quoteBlock:
		if blankQuote(b) {
			return ""
		}
		lines := make([]string, len(b.lines))
		for i, l := range b.lines {
			lines[i] = inlineRuns(l, 0, syn)
		}
		return syn.quote(lines)
	case codeBlock:
		if strings.TrimSpace(b.text) == "" {
			return ""
		}
		return syn.pre(codeLang(b.lang), b.text)
	case ruleBlock:
		return rule
	}
	return ""
}

// writeRuns writes runs, changing as few entities as it can between
// them: it closes open entities from the innermost out until only wanted
// ones are left, then opens the missing ones in the order link, bold,
// italic, strike. An italic entity closed there is reopened only after
// some other closes, so two '_' never touch.
func writeRuns(b *strings.Builder, runs []run, syn entitySyntax) {
	var open []entity
	moveTo := func(want []entity) {
		keep := len(open)
		for i, e := range open {
			if !slices.Contains(want, e) {
				keep = i
				break
			}
		}
		for i := len(open) - 1; i >= keep; i-- {
			b.WriteString(syn.close(open[i]))
		}
		open = open[:keep]
		for _, e := range want {
			if !slices.Contains(open, e) {
				b.WriteString(syn.open(e))
				open = append(open, e)
			}
		}
	}
	for _, r := range runs {
		if r.text == "" {
			continue
		}
		code := r.code && strings.TrimSpace(r.text) != ""
		var want []entity
		if !code {
			if r.url != "" {
				want = append(want, entity{url: r.url})
			}
			for _, st := range []style{bold, italic, strike} {
				if r.st&st != 0 {
					want = append(want, entity{st: st})
				}
			}
		}
		moveTo(want)
		if code {
			syn.code(b, r.text)
		} else {
			syn.text(b, r.text)
		}
	}
	moveTo(nil)
}

// inlineRuns renders one block's inline source in a Telegram dialect.
func inlineRuns(src string, st style, syn entitySyntax) string {
	var b strings.Builder
	writeRuns(&b, flatten(parseInline(src), st, "", nil), syn)
	return b.String()
}

// markdownV2Special is every character MarkdownV2 wants escaped outside
// entities.
const markdownV2Special = "_*[]()~`>#+-=|{}.!\\"

// markdownV2Marks open and close each style's entity in MarkdownV2; an
// entity without a style is a link.
var markdownV2Marks = map[style]string{bold: "*", italic: "_", strike: "~"}

var markdownV2Syntax = entitySyntax{
	open: func(e entity) string {
		if m, ok := markdownV2Marks[e.st]; ok {
			return m
		}
		return "["
	},
	close: func(e entity) string {
		if m, ok := markdownV2Marks[e.st]; ok {
			return m
		}
		return "](" + escapeMarkdownV2(e.url, ")\\") + ")"
	},
	text: func(b *strings.Builder, s string) { b.WriteString(escapeMarkdownV2(s, markdownV2Special)) },
	code: func(b *strings.Builder, s string) {
		b.WriteString("`")
		b.WriteString(escapeMarkdownV2(s, "`\\"))
		b.WriteString("`")
	},
	quote: func(lines []string) string { return ">" + strings.Join(lines, "\n>") },
	pre: func(lang, text string) string {
		return "```" + lang + "\n" + escapeMarkdownV2(text, "`\\") + "\n```"
	},
}

// escapeMarkdownV2 puts a backslash before each of s's characters that is
// in special.
func escapeMarkdownV2(s, special string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 && strings.ContainsRune(special, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// telegramHTMLTags are the tags of each style's entity in Telegram's
// HTML; an entity without a style is a link.
var telegramHTMLTags = map[style]string{bold: "b", italic: "i", strike: "s"}

var telegramHTMLSyntax = entitySyntax{
	open: func(e entity) string {
		if tag, ok := telegramHTMLTags[e.st]; ok {
			return "<" + tag + ">"
		}
		return `<a href="` + escapeHTML(e.url) + `">`
	},
	close: func(e entity) string {
		if tag, ok := telegramHTMLTags[e.st]; ok {
			return "</" + tag + ">"
		}
		return "</a>"
	},
	text: func(b *strings.Builder, s string) { b.WriteString(escapeHTML(s)) },
	code: func(b *strings.Builder, s string) {
		b.WriteString("<code>")
		b.WriteString(escapeHTML(s))
		b.WriteString("</code>")
	},
	quote: func(lines []string) string { return "<blockquote>" + strings.Join(lines, "\n") + "</blockquote>" },
	pre: func(lang, text string) string {
		if lang != "" {
			return `<pre><code class="language-` + lang + `">` + escapeHTML(text) + "</code></pre>"
		}
		return "<pre>" + escapeHTML(text) + "</pre>"
	},
}

// escapeHTML escapes the characters Telegram's HTML parse mode reserves,
// with the only named entities it knows.
func escapeHTML(s string) string {
	if !strings.ContainsAny(s, `<>&"`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
