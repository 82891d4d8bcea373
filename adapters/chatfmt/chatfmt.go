// Package chatfmt turns an agent's reply — markdown as language models
// write it — into what each chat platform accepts: rendered in the
// platform's dialect and split into messages under the platform's length
// limit. The Telegram, Slack and Discord adapters share it, so a reply
// looks alike everywhere and no adapter carries its own escaping rules.
//
// Everything here is total: any input, however unbalanced its markers,
// renders to text the platform parses without complaint, and a part that
// Split or RenderParts returns is valid on its own.
package chatfmt

import "unicode/utf8"

// The platforms' message length limits, each in the platform's Measure.
const (
	// TelegramLimit is sendMessage's limit in UTF-16 code units.
	TelegramLimit = 4096
	// DiscordLimit is a message's content limit in characters.
	DiscordLimit = 2000
	// SlackLimit is below chat.postMessage's 4,000 characters: Slack
	// truncates long text and renders it poorly well before that.
	SlackLimit = 3900
)

// MinLimit is the smallest limit RenderParts works with; smaller limits are
// raised to it. A single character can render to several (an escaped '&' is
// five), and a code block needs room for its fences; no platform comes near.
const MinLimit = 64

// Measure is how a platform counts the length of a message.
type Measure int

const (
	// Runes counts Unicode code points, as Discord and Slack do.
	Runes Measure = iota
	// UTF16 counts UTF-16 code units, as Telegram does: a character
	// outside the Basic Multilingual Plane (most emoji) counts twice.
	UTF16
)

// Len is the length of s in m.
func (m Measure) Len(s string) int {
	if m != UTF16 {
		return utf8.RuneCountInString(s)
	}
	n := 0
	for _, r := range s {
		n += m.runeLen(r)
	}
	return n
}

func (m Measure) runeLen(r rune) int {
	if m == UTF16 && r > 0xFFFF {
		return 2
	}
	return 1
}

func (m Measure) apply(o *options) { o.measure = m }

// Option adjusts Split and RenderParts. A Measure is an Option.
type Option interface{ apply(*options) }

type options struct {
	measure Measure
}

// Dialect is a platform's flavour of formatted text.
type Dialect int

const (
	// TelegramMarkdownV2 is Telegram's parse_mode "MarkdownV2".
	TelegramMarkdownV2 Dialect = iota + 1
	// TelegramHTML is Telegram's parse_mode "HTML".
	TelegramHTML
	// SlackMrkdwn is Slack's mrkdwn, as chat.postMessage's text takes it.
	SlackMrkdwn
	// DiscordMarkdown is Discord's message markdown.
	DiscordMarkdown
	// PlainText is the reply without markup, for resending a message a
	// platform refused to parse. An unknown Dialect renders as PlainText.
	PlainText
)

func (d Dialect) String() string {
	switch d {
	case TelegramMarkdownV2:
		return "telegram-markdownv2"
	case TelegramHTML:
		return "telegram-html"
	case SlackMrkdwn:
		return "slack-mrkdwn"
	case DiscordMarkdown:
		return "discord-markdown"
	}
	return "plain"
}

// Limit is the message length limit of d's platform; PlainText has none of
// its own and uses the smallest, Discord's.
func (d Dialect) Limit() int {
	switch d {
	case TelegramMarkdownV2, TelegramHTML:
		return TelegramLimit
	case SlackMrkdwn:
		return SlackLimit
	}
	return DiscordLimit
}

// Measure is how d's platform counts length.
func (d Dialect) Measure() Measure {
	switch d {
	case TelegramMarkdownV2, TelegramHTML:
		return UTF16
	}
	return Runes
}
