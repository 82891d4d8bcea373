package telegram

import (
	"testing"
	"unicode/utf16"

	"github.com/heraldgw/herald/adapters/chatfmt"
)

func TestPlainText(t *testing.T) {
	tests := []struct{ desc, in, want string }{
		{"styles", "<b>bold</b> and <i>it</i> &amp; <s>gone</s>", "bold and it & gone"},
		{"link", `see <a href="https://e.com/?a=1&amp;b=2">the docs</a>`, "see the docs (https://e.com/?a=1&b=2)"},
		{"bare link", `<a href="https://e.com">https://e.com</a>`, "https://e.com"},
		{"code", `<pre><code class="language-go">if a &lt; b {}</code></pre>`, "if a < b {}"},
		{"broken tag", "a <b", "a <b"},
		{"quote", "<blockquote>said</blockquote>", "said"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := plainText(tc.in); got != tc.want {
				t.Errorf("plainText(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// A plain part is never longer than the HTML part it comes from, so it
// fits Telegram's limit as well.
func TestPlainTextFitsTheLimit(t *testing.T) {
	text := "**x** [l](https://example.com/a&b) `c<d` & "
	for range 8 {
		text += text
	}
	for i, part := range chatfmt.RenderParts(text, dialect, chatfmt.TelegramLimit) {
		plain := plainText(part)
		if n := len(utf16.Encode([]rune(plain))); n > chatfmt.TelegramLimit || n > len(utf16.Encode([]rune(part))) {
			t.Errorf("part %d: plain is %d units", i, n)
		}
	}
}
