package gateway

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/heraldgw/herald/config"
)

func TestSecretsOf(t *testing.T) {
	cfg := config.Default()
	cfg.HTTP.APIKey = "api-key-1111"
	cfg.Model.APIKey = "sk-model-2222"
	cfg.Model.BaseURL = "https://models.example/v1?api_key=q%2Fkey3333&region=eu"
	cfg.Store.RedisURL = "redis://default:p%40ss4444@cache:6379/0"
	cfg.Platforms.Telegram.Token = "12345:tg5555"
	cfg.Platforms.Slack.APIURL = "https://tok6666@slack.example/api"
	cfg.Platforms.Discord.APIURL = "https://discord.example/api#frag7777"

	got := SecretsOf(cfg)
	for _, want := range []string{
		"api-key-1111", "sk-model-2222", "q%2Fkey3333", "q/key3333", "p%40ss4444", "p@ss4444",
		"12345:tg5555", "tok6666", "frag7777",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("SecretsOf lacks %q; got %q", want, got)
		}
	}
	for _, notSecret := range []string{"default", "eu", "cache:6379", config.DefaultHTTPAddr} {
		if slices.Contains(got, notSecret) {
			t.Errorf("SecretsOf has %q, which is not a secret", notSecret)
		}
	}
}

func TestRedactingLogger(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, slog.LevelDebug, []string{"hunter2-secret", "abc", "tok-longer-hunter2-secret"})
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
