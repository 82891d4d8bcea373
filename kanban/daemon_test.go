package kanban_test

import (
	"testing"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
)

// A daemon hears of cards made ready elsewhere through the signal log:
// without one it is refused.
func TestDaemonNeedsTheSignalLog(t *testing.T) {
	_, err := kanban.NewDaemon(kanban.DispatcherOptions{Service: &kanban.Service{}, Name: "daemon"})
	if !errs.Is(err, errs.Invalid) {
		t.Errorf("NewDaemon without signals = %v, want Invalid", err)
	}
}
