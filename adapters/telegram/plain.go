package telegram

import (
	"html"
	"strings"
)

// plainText is what a rendered HTML part shows, without its markup: the
// text resent when Telegram refuses the part's formatting. It is read
// back from the part itself rather than rendered again from the reply
// with chatfmt.PlainText, because chatfmt cuts a reply into parts by
// each dialect's rendered length: plain parts end at other places than
// HTML ones, and one could not stand in for the other without doubling
// or dropping text. Links keep their address in parentheses, as
// chatfmt.Plain writes them. Removing tags and entities only shortens
// the text, so the plain part is within Telegram's limit too.
func plainText(part string) string {
	var b strings.Builder
	type link struct {
		href  string
		start int // where the link's text starts in b
	}
	var links []link
	for i := 0; i < len(part); {
		if part[i] != '<' {
			end := strings.IndexByte(part[i:], '<')
			if end < 0 {
				end = len(part) - i
			}
			b.WriteString(html.UnescapeString(part[i : i+end]))
			i += end
			continue
		}
		end := strings.IndexByte(part[i:], '>')
		if end < 0 {
			// Not a tag after all: the rest is text.
			b.WriteString(html.UnescapeString(part[i:]))
			break
		}
		tag := part[i+1 : i+end]
		i += end + 1
		switch {
		case strings.HasPrefix(tag, "a "):
			links = append(links, link{href: attr(tag, "href"), start: b.Len()})
		case tag == "/a" && len(links) > 0:
			l := links[len(links)-1]
			links = links[:len(links)-1]
			if l.href != "" && b.String()[l.start:] != l.href {
				b.WriteString(" (" + l.href + ")")
			}
		}
	}
	return b.String()
}

// attr reads the value of attribute name="…" in a tag's text.
func attr(tag, name string) string {
	_, rest, ok := strings.Cut(tag, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return html.UnescapeString(v)
}
