package sessions

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestTurnTimersKeepTheEarliestFirst adds and removes deadlines far in the
// future (none falls due) and checks the heap's order and each turn's
// record of its place after every change.
func TestTurnTimersKeepTheEarliestFirst(t *testing.T) {
	var tt turnTimers
	rng := rand.New(rand.NewPCG(1, 2))
	turns := make([]*activeTurn, 200)
	for i := range turns {
		turns[i] = &activeTurn{}
		tt.add(turns[i], time.Hour+time.Duration(rng.IntN(1000))*time.Second)
		checkTurnTimers(t, &tt)
	}
	for _, i := range rng.Perm(len(turns)) {
		if !tt.remove(turns[i]) {
			t.Fatalf("turn %d's deadline was not queued", i)
		}
		if tt.remove(turns[i]) {
			t.Fatalf("turn %d's deadline removed twice", i)
		}
		checkTurnTimers(t, &tt)
	}
	for _, at := range turns {
		tt.remove(at)
	}
	checkTurnTimers(t, &tt)
	if len(tt.heap) != 0 || tt.armed {
		t.Errorf("%d deadlines left, armed %v; want none and the timer stopped", len(tt.heap), tt.armed)
	}
}

func checkTurnTimers(t *testing.T, tt *turnTimers) {
	t.Helper()
	for i, d := range tt.heap {
		if got := int(d.at.due) - 1; got != i {
			t.Fatalf("deadline at %d records its place as %d", i, got)
		}
		if p := (i - 1) / 2; i > 0 && tt.heap[p].when > d.when {
			t.Fatalf("deadline at %d is earlier than its parent at %d", i, p)
		}
	}
	if len(tt.heap) > 0 && (!tt.armed || tt.armedAt > tt.heap[0].when) {
		t.Fatalf("the timer is set for %v (armed %v), the earliest deadline is %v", tt.armedAt, tt.armed, tt.heap[0].when)
	}
}

func TestSteerQueueKeepsOrderAndItsBound(t *testing.T) {
	var q SteerQueue
	for _, s := range []string{"a", "b", "c"} {
		if !q.Offer(s, 3) {
			t.Fatalf("%q refused below the bound", s)
		}
	}
	if q.Offer("d", 3) {
		t.Error("a fourth text taken past a bound of 3")
	}
	if s, ok := q.Take(); !ok || s != "a" {
		t.Errorf("took %q, %v; want the oldest, a", s, ok)
	}
	if !q.Offer("d", 3) {
		t.Error("d refused once a text was taken")
	}
	left := q.Close()
	if len(left) != 3 || left[0] != "b" || left[1] != "c" || left[2] != "d" {
		t.Errorf("left %q, want [b c d]", left)
	}
	if q.Offer("e", 3) || q.Len() != 0 {
		t.Error("a closed queue took a text")
	}
	var none *SteerQueue
	if _, ok := none.Take(); ok || none.Len() != 0 {
		t.Error("a nil queue gave a text")
	}
}
