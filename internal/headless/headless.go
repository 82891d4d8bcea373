// Package headless starts Chromium headless for the dashboard's browser
// tests and its bench: with the flags a machine without the internet
// needs, a profile directory of its own, and only the environment it is
// given, never the starting process's (herald's secrets stay out of it).
package headless

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/chromedp/chromedp"
)

// names are the browsers looked for on PATH, in order.
var names = []string{"chromium", "chromium-browser", "google-chrome"}

// ErrNotFound is Find's error when no browser is on PATH.
var ErrNotFound = errors.New("no chromium on PATH (Debian: apt-get install chromium; scripts/test installs it)")

// Find returns path, checked to exist, or when empty the first of
// chromium, chromium-browser and google-chrome on PATH.
func Find(path string) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("chromium: %w", err)
		}
		return path, nil
	}
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNotFound
}

// Browser is a running headless Chromium.
type Browser struct {
	// Ctx is the browser's first tab; chromedp.NewContext(Ctx, …) opens
	// others.
	Ctx  context.Context
	stop func()
}

// Start starts the browser at path headless, with nothing that reaches
// the network on its own (background networking, component updates,
// sync, QUIC), a fresh profile under tempDir ("" for the system's), a
// 1280×860 window, and env as its whole environment (proc.Env.Build).
// It returns once the browser answers.
func Start(ctx context.Context, path, tempDir string, env []string) (*Browser, error) {
	dir, err := os.MkdirTemp(tempDir, "herald-chromium-")
	if err != nil {
		return nil, err
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.WithoutCancel(ctx),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1280, 860),
		chromedp.NoInheritEnv,
		chromedp.Env(env...),
	)
	bctx, cancelCtx := chromedp.NewContext(alloc)
	b := &Browser{Ctx: bctx, stop: func() {
		cancelCtx()
		cancelAlloc()
		_ = os.RemoveAll(dir)
	}}
	if err := chromedp.Do(bctx); err != nil {
		b.Stop()
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	return b, nil
}

// Stop ends the browser and removes its profile.
func (b *Browser) Stop() { b.stop() }
