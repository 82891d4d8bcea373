package chatfmt_test

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/heraldgw/herald/adapters/chatfmt"
)

// The checkers below read rendered text the way each platform's parser
// does, independently of the package, and report what the platform would
// reject or misread.

// check runs the checker for d.
func check(d chatfmt.Dialect, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("invalid UTF-8")
	}
	switch d {
	case chatfmt.TelegramMarkdownV2:
		return checkMarkdownV2(s)
	case chatfmt.TelegramHTML:
		return checkTelegramHTML(s)
	case chatfmt.SlackMrkdwn:
		return checkSlack(s)
	case chatfmt.DiscordMarkdown:
		return checkDiscord(s)
	}
	return nil
}

// checkMarkdownV2 parses Telegram MarkdownV2: every special character
// outside entities escaped; inside code only ` and \ escaped; entities
// closed in order, none containing code, no link in a link, no "__"
// (underline, which herald never means); '>' only starting a quote line,
// with nothing open.
func checkMarkdownV2(s string) error {
	var open []byte
	lineStart := true
	for i := 0; i < len(s); {
		c := s[i]
		atLineStart := lineStart
		lineStart = c == '\n'
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return fmt.Errorf("offset %d: trailing backslash", i)
			}
			if s[i+1] < 1 || s[i+1] > 126 {
				return fmt.Errorf("offset %d: escape of %q", i, s[i+1])
			}
			i += 2
		case c == '`':
			if len(open) > 0 {
				return fmt.Errorf("offset %d: code inside %q", i, open)
			}
			end, err := markdownV2Code(s, i)
			if err != nil {
				return err
			}
			i = end
		case c == '>' && atLineStart:
			if len(open) > 0 {
				return fmt.Errorf("offset %d: quote line inside %q", i, open)
			}
			i++
		case c == '*' || c == '_' || c == '~':
			if c == '_' && i+1 < len(s) && s[i+1] == '_' {
				return fmt.Errorf("offset %d: \"__\" reads as underline", i)
			}
			switch k := strings.IndexByte(string(open), c); {
			case k < 0:
				open = append(open, c)
			case k == len(open)-1:
				open = open[:k]
			default:
				return fmt.Errorf("offset %d: %q closes across %q", i, c, open)
			}
			i++
		case c == '[':
			if strings.IndexByte(string(open), '[') >= 0 {
				return fmt.Errorf("offset %d: link inside a link", i)
			}
			open = append(open, c)
			i++
		case c == ']':
			if len(open) == 0 || open[len(open)-1] != '[' {
				return fmt.Errorf("offset %d: ']' closes %q", i, open)
			}
			open = open[:len(open)-1]
			if i+1 >= len(s) || s[i+1] != '(' {
				return fmt.Errorf("offset %d: link without URL", i)
			}
			j := i + 2
			for ; j < len(s) && s[j] != ')'; j++ {
				if s[j] == '\\' {
					if j+1 >= len(s) || (s[j+1] != ')' && s[j+1] != '\\') {
						return fmt.Errorf("offset %d: bad escape in URL", j)
					}
					j++
				}
			}
			if j >= len(s) {
				return fmt.Errorf("offset %d: unclosed URL", i)
			}
			i = j + 1
		case strings.IndexByte("()>#+-=|{}.!", c) >= 0:
			return fmt.Errorf("offset %d: unescaped %q in %q", i, c, around(s, i))
		default:
			i++
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("unclosed %q", open)
	}
	return nil
}

// markdownV2Code reads the code span or pre block at i and returns the
// offset after it.
func markdownV2Code(s string, i int) (int, error) {
	fence := "`"
	j := i + 1
	if strings.HasPrefix(s[i:], "```") {
		fence = "```"
		j = i + 3
	}
	for j < len(s) {
		switch {
		case s[j] == '\\':
			if j+1 >= len(s) || (s[j+1] != '`' && s[j+1] != '\\') {
				return 0, fmt.Errorf("offset %d: bad escape in code", j)
			}
			j += 2
		case s[j] == '`':
			if !strings.HasPrefix(s[j:], fence) {
				return 0, fmt.Errorf("offset %d: lone backtick in a pre block", j)
			}
			return j + len(fence), nil
		default:
			j++
		}
	}
	return 0, fmt.Errorf("offset %d: unclosed code", i)
}

var htmlTag = regexp.MustCompile(`^<(/?)(b|i|s|code|pre|a|blockquote)( href="[^"<>]*"| class="language-[A-Za-z0-9+#_.-]+")?>`)

// checkTelegramHTML parses Telegram's HTML: only its tags, properly
// nested, nothing inside code but text, no style or link around code (a
// quote may hold it), and only the four entities it knows.
func checkTelegramHTML(s string) error {
	var open []string
	inside := func(names ...string) bool {
		for _, o := range open {
			for _, n := range names {
				if o == n {
					return true
				}
			}
		}
		return false
	}
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			m := htmlTag.FindStringSubmatch(s[i:])
			if m == nil {
				return fmt.Errorf("offset %d: bad tag in %q", i, around(s, i))
			}
			name := m[2]
			if m[1] == "/" {
				if len(open) == 0 || open[len(open)-1] != name {
					return fmt.Errorf("offset %d: </%s> closes %q", i, name, open)
				}
				open = open[:len(open)-1]
			} else {
				switch {
				case name == "code" && len(open) > 0 && open[len(open)-1] == "pre":
				case inside("code", "pre"):
					return fmt.Errorf("offset %d: <%s> inside code", i, name)
				case (name == "code" || name == "pre") && inside("b", "i", "s", "a"):
					return fmt.Errorf("offset %d: <%s> inside %q", i, name, open)
				case name == "a" && inside("a"), name == "blockquote" && inside("blockquote"):
					return fmt.Errorf("offset %d: nested <%s>", i, name)
				}
				if (m[3] != "") != (name == "a" || name == "code" && strings.HasPrefix(m[3], " class")) {
					return fmt.Errorf("offset %d: attributes of <%s>", i, name)
				}
				open = append(open, name)
			}
			i += len(m[0])
		case '>':
			return fmt.Errorf("offset %d: raw '>'", i)
		case '&':
			ok := false
			for _, e := range []string{"&lt;", "&gt;", "&amp;", "&quot;"} {
				ok = ok || strings.HasPrefix(s[i:], e)
			}
			if !ok {
				return fmt.Errorf("offset %d: raw '&'", i)
			}
			i++
		default:
			i++
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("unclosed %q", open)
	}
	return nil
}

var slackLink = regexp.MustCompile(`^<[a-zA-Z][a-zA-Z0-9+.-]*:[^\s<>|]+(\|[^<>]*)?>`)

// checkSlack reads Slack mrkdwn: &, < and > only as escapes, links and
// quote markers; backticks only in pairs; code blocks closed.
func checkSlack(s string) error {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&':
			if !strings.HasPrefix(s[i:], "&amp;") && !strings.HasPrefix(s[i:], "&lt;") && !strings.HasPrefix(s[i:], "&gt;") {
				return fmt.Errorf("offset %d: raw '&'", i)
			}
		case '<':
			m := slackLink.FindString(s[i:])
			if m == "" {
				return fmt.Errorf("offset %d: raw '<' in %q", i, around(s, i))
			}
			i += len(m) - 1
		case '>':
			if i > 0 && s[i-1] != '\n' {
				return fmt.Errorf("offset %d: raw '>'", i)
			}
		}
	}
	if err := touchingMarkers(s); err != nil {
		return err
	}
	for _, line := range linesOutsideCode(s) {
		if strings.Count(line, "`")%2 != 0 {
			return fmt.Errorf("a backtick pairs with nothing in %q", line)
		}
	}
	return fencesClosed(s)
}

// checkDiscord looks for what Discord would misread: mass mentions,
// markers run together, and code blocks left open.
func checkDiscord(s string) error {
	for _, m := range []string{"@everyone", "@here", "<@&"} {
		if strings.Contains(s, m) {
			return fmt.Errorf("mention %q left live", m)
		}
	}
	if err := touchingMarkers(s); err != nil {
		return err
	}
	return fencesClosed(s)
}

// touchingMarkers finds "__" outside code and links: Discord's
// underline, and in Slack two italic markers read as none. herald never
// means either.
func touchingMarkers(s string) error {
	for _, line := range linesOutsideCode(linkOrURL.ReplaceAllString(s, "URL")) {
		for i := 0; i < len(line); i++ {
			switch line[i] {
			case '\\':
				i++
			case '`':
				n := len(line[i:]) - len(strings.TrimLeft(line[i:], "`"))
				if end := strings.Index(line[i+n:], line[i:i+n]); end >= 0 {
					i += n + end + n - 1
				} else {
					i += n - 1
				}
			case '_':
				if i+1 < len(line) && line[i+1] == '_' {
					return fmt.Errorf("\"__\" in %q", line)
				}
			}
		}
	}
	return nil
}

var linkOrURL = regexp.MustCompile("<[^<>\\s]+>|https?://[^\\s`<>]+")

var openingFenceLine = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})")

// fencesClosed reports a code block left open at the end of s.
func fencesClosed(s string) error {
	if _, marker := readFences(s); marker != "" {
		return fmt.Errorf("code block opened with %q left open", marker)
	}
	return nil
}

// linesOutsideCode are s's lines that are neither fences nor code.
func linesOutsideCode(s string) []string {
	lines, _ := readFences(s)
	return lines
}

// readFences reads s's lines as CommonMark does, returning the lines
// outside fenced code and the marker of a block left open at the end.
func readFences(s string) (outside []string, marker string) {
	for _, line := range strings.Split(s, "\n") {
		if marker == "" {
			m := openingFenceLine.FindStringSubmatch(line)
			if m != nil && !(m[1][0] == '`' && strings.Contains(line[len(m[0]):], "`")) {
				marker = m[1]
			} else {
				outside = append(outside, line)
			}
			continue
		}
		rest := strings.TrimLeft(line, " ")
		if len(line)-len(rest) <= 3 {
			run := len(rest) - len(strings.TrimLeft(rest, marker[:1]))
			if run >= len(marker) && strings.TrimSpace(rest[run:]) == "" {
				marker = ""
			}
		}
	}
	return outside, marker
}

func around(s string, i int) string {
	from, to := max(0, i-20), min(len(s), i+20)
	return s[from:to]
}
