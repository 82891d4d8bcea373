package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestRedactingLogger(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, slog.LevelDebug, New([]string{"hunter2-secret", "abc", "tok-longer-hunter2-secret"}))
	log = log.With("dsn", "redis://:hunter2-secret@h")
	log.Info("saw hunter2-secret in a message",
		"err", errors.New("GET /bottok-longer-hunter2-secret/x failed"),
		slog.Group("req", "auth", "Bearer hunter2-secret"),
		"struct", struct{ Key string }{"hunter2-secret"},
		"n", 3, "word", "abc")
	out := buf.String()
	if strings.Contains(out, "hunter2") {
		t.Errorf("a secret was logged: %s", out)
	}
	for _, want := range []string{`"msg":"saw **** in a message"`, `"err":"GET /bot****/x failed"`, `"auth":"Bearer ****"`, `"n":3`, `"word":"abc"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s: %s", want, out)
		}
	}
}

// A secret is masked in the form JSON writes it too: a tool's result is
// JSON, and a key holding "&" or a quote is escaped there.
func TestSecretMaskedInsideJSON(t *testing.T) {
	secret := `pa&ss"word<1>`
	b, err := json.Marshal(map[string]string{"output": "key=" + secret})
	if err != nil {
		t.Fatal(err)
	}
	got := New([]string{secret}).String(string(b))
	if want := `{"output":"key=****"}`; got != want {
		t.Errorf("masked JSON = %s, want %s", got, want)
	}
	if got := New([]string{secret}).String("key=" + secret); got != "key=****" {
		t.Errorf("masked text = %s, want key=****", got)
	}
}

// Text shown as it is written never shows part of a secret: at every
// point the model may stop a piece, what is shown (the text less its
// Unsettled end, masked) is the start of
// the whole text masked.
func TestSettledNeverShowsPartOfASecret(t *testing.T) {
	// Secrets that end with what starts one: itself, another.
	r := New([]string{"sk-live-1234", "sk-live-1234-long", "tok\"en-99", "sk-abc123xyzs", "1234-other"})
	fulls := []string{
		"the key is sk-live-1234, keep it",
		"sk-live-1234-long and sk-live-1234 and sk-live-12 done",
		`{"token":"tok\"en-99"}`,
		"ask sk-  nothing here s",
		"the key is sk-abc123xyzs, ok",
		"key sk-live-1234-other and sk-live-1234",
	}
	for _, full := range fulls {
		whole := r.String(full)
		for k := 0; k <= len(full); k++ {
			text := full[:k]
			shown := r.String(text[:len(text)-r.Unsettled(text)])
			if !strings.HasPrefix(whole, shown) {
				t.Fatalf("after %q it shows %q, which is not the start of %q", full[:k], shown, whole)
			}
		}
		// Written in three pieces, each handed on as Deltas does: the
		// text so far less its unsettled end, masked apart, then the
		// rest at the end; together they are the whole text masked.
		for i := 0; i <= len(full); i++ {
			for j := i; j <= len(full); j++ {
				var got, held string
				for _, piece := range []string{full[:i], full[i:j], full[j:]} {
					text := held + piece
					n := r.Unsettled(text)
					got += r.String(text[:len(text)-n])
					held = text[len(text)-n:]
				}
				got += r.String(held)
				if got != whole {
					t.Fatalf("%q in pieces at %d and %d hands on %q, want %q", full, i, j, got, whole)
				}
			}
		}
	}
	if n := r.Unsettled("the key is sk-li"); n != len("sk-li") {
		t.Errorf("Unsettled = %d, want the %d bytes of the secret's start", n, len("sk-li"))
	}
	if n := r.Unsettled("the key is sk-live-1234"); n != len("sk-live-1234") {
		t.Errorf("Unsettled = %d after a secret that a longer one starts with, want it held whole", n)
	}
	if n := r.Unsettled("nothing secret here."); n != 0 {
		t.Errorf("Unsettled = %d, want 0", n)
	}
	var none *Redactor
	if n := none.Unsettled("sk-"); n != 0 {
		t.Errorf("the nil Redactor holds %d", n)
	}
}
