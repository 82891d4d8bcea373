package gateway

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/internal/redact"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/internal/testkit/discordfake"
)

// maskingAdapter is an adapter whose ids carry a credential after "cred=".
type maskingAdapter struct{ *adaptertest.Adapter }

func (maskingAdapter) Mask(s string) string {
	if before, _, ok := strings.Cut(s, "cred="); ok {
		return before + "cred=…"
	}
	return s
}

// The adapters are made after the logger: a logger handed out before
// useMaskers masks with the adapters' masks from then on, and so do the
// failure reasons the delivery worker stores.
func TestRedactorUsesTheAdaptersMasks(t *testing.T) {
	var buf bytes.Buffer
	r := redact.New(nil)
	log := redact.NewLogger(&buf, slog.LevelInfo, r).With("part", "router")
	useMaskers(r, []adapters.Adapter{&adaptertest.Adapter{Name: "plain"}, maskingAdapter{&adaptertest.Adapter{Name: "masking"}}})

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
