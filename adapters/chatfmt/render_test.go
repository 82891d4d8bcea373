package chatfmt_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters/chatfmt"
)

type renderCase struct {
	desc string
	in   string
	want string
}

// testRender renders each case in d, compares with want and checks the
// result as d's platform would read it.
func testRender(t *testing.T, d chatfmt.Dialect, tests []renderCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := chatfmt.Render(tt.in, d)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Render(%q, %s) mismatch (-want +got):\n%s", tt.in, d, diff)
			}
			if err := check(d, got); err != nil {
				t.Errorf("Render(%q, %s) = %q: %v", tt.in, d, got, err)
			}
		})
	}
}

func TestRenderMarkdownV2(t *testing.T) {
	testRender(t, chatfmt.TelegramMarkdownV2, []renderCase{
		{desc: "every special character outside entities is escaped", in: "Price: $5 (50% off)! 1+1=2 a-b {x} #tag |pipe| a.b > c", want: `Price: $5 \(50% off\)\! 1\+1\=2 a\-b \{x\} \#tag \|pipe\| a\.b \> c`},
		{desc: "bold, italic, strikethrough, code", in: "**b** *i* _i_ ~~s~~ `c`", want: "*b* _i_ _i_ ~s~ `c`"},
		{desc: "a heading becomes bold", in: "## Plan", want: "*Plan*"},
		{desc: "code is never inside bold", in: "# Run `make`", want: "*Run *`make`"},
		{desc: "lists get bullets, numbers are escaped", in: "- a\n  - b\n3. c", want: "• a\n  • b\n3\\. c"},
		{desc: "each quote line starts with >", in: "> **Note:** x.\n> y", want: ">*Note:* x\\.\n>y"},
		{desc: "in a code block only ` and \\ are escaped", in: "```go\nfmt.Println(`hi`) // a\\b (c).\n```", want: "```go\nfmt.Println(\\`hi\\`) // a\\\\b (c).\n```"},
		{desc: "a backtick in a code span is escaped", in: "``a`b``", want: "`a\\`b`"},
		{desc: "in a link's URL only ) and \\ are escaped", in: "[docs](https://example.com/a_(b))", want: `[docs](https://example.com/a_(b\))`},
		{desc: "a link that is not a web link shows its target", in: "[x](file.md)", want: `x \(file\.md\)`},
		{desc: "a bare URL is escaped text Telegram links itself", in: "see https://example.com/a_b.", want: `see https://example\.com/a\_b\.`},
		{desc: "an underscore inside a word is literal", in: "snake_case and __dunder__", want: `snake\_case and *dunder*`},
		{desc: "touching italics merge rather than read as underline", in: "*a*_b_", want: "_ab_"},
		{desc: "bold italic", in: "***x***", want: "*_x_*"},
		{desc: "italic around bold", in: "*a **b** c*", want: "_a *b* c_"},
		{desc: "escaped markers stay literal", in: `\*not bold\*`, want: `\*not bold\*`},
		{desc: "unbalanced markers are literal", in: "**bold *it `code [link", want: "\\*\\*bold \\*it \\`code \\[link"},
		{desc: "a backslash is escaped", in: `a\b`, want: `a\\b`},
		{desc: "a rule", in: "a\n\n---\n\nb", want: "a\n\n———\n\nb"},
	})
}

func TestRenderTelegramHTML(t *testing.T) {
	testRender(t, chatfmt.TelegramHTML, []renderCase{
		{desc: "<, > and & are escaped", in: `<b>&"`, want: "&lt;b&gt;&amp;&quot;"},
		{desc: "bold, italic, strikethrough, code", in: "**b** *i* ~~s~~ `c`", want: "<b>b</b> <i>i</i> <s>s</s> <code>c</code>"},
		{desc: "a heading becomes bold", in: "## Plan", want: "<b>Plan</b>"},
		{desc: "code is never inside bold", in: "**a `b` c**", want: "<b>a </b><code>b</code><b> c</b>"},
		{desc: "a code block with a language", in: "```go\nif a < b {}\n```", want: `<pre><code class="language-go">if a &lt; b {}</code></pre>`},
		{desc: "a code block without one", in: "```\nx\n```", want: "<pre>x</pre>"},
		{desc: "an odd language is cleaned", in: "```{.py title=\"a\"}\nx\n```", want: `<pre><code class="language-.py">x</code></pre>`},
		{desc: "quote lines make one blockquote", in: "> a\n> *b*", want: "<blockquote>a\n<i>b</i></blockquote>"},
		{desc: "a link's URL is escaped", in: "[x](https://x.org/?a=1&b=2)", want: `<a href="https://x.org/?a=1&amp;b=2">x</a>`},
		{desc: "italic around a link", in: "*it [link `c`](https://x.org) it*", want: `<i>it <a href="https://x.org">link c</a> it</i>`},
		{desc: "lists get bullets", in: "- a\n1. b", want: "• a\n1. b"},
		{desc: "unbalanced markers are literal", in: "**a <b", want: "**a &lt;b"},
	})
}

func TestRenderSlack(t *testing.T) {
	testRender(t, chatfmt.SlackMrkdwn, []renderCase{
		{desc: "bold, italic, strikethrough, code", in: "**b** *i* ~~s~~ `c`", want: "*b* _i_ ~s~ `c`"},
		{desc: "a heading becomes bold", in: "# Plan", want: "*Plan*"},
		{desc: "&, < and > are escaped", in: "a < b && c > d", want: "a &lt; b &amp;&amp; c &gt; d"},
		{desc: "mentions written by the model stay text", in: "<!channel> <@U123>", want: "&lt;!channel&gt; &lt;@U123&gt;"},
		{desc: "links", in: "[docs](https://x.org/a?b=1&c=2)", want: "<https://x.org/a?b=1&amp;c=2|docs>"},
		{desc: "a | in a URL is encoded", in: "[x](https://x.org/a|b)", want: "<https://x.org/a%7Cb|x>"},
		{desc: "a bare URL", in: "see https://x.org.", want: "see <https://x.org>."},
		{desc: "emphasis inside a word is set off", in: "un**believ**able", want: "un\u200b*believ*\u200bable"},
		{desc: "escaped markers cannot become emphasis", in: `\*not bold\*`, want: "*\u200bnot bold\u200b*"},
		{desc: "an underscore inside a word is left alone", in: "snake_case_name", want: "snake_case_name"},
		{desc: "a literal backtick becomes a look-alike", in: "a ` b", want: "a ˋ b"},
		{desc: "a code block loses its language, keeps its escapes", in: "```py\nif a < b:\n```", want: "```\nif a &lt; b:\n```"},
		{desc: "a fence inside code cannot end the block", in: "```\nx = \"```\"\n```", want: "```\nx = \"``\u200b`\"\n```"},
		{desc: "lists and quotes", in: "- a\n\n> q", want: "• a\n\n> q"},
		{desc: "unbalanced markers are literal", in: "**a", want: "*\u200b*\u200ba"},
	})
}

func TestRenderDiscord(t *testing.T) {
	testRender(t, chatfmt.DiscordMarkdown, []renderCase{
		{desc: "bold is always **, since __ is underline", in: "__bold__ *it*", want: "**bold** _it_"},
		{desc: "headings to three levels", in: "### Three\n#### Four", want: "### Three\n**Four**"},
		{desc: "mass mentions are disarmed", in: "@everyone and @here", want: "@\u200beveryone and @\u200bhere"},
		{desc: "role mentions are disarmed", in: "<@&123> <@456>", want: "<@\u200b&123> <@456>"},
		{desc: "literal markers are escaped", in: "snake_case a|b ~c", want: `snake\_case a\|b \~c`},
		{desc: "a fence inside code cannot end the block", in: "```js\nconst a = \"```\";\n```", want: "```js\nconst a = \"``\u200b`\";\n```"},
		{desc: "a code span holding a backtick", in: "``a`b``", want: "`` a`b ``"},
		{desc: "a link's parentheses are encoded", in: "[x](https://x.org/a_(b))", want: "[x](https://x.org/a_%28b%29)"},
		{desc: "a bare URL is left as it is", in: "https://x.org/a_b_c", want: "https://x.org/a_b_c"},
		{desc: "an upper-case scheme is text, which Discord does not link", in: "HTTP://x.org/a__b__", want: `HTTP://x.org/a\_\_b\_\_`},
		{desc: "italic inside a word uses *", in: "un*believ*able", want: "un*believ*able"},
		{desc: "lists keep their markers", in: "- a\n* b\n2. c", want: "- a\n- b\n2. c"},
		{desc: "unbalanced markers are literal", in: "**a `b", want: "\\*\\*a \\`b"},
	})
}

func TestPlain(t *testing.T) {
	tests := []renderCase{
		{desc: "markup is stripped", in: "# T\n\n**b** *i* ~~s~~ `c`", want: "T\n\nb i s c"},
		{desc: "links keep their target", in: "[docs](https://x.org) and [same](same)", want: "docs (https://x.org) and same"},
		{desc: "lists and quotes keep their shape", in: "- a\n1. b\n> q", want: "• a\n1. b\n> q"},
		{desc: "code blocks keep their code", in: "```go\nx := 1\n```", want: "x := 1"},
		{desc: "unbalanced markers are kept", in: "**a _b", want: "**a _b"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, chatfmt.Plain(tt.in)); diff != "" {
				t.Errorf("Plain(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// unbalanced are inputs whose markers close nothing or overlap.
var unbalanced = []string{
	"*", "**", "***", "_", "__", "~~", "`", "``", "```", "[", "]", "[a](", "[a]", "](x)", "![", "<", "&", "\\",
	"**a", "a**", "*a", "a*", "_a", "a_", "~~a", "`a", "a`", "***a**", "**a*", "*a **b* c**",
	"**a `b** c`", "[a **b](https://x.org) c**", "> **a\n> b**", "# **a", "- `a", "```go\ncode",
	"_a *b_ c*", "**a\n\nb**", "***", "- - -", "`` ` ``", "<https://x.org", "\\`a`",
}

func TestRenderUnbalanced(t *testing.T) {
	for _, d := range []chatfmt.Dialect{chatfmt.TelegramMarkdownV2, chatfmt.TelegramHTML, chatfmt.SlackMrkdwn, chatfmt.DiscordMarkdown} {
		t.Run(d.String(), func(t *testing.T) {
			for _, in := range unbalanced {
				if out := chatfmt.Render(in, d); check(d, out) != nil {
					t.Errorf("Render(%q) = %q: %v", in, out, check(d, out))
				}
			}
		})
	}
}

func TestRenderParts(t *testing.T) {
	// Escapes make Telegram's renderings longer than the source, markers
	// make Slack's shorter: every part must fit once rendered.
	text := strings.Repeat("a.b-c & dog<e> (f) **g** `h` ", 400)
	for _, d := range []chatfmt.Dialect{chatfmt.TelegramMarkdownV2, chatfmt.TelegramHTML, chatfmt.SlackMrkdwn, chatfmt.DiscordMarkdown, chatfmt.PlainText} {
		for _, limit := range []int{0, 10, 500} {
			want := max(limit, chatfmt.MinLimit)
			if limit == 0 {
				want = d.Limit()
			}
			parts := chatfmt.RenderParts(text, d, limit)
			dogs := 0
			for i, p := range parts {
				if n := d.Measure().Len(p); n > want {
					t.Errorf("%s, limit %d: part %d is %d long", d, limit, i, n)
				}
				if err := check(d, p); err != nil {
					t.Errorf("%s, limit %d: part %d: %v", d, limit, i, err)
				}
				dogs += strings.Count(p, "dog")
			}
			if dogs != 400 {
				t.Errorf("%s, limit %d: %d of 400 words arrived", d, limit, dogs)
			}
		}
	}
}

func TestRenderPartsCodeBlock(t *testing.T) {
	text := "```go\n" + strings.Repeat("x := `a` + \"b\"\n", 300) + "```"
	tests := []struct {
		desc       string
		d          chatfmt.Dialect
		open, shut string
	}{
		{desc: "MarkdownV2", d: chatfmt.TelegramMarkdownV2, open: "```go\n", shut: "\n```"},
		{desc: "HTML", d: chatfmt.TelegramHTML, open: `<pre><code class="language-go">`, shut: "</code></pre>"},
		{desc: "Slack", d: chatfmt.SlackMrkdwn, open: "```\n", shut: "\n```"},
		{desc: "Discord", d: chatfmt.DiscordMarkdown, open: "```go\n", shut: "\n```"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			parts := chatfmt.RenderParts(text, tt.d, 0)
			if len(parts) < 2 {
				t.Fatalf("%d parts", len(parts))
			}
			lines := 0
			for i, p := range parts {
				if !strings.HasPrefix(p, tt.open) || !strings.HasSuffix(p, tt.shut) {
					t.Errorf("part %d is not one whole code block: %.40q…%q", i, p, p[max(0, len(p)-20):])
				}
				lines += strings.Count(p, "x := ")
			}
			if lines != 300 {
				t.Errorf("%d of 300 lines arrived", lines)
			}
		})
	}
}

func TestRenderPartsMeasureOption(t *testing.T) {
	// Resending plain text to Telegram counts as Telegram does.
	text := strings.Repeat("😀 ", 200)
	for i, p := range chatfmt.RenderParts(text, chatfmt.PlainText, 100, chatfmt.UTF16) {
		if n := chatfmt.UTF16.Len(p); n > 100 {
			t.Errorf("part %d is %d UTF-16 units", i, n)
		}
	}
	if got := chatfmt.RenderParts(" \n ", chatfmt.TelegramMarkdownV2, 0); got != nil {
		t.Errorf("blank text has parts %q", got)
	}
}

func TestDialect(t *testing.T) {
	tests := []struct {
		d       chatfmt.Dialect
		name    string
		limit   int
		measure chatfmt.Measure
	}{
		{chatfmt.TelegramMarkdownV2, "telegram-markdownv2", 4096, chatfmt.UTF16},
		{chatfmt.TelegramHTML, "telegram-html", 4096, chatfmt.UTF16},
		{chatfmt.SlackMrkdwn, "slack-mrkdwn", 3900, chatfmt.Runes},
		{chatfmt.DiscordMarkdown, "discord-markdown", 2000, chatfmt.Runes},
		{chatfmt.PlainText, "plain", 2000, chatfmt.Runes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []any{tt.d.String(), tt.d.Limit(), tt.d.Measure()}
			if diff := cmp.Diff([]any{tt.name, tt.limit, tt.measure}, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderPartsPathological(t *testing.T) {
	// Inputs that make a careless parser or splitter quadratic; each must
	// still come out in valid parts under the limit, quickly.
	const n = 10000
	inputs := []string{
		strings.Repeat("x", n),
		strings.Repeat("- ", n/2),
		strings.Repeat("[](", n/3),
		"https://x.org/" + strings.Repeat(")", n),
		strings.Repeat("*a", n/2),
		strings.Repeat("_a ", n/3),
		strings.Repeat("` `` ``` ", n/9),
		strings.Repeat("<a:", n/3),
		`{"a":` + strings.Repeat(`{"b_c":[1,2,"x*y"],`, n/20) + "}",
		strings.Repeat("> a\n", n/4),
		strings.Repeat("```\n", n/4),
	}
	for i, in := range inputs {
		for _, d := range []chatfmt.Dialect{chatfmt.TelegramMarkdownV2, chatfmt.SlackMrkdwn, chatfmt.DiscordMarkdown} {
			for j, p := range chatfmt.RenderParts(in, d, 0) {
				if l := d.Measure().Len(p); l > d.Limit() {
					t.Errorf("input %d, %s: part %d is %d long", i, d, j, l)
				}
				if err := check(d, p); err != nil {
					t.Errorf("input %d, %s: part %d: %v", i, d, j, err)
				}
			}
		}
	}
}
