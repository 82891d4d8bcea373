package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/websession"
	"github.com/heraldgw/herald/outbox"
)

// fakeOutbox is an api.Outbox of function fields.
type fakeOutbox struct {
	pending, dead func(ctx context.Context, limit int) ([]outbox.Message, error)
	requeue       func(ctx context.Context, id string) error
}

var _ api.Outbox = (*fakeOutbox)(nil)

func (o *fakeOutbox) Pending(ctx context.Context, limit int) ([]outbox.Message, error) {
	return o.pending(ctx, limit)
}

func (o *fakeOutbox) DeadLetters(ctx context.Context, limit int) ([]outbox.Message, error) {
	return o.dead(ctx, limit)
}

func (o *fakeOutbox) Requeue(ctx context.Context, id string) error { return o.requeue(ctx, id) }

// outboxFixture serves the outbox routes over one dead letter, "d1",
// which a retry makes pending.
func outboxFixture(t *testing.T) (*fixture, *[]string) {
	t.Helper()
	var requeued []string
	dead := outbox.Message{ID: "d1", Target: outbox.Target{Platform: "telegram", Chat: "42"}, Text: "the report", Attempts: 3, LastError: "chat not found"}
	ob := &fakeOutbox{
		pending: func(context.Context, int) ([]outbox.Message, error) { return nil, nil },
		dead: func(_ context.Context, limit int) ([]outbox.Message, error) {
			if limit != 100 {
				t.Errorf("limit %d, want the default 100", limit)
			}
			return []outbox.Message{dead}, nil
		},
		requeue: func(_ context.Context, id string) error {
			if id != "d1" {
				return errs.E("fake.Requeue", errs.NotFound, "no dead letter %q", id)
			}
			requeued = append(requeued, id)
			return nil
		},
	}
	f := newFixture(t, func(o *api.Options) {
		o.APIKey = testKey
		o.Routes = []api.Routes{api.OutboxRoutes(ob)}
	})
	return f, &requeued
}

func TestOutboxRoutes(t *testing.T) {
	f, requeued := outboxFixture(t)
	auth := []string{"Authorization", "Bearer " + testKey}

	code, body := f.do(t, "GET", "/api/v1/outbox/dead", "", auth...)
	var res struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(body, &res); code != http.StatusOK || err != nil || len(res.Messages) != 1 {
		t.Fatalf("GET dead: %d %s", code, body)
	}
	if m := res.Messages[0]; m["id"] != "d1" || m["target"] != "telegram:42" || m["last_error"] != "chat not found" || m["attempts"] != 3.0 {
		t.Errorf("dead letter %v", m)
	}
	if code, body := f.do(t, "GET", "/api/v1/outbox/pending", "", auth...); code != http.StatusOK || strings.TrimSpace(string(body)) != `{"messages":[]}` {
		t.Errorf("GET pending: %d %s", code, body)
	}
	if code, body := f.do(t, "GET", "/api/v1/outbox/pending?limit=0", "", auth...); code != http.StatusBadRequest {
		t.Errorf("a limit of 0: %d %s", code, body)
	}
	if code, body := f.do(t, "POST", "/api/v1/outbox/dead/nope/retry", "", auth...); code != http.StatusNotFound || !strings.Contains(string(body), `no dead letter \"nope\"`) {
		t.Errorf("retry of an unknown id: %d %s", code, body)
	}
	if code, body := f.do(t, "POST", "/api/v1/outbox/dead/d1/retry", "", auth...); code != http.StatusOK {
		t.Errorf("retry: %d %s", code, body)
	}
	if len(*requeued) != 1 {
		t.Errorf("requeued %v, want d1 once", *requeued)
	}
}

// The dashboard's session cookie stands in for the key: for a read as it
// is, for a change with the CSRF header equal to its cookie; one that
// expired, was made with another key or was altered is refused.
func TestSessionCookie(t *testing.T) {
	f, requeued := outboxFixture(t)
	valid := websession.New(testKey, epoch.Add(time.Hour))
	exp, mac, _ := strings.Cut(valid, ".")
	cookies := func(session, csrf string) string {
		c := websession.Cookie + "=" + session
		if csrf != "" {
			c += "; " + websession.CSRFCookie + "=" + csrf
		}
		return c
	}
	for _, tc := range []struct {
		desc, method, path string
		header             []string
		want               int
	}{
		{"no cookie", "GET", "/api/v1/outbox/dead", nil, http.StatusUnauthorized},
		{"a read", "GET", "/api/v1/outbox/dead", []string{"Cookie", cookies(valid, "")}, http.StatusOK},
		{"a change without the CSRF header", "POST", "/api/v1/outbox/dead/d1/retry", []string{"Cookie", cookies(valid, "tok")}, http.StatusUnauthorized},
		{"a change with another CSRF value", "POST", "/api/v1/outbox/dead/d1/retry", []string{"Cookie", cookies(valid, "tok"), websession.CSRFHeader, "other"}, http.StatusUnauthorized},
		{"a change with an empty CSRF pair", "POST", "/api/v1/outbox/dead/d1/retry", []string{"Cookie", cookies(valid, ""), websession.CSRFHeader, ""}, http.StatusUnauthorized},
		{"expired", "GET", "/api/v1/outbox/dead", []string{"Cookie", cookies(websession.New(testKey, epoch), "")}, http.StatusUnauthorized},
		{"another key", "GET", "/api/v1/outbox/dead", []string{"Cookie", cookies(websession.New("another-key", epoch.Add(time.Hour)), "")}, http.StatusUnauthorized},
		{"a later expiry", "GET", "/api/v1/outbox/dead", []string{"Cookie", cookies("9"+exp+"."+mac, "")}, http.StatusUnauthorized},
		{"no MAC", "GET", "/api/v1/outbox/dead", []string{"Cookie", cookies(exp, "")}, http.StatusUnauthorized},
		{"a change with the CSRF header", "POST", "/api/v1/outbox/dead/d1/retry", []string{"Cookie", cookies(valid, "tok"), websession.CSRFHeader, "tok"}, http.StatusOK},
	} {
		if code, body := f.do(t, tc.method, tc.path, "", tc.header...); code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.desc, code, body, tc.want)
		}
	}
	if len(*requeued) != 1 {
		t.Errorf("requeued %v, want d1 once: by the request with the CSRF header", *requeued)
	}
}
