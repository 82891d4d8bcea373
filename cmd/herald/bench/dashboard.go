package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"testing/fstest"
	"time"

	"github.com/heraldgw/herald/config"
)

// Defaults for DashboardOptions.
const (
	DefaultDashboardLoads   = 10
	DefaultDashboardChanges = 50
)

// dashboardBoard is the board the changes are made on: the one the
// Kanban page opens without a ?board=.
const dashboardBoard = "default"

// DashboardOptions say what Dashboard measures.
type DashboardOptions struct {
	Store string // "sqlite" or "redis"
	// Loads is how many first loads of /ui/ are measured, each in a
	// browser context of its own (an empty cache, no cookies), taking
	// turns with the reference page's; DefaultDashboardLoads when 0.
	Loads int
	// Changes is how many cards are made with the board open;
	// DefaultDashboardChanges when 0.
	Changes int
	// Chromium is the browser's executable; chromium, chromium-browser
	// or google-chrome on PATH when empty.
	Chromium string
	RedisURL string // the Redis to measure; DefaultRedisURL when empty
	TempDir  string // where the gateway's home and the browser's profile are made (and removed); the system's when empty
}

// DashboardResult is one run's figures. The JSON names are what
// `herald bench dashboard --json` prints; scripts read them.
type DashboardResult struct {
	Store string `json:"store"`
	// Browser is the version Chromium reports.
	Browser string `json:"browser"`
	Loads   int    `json:"loads"`
	// Load is /ui/'s first load to the overview's counts; RefLoad a
	// minimal static page's from a bare net/http file server, to its
	// one element.
	Load    DashboardLoad `json:"load"`
	RefLoad DashboardLoad `json:"ref_load"`
	// Change is a card made through the API to its element on the open
	// board; RefChange the same card to its event read from the board's
	// event stream over HTTP, without a browser.
	Change    DashboardChange `json:"change"`
	RefChange DashboardChange `json:"ref_change"`
	// ClockOffsetMs is the browser's wall clock (performance.timeOrigin
	// + performance.now()) less this process's, subtracted from the
	// browser's times.
	ClockOffsetMs float64 `json:"clock_offset_ms"`
}

// DashboardLoad is a page's first loads: what one transferred, over how
// many requests, and the time from the navigation's start to the
// content shown.
type DashboardLoad struct {
	// Bytes is what the network carried, headers included
	// (Network.loadingFinished's encodedDataLength); BodyBytes the
	// bodies alone. Both are the first load's; every load is alike.
	Bytes     int64 `json:"bytes"`
	BodyBytes int64 `json:"body_bytes"`
	Requests  int   `json:"requests"`
	// Time to content, from the navigation's start (performance
	// timeOrigin) to the marker element in the DOM.
	P50Ms float64 `json:"p50_ms"`
	MaxMs float64 `json:"max_ms"`
	// Where the time went, p50s from the navigation's start: the
	// document arrived, the last of its style and scripts, the last of
	// its fetches (0 for a page with none).
	DocumentP50Ms float64 `json:"document_p50_ms"`
	AssetsP50Ms   float64 `json:"assets_p50_ms"`
	FetchesP50Ms  float64 `json:"fetches_p50_ms"`
}

// DashboardChange is the latency of the changes, from the create call
// returning to the change being seen.
type DashboardChange struct {
	Changes int     `json:"changes"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
}

// Dashboard runs the dashboard benchmark: first loads, then changes.
func Dashboard(ctx context.Context, opt DashboardOptions) (DashboardResult, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return DashboardResult{}, err
	}
	res := DashboardResult{Store: opt.Store, Loads: opt.Loads}
	// The browser first: a missing one fails before a store is made.
	// Started as every process herald starts: the base environment, none
	// of herald's secrets.
	br, err := startBrowser(ctx, opt.Chromium, opt.TempDir, config.Default().SubprocessEnv().Build())
	if err != nil {
		return res, err
	}
	defer br.stop()
	res.Browser = br.version
	ref, err := startStaticPage()
	if err != nil {
		return res, err
	}
	defer ref.Close()
	return onBackend(ctx, opt.Store, opt.TempDir, redisTarget{URL: opt.RedisURL}, 1, func(b backend) (_ DashboardResult, err error) {
		h, err := startGateway(ctx, b, gatewaySetup{
			tempDir: opt.TempDir,
			logger:  watchLog(nil),
			configure: func(cfg *config.Config) {
				cfg.Dashboard.Enabled = true
				// No key: the pages open on loopback without a login.
				cfg.HTTP.APIKey = ""
				cfg.Model.BaseURL = "http://127.0.0.1:1/v1" // never called
			},
		})
		if err != nil {
			return res, fmt.Errorf("starting the gateway: %w", err)
		}
		defer func() {
			if serr := h.stop(ctx); err == nil && serr != nil {
				err = fmt.Errorf("stopping the gateway: %w", serr)
			}
		}()
		base := "http://" + h.Addr()
		if res.Load, res.RefLoad, err = measureLoads(ctx, br, base, "http://"+ref.Addr().String(), opt.Loads); err != nil {
			return res, fmt.Errorf("first loads: %w", err)
		}
		if res.Change, res.RefChange, res.ClockOffsetMs, err = measureChanges(ctx, br, base, opt.Changes); err != nil {
			return res, fmt.Errorf("changes: %w", err)
		}
		return res, nil
	})
}

func (opt DashboardOptions) withDefaults() (DashboardOptions, error) {
	if opt.Loads == 0 {
		opt.Loads = DefaultDashboardLoads
	}
	if opt.Changes == 0 {
		opt.Changes = DefaultDashboardChanges
	}
	if opt.RedisURL == "" {
		opt.RedisURL = DefaultRedisURL
	}
	switch {
	case opt.Store != "sqlite" && opt.Store != "redis":
		return opt, fmt.Errorf("unknown store %q; want sqlite or redis", opt.Store)
	case opt.Loads < 1:
		return opt, fmt.Errorf("loads must be positive, got %d", opt.Loads)
	case opt.Changes < 1:
		return opt, fmt.Errorf("changes must be positive, got %d", opt.Changes)
	}
	return opt, nil
}

// Markers: what each page shows once its content is there.
const (
	// The overview's counts, read from the API.
	dashboardContent = `!!document.querySelector('#page table, #page .muted') && document.querySelector('[data-stat=turns] b').textContent !== '…'`
	refContent       = `document.getElementById('content') !== null`
)

// refPage is the reference's page: the least a page can be.
const refPage = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>reference</title><link rel="icon" href="data:,"></head>
<body><p id="content">ready</p></body>
</html>
`

// staticPage is the reference's server: net/http's file server over an
// in-memory tree, as the dashboard serves its embedded one.
type staticPage struct {
	srv *http.Server
	ln  net.Listener
}

func startStaticPage() (*staticPage, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	files := fstest.MapFS{"index.html": {Data: []byte(refPage)}}
	srv := &http.Server{Handler: http.FileServerFS(files), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &staticPage{srv: srv, ln: ln}, nil
}

func (p *staticPage) Addr() net.Addr { return p.ln.Addr() }

func (p *staticPage) Close() {
	_ = p.srv.Close()
}

// measureLoads loads /ui/ and the reference page n times each, taking
// turns, each in a fresh browser context.
func measureLoads(ctx context.Context, br *browser, base, refBase string, n int) (herald, ref DashboardLoad, err error) {
	var (
		took, refTook     []time.Duration
		phases, refPhases [3][]time.Duration
	)
	for i := range n {
		l, err := br.firstLoad(ctx, base+"/ui/", dashboardContent)
		if err != nil {
			return herald, ref, fmt.Errorf("/ui/: %w", err)
		}
		r, err := br.firstLoad(ctx, refBase+"/", refContent)
		if err != nil {
			return herald, ref, fmt.Errorf("the reference page: %w", err)
		}
		if i == 0 {
			herald, ref = l.DashboardLoad, r.DashboardLoad
		}
		took, refTook = append(took, l.took), append(refTook, r.took)
		for k := range phases {
			phases[k], refPhases[k] = append(phases[k], l.phases[k]), append(refPhases[k], r.phases[k])
		}
	}
	herald.P50Ms, herald.MaxMs = medianMax(took)
	ref.P50Ms, ref.MaxMs = medianMax(refTook)
	herald.DocumentP50Ms, _ = medianMax(phases[0])
	herald.AssetsP50Ms, _ = medianMax(phases[1])
	herald.FetchesP50Ms, _ = medianMax(phases[2])
	ref.DocumentP50Ms, _ = medianMax(refPhases[0])
	ref.AssetsP50Ms, _ = medianMax(refPhases[1])
	ref.FetchesP50Ms, _ = medianMax(refPhases[2])
	return herald, ref, nil
}

func medianMax(d []time.Duration) (p50, most float64) {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0, 0
	}
	return ms(percentile(s, 50)), ms(s[len(s)-1])
}
