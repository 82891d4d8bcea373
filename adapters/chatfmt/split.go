package chatfmt

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Split cuts text into parts no longer than limit, counted in the Measure
// given as an option (Runes by default). It cuts where a reader would: at
// the last paragraph break that fits, else at a line break, else between
// words, and only then inside a word. It never cuts inside a UTF-8
// sequence (so never inside a UTF-16 surrogate pair), and unless the limit
// leaves no other place, not inside a backslash escape or an HTML entity
// (so rendered text splits safely too) nor between a character and the
// marks, joiners or modifiers that complete it.
//
// A fenced code block cut in two is closed at the end of one part and
// opened again, with its language, at the start of the next; those fences
// count toward the limit. Apart from them and the whitespace dropped at
// each cut, the parts in order are the text. Text with nothing but
// whitespace has no parts; a limit of zero or less means no limit.
//
// Fences stay balanced in every part as long as the limit leaves room for
// a pair of them around some code: twice the longest line holding a fence
// and a little more. Below that (a limit of a few characters, or a fence
// line about as long as the limit) Split still makes parts under the
// limit and cuts code as if it were text.
func Split(text string, limit int, opts ...Option) []string {
	o := options{measure: Runes}
	for _, opt := range opts {
		opt.apply(&o)
	}
	if onlySpace(text) {
		return nil
	}
	if limit <= 0 {
		return []string{text}
	}
	sp := newSplitter(text, o.measure, limit, func(part string) bool {
		return o.measure.Len(part) <= limit
	})
	return sp.split(nil)
}

// splitter finds the parts of one text. fits says whether a part (with
// the fences added to it) is short enough; window bounds how much source,
// in measure, one part may take, so no search looks further than a part
// could reach.
type splitter struct {
	text    string
	measure Measure
	window  int
	fits    func(part string) bool
	fences  []fence
}

func newSplitter(text string, m Measure, window int, fits func(string) bool) *splitter {
	return &splitter{text: text, measure: m, window: window, fits: fits, fences: findFences(text)}
}

// split returns the parts in order, each passed through keep (nil keeps
// every part as it is; returning "" drops it).
func (sp *splitter) split(keep func(string) string) []string {
	var parts []string
	for s := 0; s < len(sp.text) && !onlySpace(sp.text[s:]); {
		part, next := sp.next(s)
		if keep != nil && part != "" {
			part = keep(part)
		}
		if part != "" {
			parts = append(parts, part)
		}
		s = next
	}
	return parts
}

// tier ranks the places a part may end, best first.
type tier int

const (
	paragraphBreak tier = iota // a blank line
	lineBreak
	wordBreak
	clusterCut // inside a word, between whole characters
	unitCut    // inside a character cluster, but not inside an escape or entity
	runeCut    // anywhere between runes
)

// cut is one place a part may end: the part is text[s:end], the next part
// starts at next (the whitespace between is dropped).
type cut struct {
	end, next int
	tier      tier
}

// framing is how a part is wrapped: header reopens the code block the part
// starts in, and closes says whether a part that ends inside a code block
// gets a closing fence. A framing that closes blocks passes over awkward
// cuts in every tier but the last.
type framing struct {
	header string
	closes bool
}

// next finds the part that starts at s and where the part after it starts.
func (sp *splitter) next(s int) (part string, next int) {
	var framings []framing
	if f := sp.fenceAt(s); f != nil {
		full := f.indent + f.marker + f.lang + "\n"
		bare := f.indent + f.marker + "\n"
		framings = append(framings, framing{header: full, closes: true})
		if bare != full {
			framings = append(framings, framing{header: bare, closes: true})
		}
	} else {
		framings = append(framings, framing{closes: true})
	}
	// The last resort cuts code as text: no fence, however short, fits.
	framings = append(framings, framing{})

	rest := s + len(strings.TrimRightFunc(sp.text[s:], isSpace))
	restFits := sp.measure.Len(sp.text[s:rest]) <= sp.window
	var cuts []cut
	for _, fr := range framings {
		if restFits && sp.fits(sp.frame(fr, s, rest)) {
			return sp.frame(fr, s, rest), len(sp.text)
		}
		if cuts == nil {
			cuts = sp.cuts(s)
		}
		for t := paragraphBreak; t <= runeCut; t++ {
			strict := fr.closes && t < runeCut
			if c, ok := sp.largest(cuts, t, strict, fr, s); ok {
				return sp.frame(fr, s, c.end), c.next
			}
		}
	}
	// Nothing fits: the part's indentation alone is over the limit, so it
	// is dropped like the whitespace at a cut; or the limit is smaller
	// than one character's measure, which goes out alone.
	if r, _ := utf8.DecodeRuneInString(sp.text[s:]); unicode.IsSpace(r) {
		return "", s + len(sp.text[s:]) - len(strings.TrimLeftFunc(sp.text[s:], unicode.IsSpace))
	}
	n := unitLen(sp.text[s:])
	return sp.text[s : s+n], s + n
}

// largest is the cut of tier t furthest from s whose part fits. Parts grow
// with their end, so a binary search over the cuts in order finds it.
func (sp *splitter) largest(cuts []cut, t tier, strict bool, fr framing, s int) (cut, bool) {
	var in []cut
	for _, c := range cuts {
		if c.tier == t && (!strict || !sp.awkward(c)) {
			in = append(in, c)
		}
	}
	n := sort.Search(len(in), func(i int) bool { return !sp.fits(sp.frame(fr, s, in[i].end)) })
	if n == 0 {
		return cut{}, false
	}
	return in[n-1], true
}

// frame is the part text[s:end] with the fences fr adds.
func (sp *splitter) frame(fr framing, s, end int) string {
	part := fr.header + sp.text[s:end]
	if fr.closes {
		if f := sp.fenceAt(end); f != nil {
			part += "\n" + f.indent + f.marker
		}
	}
	return part
}

// awkward reports a cut that would leave a part with nothing of a code
// block but its fences (one ending on or just after an opening fence
// line, one ending inside a closing fence line, one whose next part would
// start with the closing fence), or one that starts the next part, in
// the middle of a line, with what would read as the start of a block.
func (sp *splitter) awkward(c cut) bool {
	if f := sp.fenceAt(c.end); f != nil {
		if c.end <= f.openEnd || (f.closed && c.end > f.closeStart) {
			return true
		}
	}
	f := sp.fenceAt(c.next)
	if f != nil && f.closed && c.next == f.closeStart {
		return true
	}
	if c.next == 0 || sp.text[c.next-1] == '\n' {
		return false
	}
	// How a line starts is in its first few characters; a long line is
	// not read to its end for every cut in it.
	line := sp.text[c.next:lineEnd(sp.text[:min(len(sp.text), c.next+80)], c.next)]
	if rest, ok := fenceIndent(line); ok && (runLen(rest, '`') >= 3 || runLen(rest, '~') >= 3) {
		return true
	}
	if f != nil {
		return false // the reopening fence keeps anything else code
	}
	_, isBlock := lineBlock(line)
	return isBlock
}

// fenceAt is the code block a cut at p would leave open, or nil.
func (sp *splitter) fenceAt(p int) *fence {
	i := sort.Search(len(sp.fences), func(i int) bool {
		f := sp.fences[i]
		return !f.closed || f.closeEnd > p
	})
	if i < len(sp.fences) && sp.fences[i].contains(p) {
		return &sp.fences[i]
	}
	return nil
}

// cuts lists, in order, every place a part starting at s may end within
// the window.
func (sp *splitter) cuts(s int) []cut {
	text := sp.text
	var cuts []cut
	units := 0
	escaped := false // the byte before is a backslash escaping this one
	entityEnd := -1  // inside an HTML entity until here
	joined := false  // the rune before asks to be joined to this one (ZWJ)
	regional := 0    // regional indicators in a row before this rune
	wordSeen := false
	prevSpace := false
	for i := s; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if i > s && wordSeen {
			t := clusterCut
			switch {
			case escaped || i < entityEnd:
				t = runeCut
			case joined || extends(r) || (isRegional(r) && regional%2 == 1):
				t = unitCut
			}
			cuts = append(cuts, cut{end: i, next: i, tier: t})
			if isSpace(r) && !prevSpace {
				cuts = append(cuts, sp.whitespaceCut(i))
			}
		}
		units += sp.measure.runeLen(r)
		if units > sp.window {
			break
		}
		switch {
		case escaped:
			escaped = false
		case r == '\\':
			escaped = true
		case r == '&':
			if n := entityLen(text[i:]); n > 0 {
				entityEnd = i + n
			}
		}
		joined = r == '\u200d'
		if isRegional(r) {
			regional++
		} else {
			regional = 0
		}
		prevSpace = isSpace(r)
		wordSeen = wordSeen || !unicode.IsSpace(r)
		i += size
	}
	return cuts
}

// whitespaceCut is the cut at the run of whitespace starting at i: the
// part ends before the run and the next starts after it, keeping the
// indentation of the line it starts on.
func (sp *splitter) whitespaceCut(i int) cut {
	j, newlines, next := i, 0, -1
	for j < len(sp.text) {
		r, size := utf8.DecodeRuneInString(sp.text[j:])
		if !isSpace(r) {
			break
		}
		if r == '\n' {
			newlines++
			next = j + 1
		}
		j += size
	}
	t := wordBreak
	switch {
	case newlines >= 2:
		t = paragraphBreak
	case newlines == 1:
		t = lineBreak
	default:
		next = j
	}
	return cut{end: i, next: next, tier: t}
}

// unitLen is the length of the smallest piece at the start of s that must
// not be cut: a rune, or a backslash with the rune it escapes.
func unitLen(s string) int {
	_, n := utf8.DecodeRuneInString(s)
	if s[0] == '\\' && len(s) > 1 {
		_, m := utf8.DecodeRuneInString(s[1:])
		n += m
	}
	return n
}

// entityLen is the length of the HTML entity (&amp;, &#39;, &#x1F600;) at
// the start of s, or 0.
func entityLen(s string) int {
	i := 1
	if i < len(s) && s[i] == '#' {
		i++
		hex := i < len(s) && (s[i] == 'x' || s[i] == 'X')
		if hex {
			i++
		}
		start := i
		for i < len(s) && i-start < 7 && (isDigit(s[i]) || hex && isHexLetter(s[i])) {
			i++
		}
		if i == start {
			return 0
		}
	} else {
		start := i
		for i < len(s) && i-start < 32 && (isDigit(s[i]) || isASCIILetter(s[i])) {
			i++
		}
		if i == start || !isASCIILetter(s[start]) {
			return 0
		}
	}
	if i < len(s) && s[i] == ';' {
		return i + 1
	}
	return 0
}

// extends reports a rune that belongs with the one before it: combining
// marks, variation selectors, emoji modifiers and tags, joiners.
func extends(r rune) bool {
	switch {
	case r == '\u200d', r == '\u20e3':
		return true
	case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF:
		return true
	case r >= 0x1F3FB && r <= 0x1F3FF, r >= 0xE0020 && r <= 0xE007F:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc)
}

// isRegional reports a regional indicator; two in a row make a flag.
func isRegional(r rune) bool { return r >= 0x1F1E6 && r <= 0x1F1FF }

// isSpace is ASCII whitespace. Non-breaking and other Unicode spaces are
// not places to break a message.
func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\f', '\v':
		return true
	}
	return false
}

// onlySpace reports text with nothing to show, which platforms refuse
// to send: any Unicode white space counts.
func onlySpace(s string) bool {
	for _, r := range s {
		if !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool       { return c >= '0' && c <= '9' }
func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isHexLetter(c byte) bool   { return c|0x20 >= 'a' && c|0x20 <= 'f' }
