package gateway

import (
	"testing"

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/sessions"
)

func TestUsageStatus(t *testing.T) {
	pa, ca := sessions.UsageKeys("big-model")
	pb, cb := sessions.UsageKeys("small")
	meta := map[string]string{pa: "2000000", ca: "500000", pb: "10", cb: "4", "busy_input_mode": "queue"}
	prices := map[string]config.Price{"big-model": {Input: 3, Output: 15}}
	want := "Tokens: big-model 2000000 in, 500000 out ($13.5000); small 10 in, 4 out. Cost: $13.5000 (model.prices)"
	if got := usageStatus(meta, prices); got != want {
		t.Errorf("usageStatus = %q\nwant %q", got, want)
	}
	if got := usageStatus(map[string]string{"busy_input_mode": "queue"}, prices); got != "" {
		t.Errorf("usageStatus with no usage = %q, want none", got)
	}
	if got := usageStatus(map[string]string{pb: "7", cb: "1"}, nil); got != "Tokens: small 7 in, 1 out" {
		t.Errorf("usageStatus unpriced = %q", got)
	}
}
