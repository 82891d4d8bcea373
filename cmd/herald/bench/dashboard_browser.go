package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/heraldgw/herald/internal/headless"
)

// browserWait bounds each wait on the browser.
const browserWait = 30 * time.Second

// browser is a headless Chromium of the run's own, with a profile
// directory of its own, removed at stop.
type browser struct {
	ctx     context.Context
	cancel  func()
	version string
}

// startBrowser starts Chromium at path, or the one on PATH
// (headless.Start), with the environment every process herald starts
// gets (env), and reads its version.
func startBrowser(ctx context.Context, path, tempDir string, env []string) (*browser, error) {
	path, err := headless.Find(path)
	if err != nil {
		return nil, err
	}
	hb, err := headless.Start(ctx, path, tempDir, env)
	if err != nil {
		return nil, err
	}
	b := &browser{ctx: hb.Ctx, cancel: hb.Stop}
	v, err := chromedp.CallBrowser(hb.Ctx, cdpbrowser.GetVersion, cdp.Empty{})
	if err != nil {
		b.stop()
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	b.version = v.Product
	return b, nil
}

func (b *browser) stop() { b.cancel() }

// tab opens a tab in a browser context of its own: its own cache and
// cookies. The tab ends with cancel.
func (b *browser) tab() (context.Context, context.CancelFunc, error) {
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("opening a tab: %w", err)
	}
	return ctx, cancel, nil
}

// loaded is one first load: its sizes and its time to content.
type loaded struct {
	DashboardLoad
	took time.Duration
	// When the document, the last of its style and scripts and the
	// last of its fetches had arrived, from the navigation's start.
	phases [3]time.Duration
}

// phasesScript reads the responseEnd of the document, of the last
// style or script, and of the last fetch, in ms from the navigation's
// start (0 when there was none).
const phasesScript = `(() => {
  const end = kinds => Math.max(0, ...performance.getEntriesByType('resource').filter(e => kinds.includes(e.initiatorType)).map(e => e.responseEnd));
  return [performance.getEntriesByType('navigation')[0].responseEnd, end(['link', 'script', 'css']), end(['fetch', 'xmlhttprequest'])];
})()`

// contentScript runs in the page before its own scripts: a
// MutationObserver notes performance.now() when the condition first
// holds, so the time is the DOM's, not the poll's that reads it.
const contentScript = `(() => {
  const mark = () => {
    if (window.__content === undefined && (%s)) {
      window.__content = performance.now();
      observer.disconnect();
    }
  };
  const observer = new MutationObserver(mark);
  observer.observe(document, { childList: true, subtree: true });
})();`

// firstLoad opens url in a fresh tab and waits for content, a
// JavaScript condition, to hold.
func (b *browser) firstLoad(ctx context.Context, url, content string) (loaded, error) {
	tctx, cancel, err := b.tab()
	if err != nil {
		return loaded{}, err
	}
	defer cancel()
	// What the network carried, by request; only http(s) requests count
	// (not the data: icon).
	var (
		mu       sync.Mutex
		sent     = map[network.RequestID]bool{}
		finished = map[network.RequestID]int64{}
	)
	err = chromedp.Listen(tctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			if strings.HasPrefix(e.Request.URL, "http") {
				sent[e.RequestID] = true
			}
		case *network.EventLoadingFinished:
			finished[e.RequestID] = int64(e.EncodedDataLength)
		}
	})
	if err != nil {
		return loaded{}, err
	}
	if _, err := chromedp.Call(tctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: fmt.Sprintf(contentScript, content)}); err != nil {
		return loaded{}, err
	}
	wctx, wcancel := context.WithTimeout(tctx, browserWait)
	defer wcancel()
	if err := chromedp.Do(wctx, chromedp.Navigate(url)); err != nil {
		return loaded{}, err
	}
	at, err := chromedp.Run(wctx, chromedp.Poll[float64](`window.__content`, chromedp.WithPollingInterval(10*time.Millisecond)))
	if err != nil {
		return loaded{}, fmt.Errorf("waiting for %s: %w", content, err)
	}
	// The page's own count of what it fetched by then, the document
	// included; the network's events for them may come a little later.
	count, err := chromedp.Run(wctx, chromedp.Evaluate[int](`performance.getEntriesByType('navigation').length + performance.getEntriesByType('resource').filter(e => e.name.startsWith('http')).length`))
	if err != nil {
		return loaded{}, err
	}
	body, err := chromedp.Run(wctx, chromedp.Evaluate[int64](`[...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')].reduce((n, e) => n + e.encodedBodySize, 0)`))
	if err != nil {
		return loaded{}, err
	}
	phases, err := chromedp.Run(wctx, chromedp.Evaluate[[3]float64](phasesScript))
	if err != nil {
		return loaded{}, err
	}
	l := loaded{DashboardLoad: DashboardLoad{Requests: count, BodyBytes: body}, took: msDuration(at)}
	for i, p := range phases {
		l.phases[i] = msDuration(p)
	}
	for {
		mu.Lock()
		n := 0
		var bytes int64
		for id := range sent {
			if size, ok := finished[id]; ok {
				n++
				bytes += size
			}
		}
		mu.Unlock()
		if n >= count {
			l.Bytes = bytes
			return l, nil
		}
		select {
		case <-wctx.Done():
			return l, errors.New("the network's events did not account for every request")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// msDuration is a page's time in ms as a Duration.
func msDuration(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
