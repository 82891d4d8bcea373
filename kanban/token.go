package kanban

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/heraldgw/herald/internal/errs"
)

// Tokens mints and checks the tokens a worker reports with over the
// HTTP API (HERALD_KANBAN_TOKEN): one names a card and a claim of it
// and is signed with Key, so it is good for that claim only — once the
// claim is released the service refuses what it names (LeaseLost), and
// it never reaches another card. Every instance that checks them needs
// the same Key.
type Tokens struct{ Key []byte }

const tokenPrefix = "hkt1."

// Mint returns the token of card's claim token.
func (t Tokens) Mint(card string, token int64) string {
	body := card + "." + strconv.FormatInt(token, 10)
	return tokenPrefix + body + "." + t.sign(body)
}

func (t Tokens) sign(body string) string {
	m := hmac.New(sha256.New, t.Key)
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Check returns the card and claim token s names. Errors: Invalid (not
// a token, or not one signed with Key).
func (t Tokens) Check(s string) (card string, token int64, err error) {
	const op = "kanban.Tokens.Check"
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 3 || len(t.Key) == 0 {
		return "", 0, errs.E(op, errs.Invalid, "not a kanban worker token")
	}
	body := parts[0] + "." + parts[1]
	if !hmac.Equal([]byte(parts[2]), []byte(t.sign(body))) {
		return "", 0, errs.E(op, errs.Invalid, "a kanban worker token this gateway did not sign")
	}
	n, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || n <= 0 {
		return "", 0, errs.E(op, errs.Invalid, "not a kanban worker token")
	}
	return parts[0], n, nil
}

// ForCard returns the claim token s gives for card. Errors: Invalid (s
// is not a token for card).
func (t Tokens) ForCard(s, card string) (int64, error) {
	c, n, err := t.Check(s)
	if err != nil {
		return 0, err
	}
	if c != card {
		return 0, errs.E("kanban.Tokens.ForCard", errs.Invalid, "this worker token is for card %s, not %s", c, card)
	}
	return n, nil
}
