package chatfmt

import "strings"

// blockKind is what a run of source lines is. Blocks are line-based, as
// chat messages are: nothing nests but inline markup, so a list item or
// quote line renders the same on its own as among its neighbours, and a
// part Split cut at a line renders as it did in the whole.
type blockKind int

const (
	paragraphBlock blockKind = iota
	headingBlock
	listItemBlock
	quoteBlock
	codeBlock
	ruleBlock
	blankBlock
)

type block struct {
	kind   blockKind
	level  int      // heading: 1 to 6
	indent string   // list item: the blanks before its marker
	marker string   // list item: "-" for any bullet, else the number with its '.' or ')'
	lang   string   // code block: the language its fence names
	text   string   // paragraph, heading, list item: inline source; code block: the code
	lines  []string // quote: each line's inline source, markers removed
}

// parseBlocks reads text (with LF line ends) into blocks.
func parseBlocks(text string) []block {
	var blocks []block
	fences := findFences(text)
	var para []string
	flush := func() {
		if para != nil {
			blocks = append(blocks, block{kind: paragraphBlock, text: strings.Join(para, "\n")})
			para = nil
		}
	}
	for start := 0; start <= len(text); {
		if len(fences) > 0 && fences[0].openStart == start {
			flush()
			f := fences[0]
			fences = fences[1:]
			blocks = append(blocks, block{kind: codeBlock, lang: f.lang, text: fenceContent(text, f)})
			if !f.closed {
				break
			}
			start = lineEnd(text, f.closeStart) + 1
			continue
		}
		end := lineEnd(text, start)
		line := text[start:end]
		start = end + 1

		b, ok := lineBlock(line)
		switch {
		case !ok:
			para = append(para, line)
		case b.kind == quoteBlock && len(blocks) > 0 && para == nil && blocks[len(blocks)-1].kind == quoteBlock:
			last := &blocks[len(blocks)-1]
			last.lines = append(last.lines, b.lines...)
		default:
			flush()
			blocks = append(blocks, b)
		}
	}
	flush()
	return blocks
}

// lineBlock classifies a line outside code; ok is false for a paragraph
// line.
func lineBlock(line string) (block, bool) {
	if strings.TrimSpace(line) == "" {
		return block{kind: blankBlock}, true
	}
	rest, shallow := fenceIndent(line)
	if shallow {
		if level, text, ok := heading(rest); ok {
			return block{kind: headingBlock, level: level, text: text}, true
		}
		if isRule(rest) {
			return block{kind: ruleBlock}, true
		}
		if strings.HasPrefix(rest, ">") {
			return block{kind: quoteBlock, lines: []string{quoteText(rest)}}, true
		}
	}
	if indent, marker, text, ok := listItem(line); ok {
		return block{kind: listItemBlock, indent: indent, marker: marker, text: text}, true
	}
	return block{}, false
}

// heading reads an ATX heading: one to six '#', then a blank or the end,
// then the text, less any closing run of '#'.
func heading(s string) (level int, text string, ok bool) {
	level = runLen(s, '#')
	if level == 0 || level > 6 {
		return 0, "", false
	}
	text = s[level:]
	if text != "" && text[0] != ' ' && text[0] != '\t' {
		return 0, "", false
	}
	text = strings.TrimSpace(text)
	if trimmed := strings.TrimRight(text, "#"); trimmed == "" || strings.HasSuffix(trimmed, " ") || strings.HasSuffix(trimmed, "\t") {
		text = strings.TrimSpace(trimmed)
	}
	return level, text, true
}

// isRule reports a thematic break: three or more of one of - * _, with
// blanks allowed between.
func isRule(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" || (s[0] != '-' && s[0] != '*' && s[0] != '_') {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case s[0]:
			n++
		case ' ', '\t':
		default:
			return false
		}
	}
	return n >= 3
}

// quoteText strips a quote line's markers. Telegram cannot nest quotes,
// so "> > x" is read as "> x" everywhere.
func quoteText(s string) string {
	for strings.HasPrefix(s, ">") {
		s = strings.TrimPrefix(s[1:], " ")
		s = strings.TrimLeft(s, " \t")
	}
	return s
}

// listItem reads a list item line: indentation, a bullet (- * +) or a
// number of up to nine digits with '.' or ')', blanks, then text.
func listItem(line string) (indent, marker, text string, ok bool) {
	i := 0
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	indent = line[:i]
	j := i
	switch {
	case j < len(line) && (line[j] == '-' || line[j] == '*' || line[j] == '+'):
		j++
		marker = "-"
	default:
		for j < len(line) && j-i < 9 && isDigit(line[j]) {
			j++
		}
		if j == i || j == len(line) || (line[j] != '.' && line[j] != ')') {
			return "", "", "", false
		}
		j++
		marker = line[i:j]
	}
	if j == len(line) || (line[j] != ' ' && line[j] != '\t') {
		return "", "", "", false
	}
	text = strings.TrimLeft(line[j:], " \t")
	if text == "" {
		return "", "", "", false
	}
	return indent, marker, text, true
}

// fenceContent is the code between a block's fences, each line less the
// indentation of its opening fence.
func fenceContent(text string, f fence) string {
	from := f.openEnd + 1
	to := f.closeStart - 1
	if !f.closed {
		to = len(text)
	}
	if from >= to {
		return ""
	}
	code := text[from:to]
	if f.indent == "" {
		return code
	}
	lines := strings.Split(code, "\n")
	for i, l := range lines {
		n := min(runLen(l, ' '), len(f.indent))
		lines[i] = l[n:]
	}
	return strings.Join(lines, "\n")
}

// lineEnd is the offset of the newline ending the line at start, or
// len(text).
func lineEnd(text string, start int) int {
	if i := strings.IndexByte(text[start:], '\n'); i >= 0 {
		return start + i
	}
	return len(text)
}
