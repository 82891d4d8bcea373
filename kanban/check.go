package kanban

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/heraldgw/herald/internal/errs"
)

// slugPattern is what a board's slug may be.
var slugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// CheckSlug refuses, with Invalid, a slug that is not lower-case letters,
// digits, '-' and '_' (at most 64, starting with a letter or digit).
func CheckSlug(op, slug string) error {
	if !slugPattern.MatchString(slug) {
		return errs.E(op, errs.Invalid, "board %q: a slug is lower-case letters, digits, - and _, at most 64", slug)
	}
	return nil
}

// MaxAttachmentName bounds an attachment's name, in bytes: what a file
// name may be on the common file systems.
const MaxAttachmentName = 255

// CheckAttachmentName refuses, with Invalid, a name that is not a plain
// file name: empty, "." or "..", longer than MaxAttachmentName, with a
// slash, a backslash or a control character, starting or ending with a
// space, or not UTF-8. The name is the file's, in its card's directory,
// so it may not reach out of it.
func CheckAttachmentName(op, name string) error {
	bad := func(why string) error {
		return errs.E(op, errs.Invalid, "attachment name %q: %s; give a plain file name (--name, or ?name=)", name, why)
	}
	switch {
	case name == "":
		return errs.E(op, errs.Invalid, "an attachment needs a name: a plain file name (--name, or ?name=)")
	case name == "." || name == "..":
		return bad("not a file's name")
	case len(name) > MaxAttachmentName:
		return bad(fmt.Sprintf("longer than %d bytes", MaxAttachmentName))
	case !utf8.ValidString(name):
		return bad("not UTF-8")
	case strings.ContainsAny(name, `/\`):
		return bad("a name, not a path, has no slash")
	case strings.TrimSpace(name) != name:
		return bad("it starts or ends with a space")
	case strings.ContainsFunc(name, unicode.IsControl):
		return bad("it has a control character")
	}
	return nil
}

// CheckChange refuses, with Invalid, a change no store may apply: a card
// without an id, a board, a title or a valid status, a negative version,
// a self-link, an event without a board or a kind, a comment or a run
// without its ids, an attachment without its card or with a bad name,
// two attachments of one name. Stores call it before they write
// anything.
func CheckChange(op string, c Change) error {
	seen := map[string]bool{}
	for _, w := range c.Cards {
		k := w.Card
		switch {
		case k.ID == "":
			return errs.E(op, errs.Invalid, "card without an id")
		case seen[k.ID]:
			return errs.E(op, errs.Invalid, "card %s written twice in one change", k.ID)
		case k.Board == "":
			return errs.E(op, errs.Invalid, "card %s without a board", k.ID)
		case k.Title == "":
			return errs.E(op, errs.Invalid, "card %s without a title", k.ID)
		case !k.Status.Valid():
			return errs.E(op, errs.Invalid, "card %s: unknown status %q", k.ID, k.Status)
		case w.From < 0:
			return errs.E(op, errs.Invalid, "card %s: version %d", k.ID, w.From)
		}
		seen[k.ID] = true
	}
	for _, l := range append(append([]Link(nil), c.Link...), c.Unlink...) {
		switch {
		case l.Parent == "" || l.Child == "":
			return errs.E(op, errs.Invalid, "a link needs a parent and a child")
		case l.Parent == l.Child:
			return errs.E(op, errs.Invalid, "card %s cannot be its own parent", l.Parent)
		}
	}
	for _, cm := range c.Comments {
		if cm.ID == "" || cm.Card == "" {
			return errs.E(op, errs.Invalid, "a comment needs an id and a card")
		}
	}
	attached := map[[2]string]bool{}
	for _, a := range c.Attachments {
		if a.Card == "" {
			return errs.E(op, errs.Invalid, "an attachment needs a card")
		}
		if err := CheckAttachmentName(op, a.Name); err != nil {
			return err
		}
		if attached[[2]string{a.Card, a.Name}] {
			return errs.E(op, errs.Invalid, "attachment %s of card %s twice in one change", a.Name, a.Card)
		}
		attached[[2]string{a.Card, a.Name}] = true
	}
	for _, r := range c.Runs {
		if r.ID == "" || r.Card == "" {
			return errs.E(op, errs.Invalid, "a run needs an id and a card")
		}
	}
	for _, e := range c.Events {
		if e.Board == "" || e.Kind == "" {
			return errs.E(op, errs.Invalid, "an event needs a board and a kind")
		}
	}
	return nil
}

// CheckSubscription refuses, with Invalid, a subscription without an id,
// a board or a target.
func CheckSubscription(op string, s Subscription) error {
	switch {
	case s.ID == "":
		return errs.E(op, errs.Invalid, "subscription without an id")
	case s.Board == "":
		return errs.E(op, errs.Invalid, "subscription %s without a board", s.ID)
	case s.Target == "":
		return errs.E(op, errs.Invalid, "subscription %s without a target", s.ID)
	}
	return nil
}

// SortCards orders cards as a board lists them and claims them: higher
// priority first, then older, then by id.
func SortCards(cards []Card) {
	slices.SortFunc(cards, func(a, b Card) int {
		if a.Priority != b.Priority {
			return cmp.Compare(b.Priority, a.Priority)
		}
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}
