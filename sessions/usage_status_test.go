package sessions_test

import (
	"testing"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/sessions"
)

func TestUsageStatus(t *testing.T) {
	pa, ca := sessions.UsageKeys("big-model")
	pb, cb := sessions.UsageKeys("small")
	meta := map[string]string{pa: "2000000", ca: "500000", pb: "10", cb: "4", "busy_input_mode": "queue"}
	prices := config.Model{Prices: map[string]config.Price{"big-model": {Input: 3, Output: 15}}}.Price
	want := "Tokens: big-model 2000000 in, 500000 out ($13.5000); small 10 in, 4 out. Cost: $13.5000 (model.prices)"
	if got := sessions.UsageStatus(meta, prices); got != want {
		t.Errorf("UsageStatus = %q\nwant %q", got, want)
	}
	if got := sessions.UsageStatus(map[string]string{"busy_input_mode": "queue"}, prices); got != "" {
		t.Errorf("UsageStatus with no usage = %q, want none", got)
	}
	if got := sessions.UsageStatus(map[string]string{pb: "7", cb: "1"}, config.Model{}.Price); got != "Tokens: small 7 in, 1 out" {
		t.Errorf("UsageStatus unpriced = %q", got)
	}
}
