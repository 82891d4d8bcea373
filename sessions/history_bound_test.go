package sessions

import (
	"testing"

	"github.com/heraldgw/herald/chat"
)

func TestHistoryDrop(t *testing.T) {
	msg := func(role string) chat.Message { return chat.Message{Role: role} }
	// user, assistant calling two tools, their results, assistant, user, assistant
	history := []chat.Message{msg("user"), msg("assistant"), msg("tool"), msg("tool"), msg("assistant"), msg("user"), msg("assistant")}
	for _, tc := range []struct {
		max, added, want int
	}{
		{max: 0, added: 2, want: 0},   // unbounded
		{max: 9, added: 2, want: 0},   // fits exactly
		{max: 20, added: 2, want: 0},  // far under
		{max: 8, added: 2, want: 1},   // one over: the first user message goes
		{max: 7, added: 2, want: 4},   // two over: the call goes with its results
		{max: 5, added: 2, want: 4},   // the results are never left without their call
		{max: 4, added: 2, want: 5},   // five over
		{max: 2, added: 2, want: 7},   // all of the stored history
		{max: 1, added: 3, want: 7},   // the turn's own messages are kept past the bound
		{max: 12, added: 20, want: 7}, // a long turn: everything before it
	} {
		w := &TurnWorker{historyMax: tc.max}
		if got := w.historyDrop(w.historyStarts(history), tc.added); got != tc.want {
			t.Errorf("max %d, %d added: drop %d, want %d", tc.max, tc.added, got, tc.want)
		}
	}
	if w := (&TurnWorker{historyMax: 100}); w.historyStarts(history) != nil {
		t.Error("a history under half the bound was looked at")
	}
}
