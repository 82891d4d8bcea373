package testkit_test

import (
	"strings"
	"testing"

	"github.com/heraldgw/herald/internal/testkit"
)

func TestRecorderWaitsForValues(t *testing.T) {
	var r testkit.Recorder[string]
	go func() {
		for _, s := range []string{"a", "b", "c"} {
			r.Add(s)
		}
	}()
	got := r.Wait(t, 3)
	if strings.Join(got, "") != "abc" || strings.Join(r.All(), "") != "abc" {
		t.Errorf("Wait = %q, All = %q; want a, b, c in order", got, r.All())
	}
}
