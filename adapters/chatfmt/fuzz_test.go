package chatfmt_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/heraldgw/herald/adapters/chatfmt"
)

// seeds are replies of the kinds models write, and the malformed ones
// they write too.
var seeds = []string{
	"",
	"hello",
	"# Title\n\nSome **bold**, *italic*, _also_, ~~gone~~ and `code`.\n\n- one\n- two\n  - nested\n1. first\n2) second\n\n> a quote\n> > nested\n\n---\n",
	"```go\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n```\n\nAfter the code.",
	"```\nunclosed code\nruns to the end",
	"````md\n```go\ninner\n```\n````",
	"~~~\ntilde fence\n~~~",
	"  ```py\n  indented()\n  ```",
	"**unclosed bold and *unclosed italic and `unclosed code and [unclosed link",
	"***both*** **a *b* c** *a **b** c* ***x* y** __u__ ___v___",
	"snake_case_name and __init__ and 2*3*4 and a * b * c and ~5 min",
	"[link](https://example.com/a_(b)?q=1&r=2) [bad](javascript:alert(1)) [rel](docs/x.md) [](https://x.org) ![img](https://x.org/i.png)",
	"<https://example.com/path> https://example.com/a_b_c. (see https://x.org/wiki/Foo_(bar)).",
	"Special: _ * [ ] ( ) ~ ` > # + - = | { } . ! \\ & < > \"",
	"\\*escaped\\* \\_also\\_ \\\\ backslash \\",
	"`code with \\ backslash` and ``code with ` tick`` and ` ` blank",
	"@everyone @here <@&123> <@456> hi",
	"emoji 😀👍🏽👨‍👩‍👧 🇩🇪🇫🇷 é e\u0301 \u200d",
	"line one\nline two\n\n\n\nafter blank lines\r\nwith CRLF",
	"> **quote with bold\n> across lines**",
	"**bold `code` bold** *it [link `c`](https://x.org) it*",
	"&amp; &lt; &#39; &#x1F600; && &",
	"|| spoiler || and | table | row |\n|---|---|\n| a | b |",
	"*",
	"_",
	"**",
	"`",
	"```",
	"[",
	"]",
	"[x](",
	">",
	"#",
	"- ",
	strings.Repeat("word ", 100),
	strings.Repeat("x", 400),
	strings.Repeat("😀", 150),
	"```python\n" + strings.Repeat("print('a line of code')\n", 20) + "```\n\ntext after",
	strings.Repeat("*a* _b_ `c` [d](https://e.org) ", 15),
	strings.Repeat("\\.", 150),
	"\xff\xfe invalid UTF-8 \xc3",
	// Inputs fuzzing once broke.
	"http://0__00",
	"00000 00 _0_[]()*0*",
	"` ```0`",
	"```0`__`",
	"0*0_*",
	">`0`",
	"[`](http://0)",
	"https://` __`0",
	" ```\n~~~\n`",
}

// splitRegressions broke Split once: text, limit, measure UTF16.
var splitRegressions = []struct {
	text  string
	limit int
	utf16 bool
}{
	{"\u00a00", 0, true},
	{"\u0085", 500, true},
	{"```00000000000000000000000000000000000\n0\n```00", 48, false},
	{" 00", 0, false},
	{"0000000000000000000000 ~~~0000", 6, true},
	{"                  0   ~~~", 21, false},
}

func FuzzSplit(f *testing.F) {
	for i, s := range seeds {
		f.Add(s, i*37%500, i%2 == 0)
	}
	for _, r := range splitRegressions {
		f.Add(r.text, r.limit, r.utf16)
	}
	f.Fuzz(func(t *testing.T, text string, limit int, utf16 bool) {
		limit = 1 + int(uint(limit)%500)
		m := chatfmt.Runes
		if utf16 {
			m = chatfmt.UTF16
		}
		parts := chatfmt.Split(text, limit, m)
		checkSplit(t, text, limit, m, parts)
	})
}

// checkSplit checks Split's promises for parts of text.
func checkSplit(t *testing.T, text string, limit int, m chatfmt.Measure, parts []string) {
	t.Helper()
	if strings.TrimSpace(text) == "" && len(parts) > 0 {
		t.Fatalf("%d parts of blank text", len(parts))
	}
	room := fenceRoom(text, m, limit)
	for i, p := range parts {
		if n := m.Len(p); n > limit && !(limit < 3 && utf8.RuneCountInString(p) <= 2) {
			t.Fatalf("part %d is %d long, over %d: %q", i, n, limit, p)
		}
		if utf8.ValidString(text) && !utf8.ValidString(p) {
			t.Fatalf("part %d is not UTF-8: %q", i, p)
		}
		if strings.TrimSpace(p) == "" {
			t.Fatalf("part %d is blank", i)
		}
		if room {
			if err := fencesClosed(p); err != nil {
				t.Fatalf("part %d: %v: %q", i, err, p)
			}
		}
	}
	if err := reassemble(text, parts); err != nil {
		t.Fatalf("%v\nparts: %q", err, parts)
	}
}

// fenceLine matches a line that is or may become (cut in the middle) a
// fence line: one holding a run of three backticks or tildes.
var fenceLine = regexp.MustCompile("(?m)^.*(```|~~~).*$")

// fenceRoom reports whether limit leaves room for fences around code in
// text: a fence line and its closing pair, with some code between.
func fenceRoom(text string, m chatfmt.Measure, limit int) bool {
	longest := 0
	for _, l := range fenceLine.FindAllString(text, -1) {
		longest = max(longest, m.Len(l))
	}
	return longest == 0 || limit >= 2*longest+8
}

// reassemble checks that parts, less the fences Split adds and the
// whitespace it drops at cuts, are text in order. Whether a fence was
// added or is the text's own can be told only by what follows, so it
// searches, remembering the dead ends.
func reassemble(text string, parts []string) error {
	dead := map[[2]int]bool{}
	var from func(i, pos int) bool
	from = func(i, pos int) bool {
		if i == len(parts) {
			return strings.TrimSpace(text[pos:]) == ""
		}
		if dead[[2]int{i, pos}] {
			return false
		}
		for _, core := range cores(parts[i]) {
			for q := pos; q <= len(text); {
				if strings.HasPrefix(text[q:], core) && from(i+1, q+len(core)) {
					return true
				}
				r, size := utf8.DecodeRuneInString(text[q:])
				if q == len(text) || !unicode.IsSpace(r) {
					break
				}
				q += size
			}
		}
		dead[[2]int{i, pos}] = true
		return false
	}
	if !from(0, 0) {
		return fmt.Errorf("the parts are not the text in order")
	}
	return nil
}

// cores are the ways p may be source text with fences added: as it is,
// without a closing fence, without an opening one, without both.
func cores(p string) []string {
	out := []string{p}
	noClose, closed := p, false
	if i := strings.LastIndexByte(p, '\n'); i >= 0 && isFence(p[i+1:]) {
		noClose, closed = p[:i], true
	}
	if closed {
		out = append(out, noClose)
	}
	if i := strings.IndexByte(p, '\n'); i >= 0 && isFence(p[:i]) {
		out = append(out, p[i+1:])
		if closed && i+1 <= len(noClose) {
			out = append(out, noClose[i+1:])
		}
	}
	return out
}

func isFence(line string) bool {
	line = strings.TrimLeft(line, " ")
	return strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~")
}

func FuzzRenderTelegram(f *testing.F) {
	for i, s := range seeds {
		f.Add(s, i*53%700)
	}
	f.Fuzz(func(t *testing.T, text string, limit int) {
		for _, d := range []chatfmt.Dialect{chatfmt.TelegramMarkdownV2, chatfmt.TelegramHTML} {
			checkRender(t, text, d, limit)
		}
	})
}

func FuzzRenderSlack(f *testing.F) {
	for i, s := range seeds {
		f.Add(s, i*53%700)
	}
	f.Fuzz(func(t *testing.T, text string, limit int) {
		checkRender(t, text, chatfmt.SlackMrkdwn, limit)
	})
}

func FuzzRenderDiscord(f *testing.F) {
	for i, s := range seeds {
		f.Add(s, i*53%700)
	}
	f.Fuzz(func(t *testing.T, text string, limit int) {
		checkRender(t, text, chatfmt.DiscordMarkdown, limit)
		checkRender(t, text, chatfmt.PlainText, limit)
	})
}

// checkRender checks that text renders validly in d, whole and in parts
// under a limit between MinLimit and a few hundred.
func checkRender(t *testing.T, text string, d chatfmt.Dialect, limit int) {
	t.Helper()
	if out := chatfmt.Render(text, d); check(d, out) != nil {
		t.Fatalf("Render(%q, %s) = %q: %v", text, d, out, check(d, out))
	}
	limit = chatfmt.MinLimit + int(uint(limit)%700)
	m := d.Measure()
	for i, p := range chatfmt.RenderParts(text, d, limit) {
		if n := m.Len(p); n > limit {
			t.Fatalf("%s part %d is %d long, over %d: %q", d, i, n, limit, p)
		}
		if strings.TrimSpace(p) == "" {
			t.Fatalf("%s part %d is blank", d, i)
		}
		if err := check(d, p); err != nil {
			t.Fatalf("%s part %d of %q: %v\n%q", d, i, text, err, p)
		}
	}
}
