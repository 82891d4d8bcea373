package gateway

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/discordfake"
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
	cfg.Model.Credentials = []config.Credential{{Key: "sk-pool-8888", Label: "team"}}
	cfg.Model.Fallbacks = []config.Fallback{{BaseURL: "https://fb.example", APIKey: "sk-fb-9999", Credentials: []config.Credential{{Key: "sk-fbpool-0000"}}}}

	got := SecretsOf(cfg)
	for _, want := range []string{
		"api-key-1111", "sk-model-2222", "q%2Fkey3333", "q/key3333", "p%40ss4444", "p@ss4444",
		"12345:tg5555", "tok6666", "frag7777", "sk-pool-8888", "sk-fb-9999", "sk-fbpool-0000",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("SecretsOf lacks %q; got %q", want, got)
		}
	}
	for _, notSecret := range []string{"default", "eu", "cache:6379", config.DefaultHTTPAddr, "team"} {
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

// maskingAdapter is an adapter whose ids carry a credential after "cred=".
type maskingAdapter struct{ *fakeAdapter }

func (maskingAdapter) Mask(s string) string {
	if before, _, ok := strings.Cut(s, "cred="); ok {
		return before + "cred=…"
	}
	return s
}

// The adapters are made after the logger: a logger handed out before
// UseMaskers masks with the adapters' masks from then on, and so do the
// failure reasons the delivery worker stores.
func TestRedactorUsesTheAdaptersMasks(t *testing.T) {
	var buf bytes.Buffer
	r := NewRedactor(nil)
	log := newLogger(&buf, slog.LevelInfo, r).With("part", "router")
	r.UseMaskers([]adapters.Adapter{&fakeAdapter{platform: "plain"}, maskingAdapter{&fakeAdapter{platform: "masking"}}})

	log.Info("command cred=live-1", "message_id", "x:cred=live-2", "err", errors.New("POST /hook/cred=live-3"),
		slog.Group("in", "reply_to", "cred=live-4"))
	if out := buf.String(); strings.Contains(out, "live-") || !strings.Contains(out, `"message_id":"x:cred=…"`) {
		t.Errorf("log = %s, want every credential masked and the ids kept", out)
	}
	if got := r.String("discord: 404: Post /cred=live-5"); got != "discord: 404: Post /cred=…" {
		t.Errorf("reason = %q, want its credential masked", got)
	}
}

// A Discord interaction's MessageID carries the token its answer is posted
// with; the router logs the id of every command, and the token stays out
// of the gateway's log while the answer still goes out as a follow-up.
func TestGatewayLogsNoInteractionToken(t *testing.T) {
	const channel, guild, user = "120000000000000001", "110000000000000001", "150000000000000001"
	fake := discordfake.New(t, discordfake.Options{})
	model := testkit.NewModelServer(t)
	cfg := testConfig(t, model)
	cfg.Platforms.Discord.Token = fake.Token()
	cfg.Platforms.Discord.APIURL = fake.URL()
	cfg.Platforms.AllowAllUsers = true
	h := startGateway(t, cfg, Options{})

	it := fake.SendInteraction(discordfake.InteractionEvent{ChannelID: channel, GuildID: guild, ChannelType: discordfake.ChannelText,
		User: discordfake.User{ID: user, Username: "ada"}, Name: "status"})
	fake.Wait("the answer as a follow-up", func() bool { return len(fake.Calls(discordfake.RouteFollowup)) > 0 })

	logs := h.logs.String()
	if !strings.Contains(logs, `"message_id":"ia:`+it.ID+":"+fake.AppID()+`:…"`) {
		t.Errorf("the command's masked id was not logged:\n%s", logs)
	}
	if strings.Contains(logs, it.Token) {
		t.Errorf("the interaction token was logged:\n%s", logs)
	}
	// The adapter was made from the config: its lines name it once.
	for _, line := range strings.Split(logs, "\n") {
		if strings.Count(line, `"platform":`) > 1 {
			t.Errorf("a line names the platform more than once: %s", line)
		}
	}
}
