package chatfmt

import "strings"

// fence is a fenced code block where it lies in the source. Split and the
// block parser both find code blocks through findFences, so a part Split
// closes and reopens is parsed exactly as Split saw it.
type fence struct {
	openStart, openEnd int // the opening line, without its newline
	// closeStart is where the closing line starts and closeEnd where its
	// run of backticks or tildes ends (blanks after it lie outside the
	// block); both are len(text) when the block is never closed.
	closeStart, closeEnd int
	closed               bool
	indent               string // the spaces before the opening run
	marker               string // the opening run of backticks or tildes, which a closing line must match
	lang                 string // the first word of the info string
}

// contains reports whether a cut at byte offset p leaves the block open:
// anywhere after the opening line starts and before the closing line ends.
// An unclosed block runs to the end of the text, end included.
func (f fence) contains(p int) bool {
	if !f.closed {
		return p > f.openStart
	}
	return p > f.openStart && p < f.closeEnd
}

// findFences lists the fenced code blocks of text in order.
func findFences(text string) []fence {
	var fences []fence
	var cur *fence
	for start := 0; start <= len(text); {
		end := strings.IndexByte(text[start:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += start
		}
		line := text[start:end]
		switch {
		case cur == nil:
			if marker, info, ok := openingFence(line); ok {
				cur = &fence{openStart: start, openEnd: end, indent: line[:runLen(line, ' ')], marker: marker, lang: firstWord(info)}
			}
		case closesFence(line, cur.marker):
			n := runLen(line, ' ')
			n += runLen(line[n:], cur.marker[0])
			cur.closeStart, cur.closeEnd, cur.closed = start, start+n, true
			fences = append(fences, *cur)
			cur = nil
		}
		start = end + 1
	}
	if cur != nil {
		cur.closeStart, cur.closeEnd = len(text), len(text)
		fences = append(fences, *cur)
	}
	return fences
}

// openingFence recognises a line that opens a code block: up to three
// spaces, three or more backticks or tildes, then an info string (which
// for backticks may not hold a backtick, or the line is inline code).
func openingFence(line string) (marker, info string, ok bool) {
	rest, ok := fenceIndent(line)
	if !ok || len(rest) < 3 || (rest[0] != '`' && rest[0] != '~') {
		return "", "", false
	}
	n := runLen(rest, rest[0])
	if n < 3 {
		return "", "", false
	}
	marker, info = rest[:n], strings.TrimSpace(rest[n:])
	if marker[0] == '`' && strings.ContainsRune(info, '`') {
		return "", "", false
	}
	return marker, info, true
}

// closesFence reports whether line closes a block opened with marker: up
// to three spaces, a run of the same character at least as long, and
// nothing after it but blanks.
func closesFence(line, marker string) bool {
	rest, ok := fenceIndent(line)
	if !ok {
		return false
	}
	n := runLen(rest, marker[0])
	return n >= len(marker) && strings.TrimSpace(rest[n:]) == ""
}

func fenceIndent(line string) (string, bool) {
	n := runLen(line, ' ')
	return line[n:], n <= 3
}

// runLen counts the bytes equal to c at the start of s.
func runLen(s string, c byte) int {
	n := 0
	for n < len(s) && s[n] == c {
		n++
	}
	return n
}

func firstWord(s string) string {
	if i := strings.IndexAny(s, " \t\r"); i >= 0 {
		return s[:i]
	}
	return s
}
