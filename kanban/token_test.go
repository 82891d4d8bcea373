package kanban_test

import (
	"testing"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
)

func TestTokens(t *testing.T) {
	ts := kanban.Tokens{Key: []byte("secret")}
	tok := ts.Mint("t_0000abcd", 7)
	if n, err := ts.ForCard(tok, "t_0000abcd"); err != nil || n != 7 {
		t.Fatalf("ForCard = %d, %v", n, err)
	}
	if _, err := ts.ForCard(tok, "t_0000ffff"); !errs.Is(err, errs.Invalid) {
		t.Errorf("a token used for another card: %v, want Invalid", err)
	}
	other := kanban.Tokens{Key: []byte("another")}
	if _, _, err := other.Check(tok); !errs.Is(err, errs.Invalid) {
		t.Errorf("a token another key signed: %v, want Invalid", err)
	}
	for _, bad := range []string{"", "hkt1.x", "hkt1.t_1.x.y", tok + "x", "Bearer " + tok} {
		if _, _, err := ts.Check(bad); !errs.Is(err, errs.Invalid) {
			t.Errorf("Check(%q) = %v, want Invalid", bad, err)
		}
	}
}
