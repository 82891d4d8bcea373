package slack

import (
	"context"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

func TestNewRefusesABadConfig(t *testing.T) {
	tests := []struct {
		desc string
		opts Options
	}{
		{"no bot token", Options{Config: config.Slack{SigningSecret: "s"}}},
		{"neither an app token nor a signing secret", Options{Config: config.Slack{BotToken: "xoxb-x"}}},
		{"an unknown group scope", Options{Config: config.Slack{BotToken: "xoxb-x", AppToken: "xapp-x"}, GroupSessions: "per_thread"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if _, err := New(tc.opts); !errs.Is(err, errs.Invalid) {
				t.Errorf("New = %v; want Invalid", err)
			}
		})
	}
}

// TestAPIURLWithOrWithoutASlash: the SDK appends method names to the base
// as it is, so both spellings of SLACK_API_URL must reach the same place.
func TestAPIURLWithOrWithoutASlash(t *testing.T) {
	for _, suffix := range []string{"", "/"} {
		f := newFixture(t, false, func(o *Options) { o.Config.APIURL += suffix })
		if _, err := f.a.api.AuthTestContext(context.Background()); err != nil {
			t.Errorf("APIURL %q: auth.test: %v", f.fake.URL()+suffix, err)
		}
	}
}

func TestPlatformAndLease(t *testing.T) {
	f := newFixture(t, true)
	var a adapters.Adapter = f.a
	if a.Platform() != "slack" || f.a.Exclusive() != "" {
		t.Errorf("Platform %q, Exclusive %q; want slack and no lease", a.Platform(), f.a.Exclusive())
	}
}

func TestProgressIsForgottenAfterItsTTL(t *testing.T) {
	c := clock.NewFake(time.Unix(1_700_000_000, 0))
	var pm progressMap
	pm.init(c)
	pm.put("old", &progress{parts: []string{"a", "b"}, sent: 1})
	c.Advance(progressTTL + time.Minute)
	pm.put("new", &progress{parts: []string{"a", "b"}, sent: 1})
	if p := pm.take("old"); p != nil {
		t.Errorf("the progress of an old message is still kept: %+v", p)
	}
	if p := pm.take("new"); p == nil || p.sent != 1 {
		t.Errorf("the progress of a recent message is lost: %+v", p)
	}
	pm.put("unsent", &progress{parts: []string{"a"}})
	if p := pm.take("unsent"); p != nil {
		t.Errorf("a message with nothing sent was kept: %+v", p)
	}
}
