package telegram_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit/telegramfake"
	"github.com/heraldgw/herald/sessions"
)

const secret = "s3cret_-X"

// webhook runs a webhook-mode adapter mounted on a test HTTP server and
// waits until it registered its webhook with the fake.
func webhook(t *testing.T, in *inbox) (*telegramfake.Server, string) {
	t.Helper()
	fake := telegramfake.New(t, "")
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	opts := options(fake)
	opts.Config.Mode = config.TelegramWebhook
	opts.Config.WebhookURL = srv.URL + "/telegram/webhook"
	opts.Config.WebhookSecret = secret
	a := newAdapter(t, opts)
	a.Mount(mux, in)
	run(t, a, in)
	fake.WaitCalls("setWebhook", 1)
	return fake, opts.Config.WebhookURL
}

func post(t *testing.T, url, header string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if header != "" {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestWebhookNeedsTheSecret(t *testing.T) {
	in := newInbox()
	fake, url := webhook(t, in)
	if got := fake.Webhook(); got.URL != url || got.Secret != secret {
		t.Fatalf("webhook set %+v, want %s with the secret", got, url)
	}
	u := fake.Build(telegramfake.Incoming{From: 42, Text: "hi"})
	for _, header := range []string{"", "wrong", secret + "x"} {
		if status := post(t, url, header, u.Raw); status != http.StatusUnauthorized {
			t.Errorf("secret %q: status %d, want 401", header, status)
		}
	}
	if got := in.All(); len(got) != 0 {
		t.Fatalf("delivered %+v without the secret", got)
	}
	status, err := fake.PushWebhook(context.Background(), u)
	if err != nil || status != http.StatusOK {
		t.Fatalf("push: %d %v, want 200", status, err)
	}
	if got := in.All(); len(got) != 1 || got[0].Text != "hi" || got[0].Conv != "telegram:42" {
		t.Errorf("delivered %+v, want the message", got)
	}
	if len(fake.Calls("getUpdates")) != 0 {
		t.Error("a webhook adapter called getUpdates")
	}
}

func TestWebhookAnswersFailureUntilDelivered(t *testing.T) {
	in := newInbox()
	in.fail = func(n int, _ sessions.Inbound) error {
		if n == 1 {
			return errs.E("store.Append", errs.Unavailable, "down")
		}
		return nil
	}
	fake, _ := webhook(t, in)
	u := fake.Build(telegramfake.Incoming{From: 42, Text: "hi"})
	if status, _ := fake.PushWebhook(context.Background(), u); status == http.StatusOK {
		t.Fatal("a failed delivery was answered 200: Telegram would not send it again")
	}
	if status, _ := fake.PushWebhook(context.Background(), u); status != http.StatusOK {
		t.Fatalf("retry answered %d", status)
	}
	if got := in.All(); len(got) != 1 || got[0].MessageID != "42:"+strconv.Itoa(u.MessageID) {
		t.Errorf("delivered %+v", got)
	}
}

func TestWebhookSkipsWhatIsNotForHerald(t *testing.T) {
	in := newInbox()
	fake, url := webhook(t, in)
	group := fake.Build(telegramfake.Incoming{Chat: -100, From: 42, Text: "not for the bot"})
	for _, body := range [][]byte{group.Raw, []byte(`{"update_id": 5, "edited_message": {}}`)} {
		if status := post(t, url, secret, body); status != http.StatusOK {
			t.Errorf("status %d, want 200 for an update that is not for herald", status)
		}
	}
	if got := in.All(); len(got) != 0 {
		t.Errorf("delivered %+v", got)
	}
}
