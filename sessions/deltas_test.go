package sessions

import (
	"slices"
	"strings"
	"testing"

	"github.com/heraldgw/herald/internal/redact"
)

func TestDeltas(t *testing.T) {
	var d Deltas
	if d.Listening("c", "m1") {
		t.Fatal("listening with no subscriber")
	}
	d.Publish("c", "m1", "dropped") // no one waits: nothing kept
	s := d.Subscribe("c", "m1")
	other := d.Subscribe("c", "m2")
	if !d.Listening("c", "m1") || d.Listening("c", "m3") {
		t.Fatal("Listening does not follow the subscriptions")
	}
	d.Publish("c", "m1", "a")
	d.Publish("c", "m1", "b")
	select {
	case <-s.Ready():
	default:
		t.Fatal("Ready not signalled")
	}
	if got := s.Take(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Take = %q, want a, b in order", got)
	}
	if got := other.Take(); got != nil {
		t.Errorf("another message's subscriber took %q", got)
	}
	s.Close()
	if d.Listening("c", "m1") {
		t.Error("still listening after Close")
	}
	other.Close()
	if len(d.subs) != 0 {
		t.Errorf("subscriptions left: %v", d.subs)
	}
}

// A waiter gets each piece with herald's secrets masked.
func TestDeltasRedact(t *testing.T) {
	d := Deltas{Redact: func(s string) string { return strings.ReplaceAll(s, "sk-secret", "****") }}
	s := d.Subscribe("c", "m1")
	defer s.Close()
	d.Publish("c", "m1", "the key is sk-secret")
	if got := s.Take(); !slices.Equal(got, []string{"the key is ****"}) {
		t.Errorf("Take = %q, want the piece masked", got)
	}
}

// What may start a secret is held until the turn's next piece: a secret
// written across pieces is handed on masked whole. At the turn's end the
// end held is handed on when the turn made its reply, else dropped.
func TestDeltasHoldWhatMayStartASecret(t *testing.T) {
	const secret = "sk-live-model-key-1111"
	r := redact.New([]string{secret})
	for _, replied := range []bool{true, false} {
		d := &Deltas{Redact: r.String, Hold: r.Unsettled}
		sub := d.Subscribe("c", "m1")
		for _, p := range []string{"the key is sk-li", "ve-model-key-1111, not sk-"} {
			d.Publish("c", "m1", p)
		}
		d.End("c", "m1", replied)
		got := strings.Join(sub.Take(), "")
		want := "the key is " + redact.Mask + ", not "
		if replied {
			want += "sk-"
		}
		if got != want {
			t.Errorf("replied %v: handed on %q, want %q", replied, got, want)
		}
		sub.Close()
		if len(d.held) != 0 {
			t.Errorf("replied %v: %d ends still held after the end", replied, len(d.held))
		}
	}
}
