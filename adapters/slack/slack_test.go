package slack

import (
	"context"
	"testing"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/config"
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
