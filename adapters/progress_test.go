package adapters_test

import (
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
)

func TestSendProgress(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := adapters.NewSendProgress[int](clk)
	if _, ok := p.Take("m1"); ok {
		t.Fatal("Take of an unknown message found progress")
	}
	p.Keep("m1", 2)
	p.Keep("", 5)
	if v, ok := p.Take("m1"); !ok || v != 2 {
		t.Fatalf("Take = %d, %v; want 2, true", v, ok)
	}
	if _, ok := p.Take("m1"); ok {
		t.Error("a second Take found progress: Take must remove it")
	}
	if _, ok := p.Take(""); ok {
		t.Error("an empty id kept progress")
	}
	p.Keep("m2", 1)
	clk.Advance(adapters.ProgressTTL + time.Second)
	if _, ok := p.Take("m2"); ok {
		t.Error("progress older than ProgressTTL was still there")
	}
}
