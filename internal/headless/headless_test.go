package headless_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/heraldgw/herald/internal/headless"
)

// The browser's environment is what it was given, not the test
// process's: a secret of the process never reaches it.
func TestBrowserGetsOnlyItsEnvironment(t *testing.T) {
	t.Setenv("HERALD_MODEL_API_KEY", "sk-not-for-the-browser-4242")
	path, err := headless.Find("")
	if err != nil {
		t.Fatal(err) // scripts/test installs chromium
	}
	b, err := headless.Start(context.Background(), path, t.TempDir(), []string{"PATH=" + os.Getenv("PATH"), "HERALD_GIVEN=yes"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	pid := chromedp.FromContext(b.Ctx).Browser.Process().Pid
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	vars := strings.Split(string(env), "\x00")
	if strings.Contains(string(env), "sk-not-for-the-browser-4242") {
		t.Errorf("the browser's environment holds the process's secret: %q", vars)
	}
	if !strings.Contains(string(env), "HERALD_GIVEN=yes") {
		t.Errorf("the browser's environment lacks what it was given: %q", vars)
	}
}

func TestFindRefusesAMissingPath(t *testing.T) {
	if _, err := headless.Find("/nonexistent/chromium"); err == nil {
		t.Error("Find of a missing path: no error")
	}
}
