package redact

import (
	"bytes"
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
