package testkit

import (
	"strings"
	"testing"
)

// SetEnv sets each of vars in the process's environment for the test
// (t.Setenv), as a gateway's environment would hold them.
func SetEnv(t testing.TB, vars map[string]string) {
	t.Helper()
	for name, value := range vars {
		t.Setenv(name, value)
	}
}

// CheckEnv fails t for each value of withheld that out, what a process
// herald started printed of its environment, shows, and for each of want
// it lacks; what names the process in the failures.
func CheckEnv(t testing.TB, what, out string, withheld map[string]string, want ...string) {
	t.Helper()
	for name, value := range withheld {
		if strings.Contains(out, value) {
			t.Errorf("%s saw %s: %s", what, name, out)
		}
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %s: %s", what, w, out)
		}
	}
}
