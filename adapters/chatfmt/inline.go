package chatfmt

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// nodeKind is what an inline node is.
type nodeKind int

const (
	textNode   nodeKind = iota
	codeNode            // text is the code
	emphNode            // *x* or _x_
	strongNode          // **x** or __x__
	strikeNode          // ~~x~~
	linkNode            // [kids](url), or ![kids](url) for an image
	urlNode             // text is a bare URL or the inside of <scheme:...>
)

type node struct {
	kind nodeKind
	text string
	url  string
	kids []*node
}

// parseInline reads the inline markup of one block. It follows
// CommonMark's rules for emphasis (flanking, the rule of three), code spans
// and links closely enough that what a model writes parses as a CommonMark
// reader would show it; markers that close nothing stay literal text.
func parseInline(src string) []*node {
	p := &inlineParser{src: src, failedTicks: map[int]bool{}}
	p.parse()
	p.processEmphasis(nil)
	return mergeStyles(p.nodes(p.head, nil))
}

// mergeStyles joins neighbouring nodes of one style, as in *a*_b_: shown
// apart, their markers would touch, and "__" is underline to Telegram and
// Discord.
func mergeStyles(nodes []*node) []*node {
	var out []*node
	for _, n := range nodes {
		if len(n.kids) > 0 {
			n.kids = mergeStyles(n.kids)
		}
		out = appendMerged(out, n)
	}
	return out
}

// appendMerged appends n to nodes, folding it into the last node when
// both are the same style.
func appendMerged(nodes []*node, n *node) []*node {
	k := len(nodes)
	if k == 0 || nodes[k-1].kind != n.kind || (n.kind != emphNode && n.kind != strongNode && n.kind != strikeNode) {
		return append(nodes, n)
	}
	kids := slices.Clip(nodes[k-1].kids)
	for _, c := range n.kids {
		kids = appendMerged(kids, c)
	}
	nodes[k-1] = &node{kind: n.kind, kids: kids}
	return nodes
}

type inlineParser struct {
	src        string
	head, tail *piece
	delims     *delim   // top of the delimiter stack
	brackets   *bracket // top of the bracket stack
	text       strings.Builder
	// failedTicks remembers backtick run lengths that found no closing
	// run: none will be found later either, so no run rescans the rest.
	failedTicks map[int]bool
}

// piece is one entry of the list the parser builds: a finished node, or
// the literal text of a delimiter run or bracket, which emphasis and link
// processing shorten or remove.
type piece struct {
	n          *node
	prev, next *piece
}

// delim is a run of '*', '_' or "~~" that may open or close emphasis.
type delim struct {
	p                 *piece
	ch                byte
	n, orig           int // characters left, characters at first
	canOpen, canClose bool
	prev, next        *delim
}

// bracket is a '[' or "![" that a later ']' may close into a link.
type bracket struct {
	p      *piece
	image  bool
	active bool   // false once inside a link: links do not nest
	bottom *delim // the delimiter stack's top when the bracket opened
	prev   *bracket
}

func (p *inlineParser) parse() {
	s := p.src
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '\\':
			switch {
			case i+1 < len(s) && isASCIIPunct(s[i+1]):
				p.text.WriteByte(s[i+1])
				i += 2
			case i+1 < len(s) && s[i+1] == '\n':
				p.text.WriteByte('\n')
				i += 2
			default:
				p.text.WriteByte('\\')
				i++
			}
		case '`':
			i = p.codeSpan(i)
		case '*', '_':
			n := runLen(s[i:], c)
			p.pushDelim(i, n, c)
			i += n
		case '~':
			n := runLen(s[i:], c)
			if n == 2 {
				p.pushDelim(i, n, c)
			} else {
				p.text.WriteString(s[i : i+n])
			}
			i += n
		case '[':
			p.pushBracket("[", false)
			i++
		case '!':
			if i+1 < len(s) && s[i+1] == '[' {
				p.pushBracket("![", true)
				i += 2
			} else {
				p.text.WriteByte(c)
				i++
			}
		case ']':
			i = p.closeBracket(i)
		case '<':
			if n := autolinkLen(s[i:]); n > 0 {
				p.add(&node{kind: urlNode, text: s[i+1 : i+n-1]})
				i += n
			} else {
				p.text.WriteByte(c)
				i++
			}
		case 'h', 'H':
			if n := bareURLLen(s, i); n > 0 {
				p.add(&node{kind: urlNode, text: s[i : i+n]})
				i += n
			} else {
				p.text.WriteByte(c)
				i++
			}
		default:
			j := i + 1
			for j < len(s) && !strings.ContainsRune("\\`*_~[!]<hH", rune(s[j])) {
				j++
			}
			p.text.WriteString(s[i:j])
			i = j
		}
	}
	p.flush()
}

// codeSpan reads the backtick run at i: a code span if a run of the same
// length closes it, else literal backticks.
func (p *inlineParser) codeSpan(i int) int {
	s := p.src
	n := runLen(s[i:], '`')
	if !p.failedTicks[n] {
		for j := i + n; j < len(s); {
			k := strings.IndexByte(s[j:], '`')
			if k < 0 {
				break
			}
			j += k
			m := runLen(s[j:], '`')
			if m == n {
				p.add(&node{kind: codeNode, text: codeText(s[i+n : j])})
				return j + m
			}
			j += m
		}
		p.failedTicks[n] = true
	}
	p.text.WriteString(s[i : i+n])
	return i + n
}

// codeText is a code span's content as CommonMark shows it: line breaks
// become spaces, and one space is stripped from each end when both ends
// have one, so a span of two backticks padded with spaces can show one.
func codeText(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) >= 2 && s[0] == ' ' && s[len(s)-1] == ' ' && strings.Trim(s, " ") != "" {
		s = s[1 : len(s)-1]
	}
	return s
}

// pushDelim adds a run of n c's at i, deciding from its neighbours whether
// it can open or close emphasis.
func (p *inlineParser) pushDelim(i, n int, c byte) {
	before, after := ' ', ' '
	if i > 0 {
		before, _ = utf8.DecodeLastRuneInString(p.src[:i])
	}
	if i+n < len(p.src) {
		after, _ = utf8.DecodeRuneInString(p.src[i+n:])
	}
	left := !unicode.IsSpace(after) && (!isPunct(after) || unicode.IsSpace(before) || isPunct(before))
	right := !unicode.IsSpace(before) && (!isPunct(before) || unicode.IsSpace(after) || isPunct(after))
	d := &delim{ch: c, n: n, orig: n, canOpen: left, canClose: right}
	if c == '_' {
		// An underscore inside a word (snake_case) is never emphasis.
		d.canOpen = left && (!right || isPunct(before))
		d.canClose = right && (!left || isPunct(after))
	}
	if !d.canOpen && !d.canClose {
		p.text.WriteString(p.src[i : i+n])
		return
	}
	d.p = p.add(&node{kind: textNode, text: p.src[i : i+n]})
	d.prev = p.delims
	if p.delims != nil {
		p.delims.next = d
	}
	p.delims = d
}

func (p *inlineParser) pushBracket(text string, image bool) {
	b := &bracket{image: image, active: true, bottom: p.delims, prev: p.brackets}
	b.p = p.add(&node{kind: textNode, text: text})
	p.brackets = b
}

// closeBracket handles the ']' at i: with an open bracket and a link
// destination after it, everything since the bracket becomes a link.
func (p *inlineParser) closeBracket(i int) int {
	b := p.brackets
	if b == nil {
		p.text.WriteByte(']')
		return i + 1
	}
	p.brackets = b.prev
	dest, end, ok := linkDest(p.src, i+1)
	if !b.active || !ok {
		p.text.WriteByte(']')
		return i + 1
	}
	p.flush()
	p.processEmphasis(b.bottom)
	kids := p.detach(b.p.next, nil)
	p.remove(b.p)
	p.add(&node{kind: linkNode, url: dest, kids: kids})
	if !b.image {
		for o := p.brackets; o != nil; o = o.prev {
			if !o.image {
				o.active = false
			}
		}
	}
	return end
}

// processEmphasis matches the delimiters above bottom into emphasis, as
// CommonMark's algorithm of the same name does, then drops them.
func (p *inlineParser) processEmphasis(bottom *delim) {
	var first *delim
	for d := p.delims; d != bottom; d = d.prev {
		first = d
	}
	// openersBottom[ch][closer can open][closer length % 3]: below it no
	// opener was found for such a closer, so no later search goes there.
	var openersBottom [3][2][3]*delim
	for i := range openersBottom {
		for j := range openersBottom[i] {
			for k := range openersBottom[i][j] {
				openersBottom[i][j][k] = bottom
			}
		}
	}
	for closer := first; closer != nil; {
		if !closer.canClose {
			closer = closer.next
			continue
		}
		ob := &openersBottom[delimIndex(closer.ch)][boolIndex(closer.canOpen)][closer.orig%3]
		opener := closer.prev
		for opener != nil && opener != bottom && opener != *ob {
			if opener.ch == closer.ch && opener.canOpen && !ruleOfThree(opener, closer) {
				break
			}
			opener = opener.prev
		}
		if opener == nil || opener == bottom || opener == *ob {
			*ob = closer.prev
			next := closer.next
			if !closer.canOpen {
				p.removeDelim(closer)
			}
			closer = next
			continue
		}
		use, kind := 1, emphNode
		switch {
		case closer.ch == '~':
			use, kind = 2, strikeNode
		case opener.n >= 2 && closer.n >= 2:
			use, kind = 2, strongNode
		}
		for d := closer.prev; d != opener; {
			prev := d.prev
			p.removeDelim(d)
			d = prev
		}
		opener.n -= use
		closer.n -= use
		opener.p.n.text = opener.p.n.text[:opener.n]
		closer.p.n.text = closer.p.n.text[:closer.n]
		kids := p.detach(opener.p.next, closer.p)
		p.insertAfter(opener.p, &node{kind: kind, kids: kids})
		if opener.n == 0 {
			p.remove(opener.p)
			p.removeDelim(opener)
		}
		if closer.n == 0 {
			next := closer.next
			p.remove(closer.p)
			p.removeDelim(closer)
			closer = next
		}
	}
	for p.delims != bottom {
		p.removeDelim(p.delims)
	}
}

// ruleOfThree is CommonMark's rule that a run which can both open and
// close does not pair with one whose lengths sum to a multiple of three,
// unless both are multiples of three: it keeps *a**b* from reading as
// nested emphasis.
func ruleOfThree(opener, closer *delim) bool {
	if closer.ch == '~' || !(opener.canClose || closer.canOpen) {
		return false
	}
	return (opener.orig+closer.orig)%3 == 0 && !(opener.orig%3 == 0 && closer.orig%3 == 0)
}

func delimIndex(c byte) int {
	switch c {
	case '*':
		return 0
	case '_':
		return 1
	}
	return 2
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// add flushes pending text and appends n; it returns n's piece.
func (p *inlineParser) add(n *node) *piece {
	p.flush()
	return p.append(n)
}

func (p *inlineParser) flush() {
	if p.text.Len() > 0 {
		p.append(&node{kind: textNode, text: p.text.String()})
		p.text.Reset()
	}
}

func (p *inlineParser) append(n *node) *piece {
	pc := &piece{n: n, prev: p.tail}
	if p.tail != nil {
		p.tail.next = pc
	} else {
		p.head = pc
	}
	p.tail = pc
	return pc
}

func (p *inlineParser) insertAfter(at *piece, n *node) {
	pc := &piece{n: n, prev: at, next: at.next}
	if at.next != nil {
		at.next.prev = pc
	} else {
		p.tail = pc
	}
	at.next = pc
}

func (p *inlineParser) remove(pc *piece) {
	if pc.prev != nil {
		pc.prev.next = pc.next
	} else {
		p.head = pc.next
	}
	if pc.next != nil {
		pc.next.prev = pc.prev
	} else {
		p.tail = pc.prev
	}
}

// detach unlinks the pieces from from up to (not including) to and
// returns their nodes.
func (p *inlineParser) detach(from, to *piece) []*node {
	if from == to {
		return nil
	}
	kids := p.nodes(from, to)
	before := from.prev
	if before != nil {
		before.next = to
	} else {
		p.head = to
	}
	if to != nil {
		to.prev = before
	} else {
		p.tail = before
	}
	return kids
}

// nodes lists the nodes of the pieces from from up to to, joining
// neighbouring text.
func (p *inlineParser) nodes(from, to *piece) []*node {
	var out []*node
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			out = append(out, &node{kind: textNode, text: text.String()})
			text.Reset()
		}
	}
	for pc := from; pc != to; pc = pc.next {
		if pc.n.kind == textNode {
			text.WriteString(pc.n.text)
			continue
		}
		flush()
		out = append(out, pc.n)
	}
	flush()
	return out
}

func (p *inlineParser) removeDelim(d *delim) {
	if d.prev != nil {
		d.prev.next = d.next
	}
	if d.next != nil {
		d.next.prev = d.prev
	}
	if p.delims == d {
		p.delims = d.prev
	}
}

// linkDest reads "(destination "optional title")" at i, returning the
// destination and the offset after the closing parenthesis.
func linkDest(s string, i int) (dest string, end int, ok bool) {
	if i >= len(s) || s[i] != '(' {
		return "", 0, false
	}
	j := skipBlanks(s, i+1)
	if j < len(s) && s[j] == '<' {
		k := j + 1
		for k < len(s) && s[k] != '>' && s[k] != '<' && s[k] != '\n' {
			if s[k] == '\\' && k+1 < len(s) {
				k++
			}
			k++
		}
		if k >= len(s) || s[k] != '>' {
			return "", 0, false
		}
		dest, j = unescape(s[j+1:k]), k+1
	} else {
		k, depth := j, 0
	scan:
		for k < len(s) {
			switch c := s[k]; {
			case c == '\\' && k+1 < len(s) && isASCIIPunct(s[k+1]):
				k++
			case c == '(':
				// As in cmark, parentheses nest 32 deep at most, which
				// keeps "[](" repeated from rescanning the rest each time.
				if depth++; depth > 32 {
					return "", 0, false
				}
			case c == ')':
				if depth == 0 {
					break scan
				}
				depth--
			case c <= ' ':
				break scan
			}
			k++
		}
		if depth != 0 {
			return "", 0, false
		}
		dest, j = unescape(s[j:k]), k
	}
	k := skipBlanks(s, j)
	if k > j && k < len(s) && (s[k] == '"' || s[k] == '\'' || s[k] == '(') {
		closing := s[k]
		if closing == '(' {
			closing = ')'
		}
		k++
		for k < len(s) && s[k] != closing {
			if s[k] == '\\' && k+1 < len(s) {
				k++
			}
			k++
		}
		if k >= len(s) {
			return "", 0, false
		}
		k = skipBlanks(s, k+1)
	}
	if k >= len(s) || s[k] != ')' {
		return "", 0, false
	}
	return dest, k + 1, true
}

func skipBlanks(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
		i++
	}
	return i
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && isASCIIPunct(s[i+1]) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// autolinkLen is the length of a <scheme:...> autolink at the start of
// s, or 0.
func autolinkLen(s string) int {
	i := 1
	for i < len(s) && i-1 < 32 && (isASCIILetter(s[i]) || i > 1 && (isDigit(s[i]) || s[i] == '+' || s[i] == '.' || s[i] == '-')) {
		i++
	}
	if i < 3 || i >= len(s) || s[i] != ':' {
		return 0
	}
	for i++; i < len(s); i++ {
		switch c := s[i]; {
		case c == '>':
			return i + 1
		case c <= ' ' || c == '<' || c == 0x7f:
			return 0
		}
	}
	return 0
}

// bareURLLen is the length of an http(s) URL written out at s[i:], or 0.
// Like GFM's autolinks it starts after a non-word character and stops at
// a blank, leaving off trailing punctuation and unbalanced parentheses,
// so "(see https://x.org/a_b)." links only https://x.org/a_b. The scheme
// is in lower case, as Discord links it: "HTTP://x.org/a__b__" is text
// there, its "__" an underline, so it is rendered as text.
func bareURLLen(s string, i int) int {
	rest := s[i:]
	scheme := 0
	switch {
	case strings.HasPrefix(rest, "https://"):
		scheme = 8
	case strings.HasPrefix(rest, "http://"):
		scheme = 7
	default:
		return 0
	}
	if i > 0 {
		if r, _ := utf8.DecodeLastRuneInString(s[:i]); unicode.IsLetter(r) || unicode.IsDigit(r) {
			return 0
		}
	}
	n := scheme
	for n < len(rest) {
		r, size := utf8.DecodeRuneInString(rest[n:])
		if r <= ' ' || r == 0x7f || unicode.IsSpace(r) || strings.ContainsRune("<>\"`[]{}|\\^", r) {
			break
		}
		n += size
	}
	// Trailing punctuation ends the sentence, not the URL; so does a
	// closing parenthesis the URL never opened.
	unclosed := strings.Count(rest[:n], ")") - strings.Count(rest[:n], "(")
	for ; n > scheme; n-- {
		switch c := rest[n-1]; {
		case strings.IndexByte("?!.,:;*_~'\"", c) >= 0:
		case c == ')' && unclosed > 0:
			unclosed--
		default:
			return n
		}
	}
	return 0
}

func isASCIIPunct(c byte) bool {
	return c > ' ' && c < 0x7f && !isDigit(c) && !isASCIILetter(c)
}

// isPunct is CommonMark's punctuation for flanking: Unicode punctuation
// and symbols.
func isPunct(r rune) bool {
	if r < 0x80 {
		return isASCIIPunct(byte(r))
	}
	return unicode.IsPunct(r) || unicode.IsSymbol(r)
}
