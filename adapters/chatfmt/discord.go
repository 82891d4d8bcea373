package chatfmt

import "strings"

// Discord's markdown is close to what models write, so the rendering is
// nearly the source: the differences are that Discord reads __x__ as
// underline (so bold is always **), draws headings only to ###, and pings
// on @everyone and @here. Literal markers are backslash-escaped, which
// Discord honours for any punctuation.

type discordWriter struct {
	textOut
	active style
}

func discordBlock(b block) string {
	w := &discordWriter{}
	w.lineStart = true
	switch b.kind {
	case paragraphBlock:
		w.inline(parseInline(b.text), 0)
	case headingBlock:
		switch {
		case b.text == "":
		case b.level <= 3:
			w.write(strings.Repeat("#", b.level) + " ")
			w.inline(parseInline(b.text), 0)
		default:
			w.styled(bold, "**", parseInline(b.text), 0)
		}
	case listItemBlock:
		w.write(b.indent + b.marker + " ")
		w.inline(parseInline(b.text), 0)
	case quoteBlock:
		w.quote(b.lines, func(l string) { w.inline(parseInline(l), 0) })
	case codeBlock:
		if strings.TrimSpace(b.text) != "" {
			w.write("```" + codeLang(b.lang) + "\n" + neutralizeFences(b.text) + "\n```")
		}
	case ruleBlock:
		w.write(rule)
	}
	return w.b.String()
}

// inline writes nodes; after is the first rune of what follows them, 0
// for nothing.
func (w *discordWriter) inline(nodes []*node, after rune) {
	for i, n := range nodes {
		next := after
		if i+1 < len(nodes) {
			next = firstRune(nodes[i+1])
		}
		switch n.kind {
		case textNode:
			w.text(n.text)
		case codeNode:
			w.code(n.text)
		case emphNode:
			// _x_ is italic only between non-word characters; inside a
			// word only *x* is.
			marker := "_"
			if isWordRune(w.last) || isWordRune(next) {
				marker = "*"
			}
			w.styled(italic, marker, n.kids, next)
		case strongNode:
			w.styled(bold, "**", n.kids, next)
		case strikeNode:
			w.styled(strike, "~~", n.kids, next)
		case linkNode:
			w.link(n, next)
		case urlNode:
			if linkable(n.text) {
				w.write(n.text)
			} else {
				w.text(n.text)
			}
		}
	}
}

// styled writes kids between markers, unless the style is on already.
func (w *discordWriter) styled(st style, marker string, kids []*node, after rune) {
	if w.active&st != 0 {
		w.inline(kids, after)
		return
	}
	w.active |= st
	if w.last == rune(marker[0]) {
		w.write(zwsp) // "_a_" then "_b_" would read as "__"
	}
	w.write(marker)
	w.inline(kids, rune(marker[0]))
	w.write(marker)
	w.active &^= st
}

// code writes a code span. Discord has no escape inside code, so code
// holding a backtick is wrapped in two with spaces inside, and code
// holding two in a row is shown as text.
func (w *discordWriter) code(c string) {
	switch {
	case strings.TrimSpace(c) == "" || strings.Contains(c, "``"):
		w.text(c)
	case strings.Contains(c, "`"):
		w.write("`` " + c + " ``")
	default:
		w.write("`" + c + "`")
	}
}

// link writes a masked link, [text](url), or the URL alone when it is
// its own text; a destination that is no web link follows its text.
func (w *discordWriter) link(n *node, after rune) {
	text := plainText(n.kids)
	switch {
	case !linkable(n.url) && (n.url == "" || n.url == text):
		w.inline(n.kids, after)
	case !linkable(n.url):
		w.inline(n.kids, ' ')
		w.text(" (" + n.url + ")")
	case strings.TrimSpace(text) == "" || text == n.url:
		w.write(n.url)
	default:
		w.write("[")
		w.inline(n.kids, ']')
		w.write("](" + discordURL.Replace(n.url) + ")")
	}
}

// text writes literal text with Discord's markers escaped, and the
// characters that start a heading, quote or list escaped at the start of
// a line.
func (w *discordWriter) text(s string) {
	for _, r := range s {
		switch r {
		case '\\', '*', '_', '~', '`', '|', '[', ']':
			w.write(`\`)
		case '#', '>', '-', '+':
			if w.lineStart {
				w.write(`\`)
			}
		}
		w.writeRune(r)
	}
}

// discordURL keeps a link's destination inside its parentheses.
var discordURL = strings.NewReplacer("(", "%28", ")", "%29", " ", "%20")

// disarmMentions puts a zero-width space into @everyone, @here and role
// mentions, so a reply can never ping a whole server; Discord shows them
// as written.
func disarmMentions(s string) string {
	return mentionDisarmer.Replace(s)
}

var mentionDisarmer = strings.NewReplacer("@everyone", "@"+zwsp+"everyone", "@here", "@"+zwsp+"here", "<@&", "<@"+zwsp+"&")
