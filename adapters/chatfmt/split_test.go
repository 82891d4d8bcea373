package chatfmt_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/adapters/chatfmt"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		desc    string
		text    string
		limit   int
		measure chatfmt.Measure
		want    []string
	}{
		{desc: "empty text has no parts", text: "", limit: 10},
		{desc: "blank text has no parts", text: " \n\n\t \u00a0", limit: 10},
		{desc: "text under the limit is one part", text: "hello\n\nworld", limit: 100, want: []string{"hello\n\nworld"}},
		{desc: "no limit", text: "hello world", limit: 0, want: []string{"hello world"}},
		{
			desc:  "a paragraph break wins over a later line break",
			text:  "one two\n\nthree\nfour five six",
			limit: 20,
			want:  []string{"one two", "three\nfour five six"},
		},
		{
			desc:  "lines when a paragraph is too long",
			text:  "first line\nsecond line\nthird line",
			limit: 24,
			want:  []string{"first line\nsecond line", "third line"},
		},
		{
			desc:  "words when a line is too long",
			text:  "the quick brown fox jumps",
			limit: 10,
			want:  []string{"the quick", "brown fox", "jumps"},
		},
		{
			desc:  "whitespace at a cut is dropped, the next line's indentation kept",
			text:  "a\n\n\n  - item\n  - next",
			limit: 10,
			want:  []string{"a", "  - item", "  - next"},
		},
		{desc: "a word longer than the limit is cut", text: "abcdefghij", limit: 4, want: []string{"abcd", "efgh", "ij"}},
		{desc: "never inside a UTF-8 sequence", text: "ééééé", limit: 2, want: []string{"éé", "éé", "é"}},
		{desc: "UTF-16 counts an emoji twice", text: "😀😀😀", limit: 4, measure: chatfmt.UTF16, want: []string{"😀😀", "😀"}},
		{desc: "runes count an emoji once", text: "😀😀😀", limit: 4, want: []string{"😀😀😀"}},
		{desc: "never inside a surrogate pair", text: "a😀b", limit: 2, measure: chatfmt.UTF16, want: []string{"a", "😀", "b"}},
		{desc: "an emoji keeps its skin tone", text: "👍🏽👍🏽", limit: 3, want: []string{"👍🏽", "👍🏽"}},
		{desc: "a flag keeps both halves", text: "🇩🇪🇫🇷", limit: 3, want: []string{"🇩🇪", "🇫🇷"}},
		{desc: "a letter keeps its combining accent", text: "e\u0301e\u0301e\u0301", limit: 3, want: []string{"e\u0301", "e\u0301", "e\u0301"}},
		{desc: "never between a backslash and what it escapes", text: `ab\*cd`, limit: 3, want: []string{"ab", `\*c`, "d"}},
		{desc: "never inside an HTML entity", text: "a&amp;b", limit: 6, want: []string{"a&amp;", "b"}},
		{
			desc:  "a code block cut in two is closed and reopened with its language",
			text:  "```go\nline1\nline2\nline3\n```",
			limit: 21,
			want:  []string{"```go\nline1\nline2\n```", "```go\nline3\n```"},
		},
		{
			desc:  "the fences count toward the limit",
			text:  "```\naaaa\nbbbb\ncccc\n```",
			limit: 13,
			want:  []string{"```\naaaa\n```", "```\nbbbb\n```", "```\ncccc\n```"},
		},
		{
			desc:  "text around a block splits at the block's paragraph breaks",
			text:  "Intro:\n\n```sh\nmake\n```\n\nDone.",
			limit: 20,
			want:  []string{"Intro:", "```sh\nmake\n```", "Done."},
		},
		{desc: "an unclosed block is closed", text: "```py\nprint(1)", limit: 100, want: []string{"```py\nprint(1)\n```"}},
		{
			desc:  "a longer fence and its indentation are kept when reopened",
			text:  "  ````md\n  ```\n  x\n  ````",
			limit: 21,
			want:  []string{"  ````md\n  ```\n  ````", "  ````md\n  x\n  ````"},
		},
		{
			desc:  "a part does not start mid-line with what reads as a fence",
			text:  "aaaa ```bbbb",
			limit: 7,
			want:  []string{"aaaa ``", "`bbbb"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := chatfmt.Split(tt.text, tt.limit, tt.measure)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Split(%q, %d) mismatch (-want +got):\n%s", tt.text, tt.limit, diff)
			}
			if tt.limit > 0 {
				checkSplit(t, tt.text, tt.limit, tt.measure, got)
			}
		})
	}
}

func TestMeasure(t *testing.T) {
	tests := []struct {
		desc         string
		text         string
		runes, utf16 int
	}{
		{desc: "ASCII", text: "abc", runes: 3, utf16: 3},
		{desc: "accented letter", text: "é", runes: 1, utf16: 1},
		{desc: "CJK", text: "漢字", runes: 2, utf16: 2},
		{desc: "emoji outside the BMP", text: "😀", runes: 1, utf16: 2},
		{desc: "emoji with skin tone", text: "👍🏽", runes: 2, utf16: 4},
		{desc: "flag", text: "🇩🇪", runes: 2, utf16: 4},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := []int{chatfmt.Runes.Len(tt.text), chatfmt.UTF16.Len(tt.text)}
			if diff := cmp.Diff([]int{tt.runes, tt.utf16}, got); diff != "" {
				t.Errorf("[Runes, UTF16] lengths of %q (-want +got):\n%s", tt.text, diff)
			}
		})
	}
}

// longReply is a reply of about n characters as a model writes one:
// prose, lists, emoji and code blocks, one of them longer than a
// Telegram message.
func longReply(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "## Step %d 🚀\n\nThis step explains **why** the change is safe (see [the docs](https://example.com/docs_%d)). It's 2.5× faster!\n\n", i, i)
		b.WriteString("- first point with `inline_code()`\n- second point, *emphasised*\n\n")
		switch i % 3 {
		case 0:
			b.WriteString("```go\nfunc step() error {\n\tif err := run(); err != nil {\n\t\treturn fmt.Errorf(\"step: %w\", err)\n\t}\n\treturn nil\n}\n```\n\n")
		case 1:
			b.WriteString("```python\n")
			for j := 0; j < 120; j++ {
				fmt.Fprintf(&b, "print('line %d of a long script')  # a_comment\n", j)
			}
			b.WriteString("```\n\n")
		}
	}
	return b.String()
}

func TestSplitLongReply(t *testing.T) {
	text := longReply(10000)
	if len(text) < 10000 {
		t.Fatalf("reply is %d bytes", len(text))
	}
	parts := chatfmt.Split(text, chatfmt.TelegramLimit, chatfmt.UTF16)
	if len(parts) < 3 {
		t.Fatalf("%d parts of a %d-byte reply", len(parts), len(text))
	}
	checkSplit(t, text, chatfmt.TelegramLimit, chatfmt.UTF16, parts)
	for i, p := range parts {
		if err := fencesClosed(p); err != nil {
			t.Errorf("part %d: %v", i, err)
		}
		// A block cut in two reopens with its language.
		if strings.Contains(p, "print('line") && !strings.Contains(p, "```python\n") {
			t.Errorf("part %d holds python code outside a python block", i)
		}
	}
}

func TestRenderPartsLongReply(t *testing.T) {
	text := longReply(10000)
	for _, d := range []chatfmt.Dialect{chatfmt.TelegramMarkdownV2, chatfmt.TelegramHTML, chatfmt.SlackMrkdwn, chatfmt.DiscordMarkdown, chatfmt.PlainText} {
		t.Run(d.String(), func(t *testing.T) {
			parts := chatfmt.RenderParts(text, d, 0)
			if len(parts) < 3 {
				t.Fatalf("%d parts of a %d-byte reply", len(parts), len(text))
			}
			steps := 0
			for i, p := range parts {
				if n := d.Measure().Len(p); n > d.Limit() {
					t.Errorf("part %d is %d long, over %d", i, n, d.Limit())
				}
				if err := check(d, p); err != nil {
					t.Errorf("part %d: %v", i, err)
				}
				steps += strings.Count(p, "Step ")
			}
			// Every step heading arrives, once, in order.
			if want := strings.Count(text, "## Step "); steps != want {
				t.Errorf("%d step headings arrived, want %d", steps, want)
			}
			joined := strings.Join(parts, "\n")
			last := -1
			for i := 0; ; i++ {
				at := strings.Index(joined, fmt.Sprintf("Step %d ", i))
				if at < 0 {
					break
				}
				if at < last {
					t.Errorf("step %d arrives before step %d", i, i-1)
				}
				last = at
			}
		})
	}
}
