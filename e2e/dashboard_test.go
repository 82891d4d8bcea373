package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/gateway"
	"github.com/heraldgw/herald/internal/headless"
	"github.com/heraldgw/herald/internal/proc"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/outbox"
)

// screenshots, when set, is where the pages' screenshots are written
// (docs/dashboard when they are made for the docs).
var screenshots = flag.String("screenshots", "", "write each page's screenshot to this directory")

// One browser serves every test of the package; each test gets its own
// browser context (its own cookies) in it.
var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel func()
	err    error
}

// stopBrowser ends the shared browser, if a test started it.
func stopBrowser() {
	if browser.cancel != nil {
		browser.cancel()
	}
}

func startBrowser() {
	path, err := headless.Find("")
	if err != nil {
		browser.err = err
		return
	}
	// The base environment, as every process herald starts gets it.
	b, err := headless.Start(context.Background(), path, "", (&proc.Env{}).Build())
	if err != nil {
		browser.err = err
		return
	}
	browser.ctx, browser.cancel = b.Ctx, b.Stop
}

// browserPage is a tab of the shared browser, in a browser context of its own,
// and the console errors and exceptions it has seen.
type browserPage struct {
	t   *testing.T
	ctx context.Context
	log *consoleLog
}

// consoleLog is what a tab's console showed of errors and exceptions.
type consoleLog struct {
	mu  sync.Mutex
	bad []string
}

// in is p for the subtest t.
func (p *browserPage) in(t *testing.T) *browserPage {
	return &browserPage{t: t, ctx: p.ctx, log: p.log}
}

func openPage(t *testing.T) *browserPage {
	t.Helper()
	browser.once.Do(startBrowser)
	if browser.err != nil {
		t.Fatalf("starting the browser: %v", browser.err)
	}
	ctx, cancel := chromedp.NewContext(browser.ctx, chromedp.WithNewBrowserContext())
	p := &browserPage{t: t, ctx: ctx, log: &consoleLog{}}
	// The first run opens the tab, which lives as long as its context:
	// without a timeout.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		t.Fatalf("opening a tab: %v", err)
	}
	console := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range console {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				p.record(m.String() + " " + m.URL)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return p
}

// signIn opens the dashboard at base and signs in with key, as a person
// types it; shot, when set, is the screenshot taken of the sign-in form.
func (p *browserPage) signIn(base, key, shot string) {
	p.t.Helper()
	p.run(chromedp.Navigate(base + "/ui/"))
	p.run(chromedp.WaitVisible(chromedp.CSS("#login")))
	if shot != "" {
		p.shot(shot)
	}
	p.run(chromedp.SendKeys(chromedp.CSS("#key"), key), chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)))
	p.run(chromedp.WaitVisible(chromedp.CSS("#nav")))
}

func (p *browserPage) record(s string) {
	p.log.mu.Lock()
	defer p.log.mu.Unlock()
	p.log.bad = append(p.log.bad, s)
}

// clean fails the test when the page logged an error or threw.
func (p *browserPage) clean(what string) {
	p.t.Helper()
	p.log.mu.Lock()
	defer p.log.mu.Unlock()
	if len(p.log.bad) > 0 {
		p.t.Errorf("%s: the page logged errors:\n%s", what, strings.Join(p.log.bad, "\n"))
		p.log.bad = nil
	}
}

// run runs actions, each wait bounded.
func (p *browserPage) run(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// text returns the text of the element sel selects.
func (p *browserPage) text(sel string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		p.t.Fatalf("browser: text of %s: %v", sel, err)
	}
	return s
}

// eval returns what the JavaScript expression evaluates to.
func (p *browserPage) eval(expr string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("browser: %s: %v", expr, err)
	}
	return s
}

// until waits for the JavaScript expression to be true.
func (p *browserPage) until(expr string) {
	p.t.Helper()
	p.run(chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(25*time.Second)))
}

// show opens the dashboard's page name, as its navigation does.
func (p *browserPage) show(name string) {
	p.t.Helper()
	p.eval(fmt.Sprintf("location.hash = %q", "#/"+name))
}

// shot writes the page's screenshot as name.png to -screenshots.
func (p *browserPage) shot(name string) {
	p.t.Helper()
	if *screenshots == "" {
		return
	}
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatal(err)
	}
	if err = os.WriteFile(filepath.Join(*screenshots, name+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// uiGateway is a gateway under test and a client of its API.
type uiGateway struct {
	t    *testing.T
	g    *gateway.Gateway
	home string // the gateway's HERALD_HOME, for the CLI beside it
	base string
	key  string
}

func (h *uiGateway) do(method, path, body string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.base+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func startUIGateway(t *testing.T, model *testkit.ModelServer, key string, adapter adapters.Adapter, edit func(*config.Config)) *uiGateway {
	t.Helper()
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.HTTP.APIKey = key
	cfg.Model.BaseURL = model.URL()
	cfg.Model.Name = "test-model"
	cfg.Tools.Workspace = t.TempDir()
	if edit != nil {
		edit(&cfg)
	}
	g, err := gateway.New(cfg, gateway.Options{Adapters: []adapters.Adapter{adapter}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		_ = g.Shutdown(context.Background())
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return &uiGateway{t: t, g: g, home: cfg.Home, base: "http://" + g.Addr(), key: key}
}

// Through a real gateway with an API key and a real browser: sign in,
// every page renders without an error, a dead letter is retried, an
// approval answered, and a card made with the CLI shows on an open
// board without a reload.
func TestDashboardInABrowser(t *testing.T) {
	const key = "dash-key-0123456789"
	model := testkit.NewModelServer(t)
	model.Respond(commandModel("echo mkfs.ext4"))
	var refuse atomic.Bool
	refuse.Store(true)
	var sent atomic.Int32
	chat := &adaptertest.Adapter{Name: "chatfake", OnSend: func(_ context.Context, m outbox.Message) adapters.SendResult {
		if refuse.Load() {
			return adapters.SendResult{Outcome: adapters.Permanent, Reason: "chat not found"}
		}
		sent.Add(1)
		return adapters.SendResult{Outcome: adapters.Accepted, MessageID: "m-" + m.ID}
	}}
	const modelKey = "sk-model-secret-0123456789"
	h := startUIGateway(t, model, key, chat, func(c *config.Config) { c.Model.APIKey = modelKey })
	ctx := context.Background()
	ob := h.g.Store().Outbox()

	// A dead letter, and an approval a turn waits on.
	if _, _, err := ob.Enqueue(ctx, outbox.Message{Target: outbox.Target{Platform: "chatfake", Chat: "42"}, Conv: "chatfake:42", Text: "the weekly report"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "a dead letter", func() bool {
		dead, err := ob.DeadLetters(ctx, 10)
		return err == nil && len(dead) == 1
	})
	if code, body := h.do("POST", "/api/v1/conversations/ap/messages", `{"text":"format the disk"}`); code != http.StatusAccepted {
		t.Fatalf("post a message: %d %s", code, body)
	}
	testkit.Eventually(t, "a pending approval", func() bool {
		_, body := h.do("GET", "/api/v1/approvals", "")
		return strings.Contains(body, "mkfs")
	})

	tab := openPage(t)
	p := tab
	p.signIn(h.base, key, "login")
	nav := p.text("#nav")
	for _, word := range []string{"Conversations", "Delegations", "Cron", "Kanban", "Outbox", "Keys", "Approvals"} {
		if !strings.Contains(nav, word) {
			t.Errorf("the navigation %q has no %s", nav, word)
		}
	}

	t.Run("session cookie", func(t *testing.T) {
		p := tab.in(t)
		res, err := chromedp.Call(p.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{h.base}})
		if err != nil {
			t.Fatal(err)
		}
		cookies := res.Cookies
		var session *network.Cookie
		for _, c := range cookies {
			if c.Name == "herald_session" {
				session = c
			}
			if strings.Contains(c.Value, key) {
				t.Errorf("cookie %s holds the key", c.Name)
			}
		}
		if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict {
			t.Errorf("session cookie %+v, want HttpOnly and SameSite=Strict", session)
		}
		visible := p.eval("document.cookie + document.body.innerText")
		if strings.Contains(visible, "herald_session") || strings.Contains(visible, key) {
			t.Errorf("the page can read the session or the key: %q", visible)
		}
	})

	t.Run("overview", func(t *testing.T) {
		p := tab.in(t)
		p.until(`document.querySelectorAll('#queues .stat').length === 6 && !!document.querySelector('#page table tbody tr')`)
		text := p.text("#queues")
		if !strings.Contains(text, "Dead letters") || !strings.Contains(text, "Approvals pending") {
			t.Errorf("overview %q", text)
		}
		if self := selfInstance(t, h); !strings.Contains(p.text("#page table"), self) {
			t.Errorf("the overview's instances %q, want this gateway's %s", p.text("#page table"), self)
		}
		p.shot("overview")
		p.clean("overview")
	})

	t.Run("outbox", func(t *testing.T) {
		p := tab.in(t)
		p.show("outbox")
		p.run(chromedp.WaitVisible(chromedp.CSS("button.retry")))
		dead := p.text("#page")
		if !strings.Contains(dead, "chat not found") || !strings.Contains(dead, "the weekly report") {
			t.Errorf("the outbox page shows no dead letter with its reason: %q", dead)
		}
		p.shot("outbox")
		refuse.Store(false)
		p.run(chromedp.Click(chromedp.CSS("button.retry")))
		p.until(`document.body.innerText.includes('No dead letters.')`)
		testkit.Eventually(t, "the retried message sent", func() bool { return sent.Load() == 1 })
		if dead, err := ob.DeadLetters(ctx, 10); err != nil || len(dead) != 0 {
			t.Errorf("dead letters after the retry: %v %v", dead, err)
		}
		p.clean("outbox")
	})

	t.Run("approvals", func(t *testing.T) {
		p := tab.in(t)
		p.show("approvals")
		p.run(chromedp.WaitVisible(chromedp.CSS(`button[data-decision="once"]`)))
		buttons := p.text("#page table")
		for _, label := range []string{"Allow once", "Allow this session", "Always allow", "Deny"} {
			if !strings.Contains(buttons, label) {
				t.Errorf("no %q on the approvals page: %q", label, buttons)
			}
		}
		p.shot("approvals")
		p.run(chromedp.Click(chromedp.CSS(`button[data-decision="once"]`)))
		p.until(`document.body.innerText.includes('No approval is waiting.')`)
		testkit.Eventually(t, "the turn ran the command", func() bool {
			_, body := h.do("GET", "/api/v1/conversations/ap/timeline", "")
			return strings.Contains(body, "result: ")
		})
		p.clean("approvals")
	})

	t.Run("kanban", func(t *testing.T) {
		p := tab.in(t)
		p.show("kanban")
		p.until(`document.getElementById('live') && document.getElementById('live').textContent === 'live' && document.querySelectorAll('.column').length > 0`)
		p.eval(`window.notReloaded = 'yes'`) // gone if the page loads again
		// A card made with the CLI, a process of its own on the same
		// store, with a file attached.
		notes := filepath.Join(t.TempDir(), "notes.txt")
		if err := os.WriteFile(notes, []byte("the vendor's answer"), 0o600); err != nil {
			t.Fatal(err)
		}
		if res := runCLI(t, h.home, "kanban", "create", "made by the CLI", "--attach", notes); res.code != 0 {
			t.Fatalf("herald kanban create: %d %s %s", res.code, res.stdout, res.stderr)
		}
		p.until(`[...document.querySelectorAll('.column .card')].some(c => c.textContent.includes('made by the CLI'))`)
		if got := p.eval(`String(window.notReloaded)`); got != "yes" {
			t.Errorf("the board was loaded again to show the card")
		}
		p.run(chromedp.SendKeys(chromedp.CSS("#card-title"), "made on the page"), chromedp.Click(chromedp.CSS(`#new-card button[type="submit"]`)))
		p.until(`[...document.querySelectorAll('.column .card')].some(c => c.textContent.includes('made on the page'))`)
		_, body := h.do("GET", "/api/v1/kanban/boards/default/cards", "")
		if !strings.Contains(body, "made on the page") {
			t.Errorf("the card made on the page is not on the board: %s", body)
		}
		p.shot("kanban")

		// A drag of a card onto another column moves it there, as the
		// browser's drag and drop dispatches it.
		id := p.eval(`[...document.querySelectorAll('.column .card')].find(c => c.textContent.includes('made by the CLI')).dataset.id`)
		if code, body := h.do("POST", "/api/v1/kanban/cards/"+id+"/comments", `{"text":"looked at it"}`); code != http.StatusCreated {
			t.Fatalf("comment on %s: %d %s", id, code, body)
		}
		p.eval(fmt.Sprintf(`(() => {
			window.prompt = () => 'waiting on the vendor';
			const dt = new DataTransfer();
			const card = document.querySelector('.card[data-id=%q]');
			card.dispatchEvent(new DragEvent('dragstart', { bubbles: true, dataTransfer: dt }));
			const to = document.querySelector('.column[data-status="blocked"]');
			to.dispatchEvent(new DragEvent('dragover', { bubbles: true, cancelable: true, dataTransfer: dt }));
			to.dispatchEvent(new DragEvent('drop', { bubbles: true, cancelable: true, dataTransfer: dt }));
			return 'dropped';
		})()`, id))
		p.until(fmt.Sprintf(`!!document.querySelector('.column[data-status="blocked"] .card[data-id=%q]')`, id))
		if _, body := h.do("GET", "/api/v1/kanban/cards/"+id, ""); !strings.Contains(body, `"status":"blocked"`) {
			t.Errorf("the dragged card is not blocked on the board: %s", body)
		}

		// A click opens the card's drawer: its comments, attachments, runs
		// and log.
		p.run(chromedp.Click(chromedp.CSS(fmt.Sprintf(`.card[data-id=%q]`, id))))
		p.until(`!document.getElementById('drawer').hidden && document.getElementById('drawer').textContent.includes('looked at it')`)
		drawer := p.text("#drawer")
		for _, want := range []string{"Comments", "Attachments", "notes.txt", "Runs", "Log", "blocked", "waiting on the vendor"} {
			if !strings.Contains(drawer, want) {
				t.Errorf("the card's drawer has no %q: %q", want, drawer)
			}
		}
		if strings.Contains(drawer, "null") || strings.Contains(drawer, "undefined") {
			t.Errorf("the card's drawer shows a missing value: %q", drawer)
		}
		p.shot("kanban-card")
		p.clean("kanban")
	})

	t.Run("cron", func(t *testing.T) {
		p := tab.in(t)
		script := filepath.Join(t.TempDir(), "report.sh")
		if err := os.WriteFile(script, []byte("echo hello from the script\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		jobs := cronjobs.Manager{Store: h.g.Store().Cron()}
		j, err := jobs.Create(ctx, cronjobs.Spec{Name: "nightly report", Schedule: "every 1h", Script: script, NoAgent: true, Deliver: "local", CreatedBy: "cli"})
		if err != nil {
			t.Fatal(err)
		}
		p.show("cron")
		p.run(chromedp.WaitVisible(chromedp.CSS(`button[data-action="run"]`)))

		// Run now: the run happens, and its output shows on the page.
		p.run(chromedp.Click(chromedp.CSS(`button[data-action="run"]`)))
		p.until(`document.getElementById('cron-msg').textContent.startsWith('Run requested')`)
		testkit.Eventually(t, "the run asked for ended", func() bool {
			_, runs, err := jobs.Show(ctx, j.ID)
			return err == nil && len(runs) == 1 && runs[0].Ended() && runs[0].Output != ""
		})
		p.run(chromedp.Click(chromedp.CSS(`button[data-action="runs"]`)))
		p.run(chromedp.WaitVisible(chromedp.CSS(`#cron-runs button.output`)))
		p.run(chromedp.Click(chromedp.CSS(`#cron-runs button.output`)))
		p.until(`!!document.querySelector('#cron-output pre') && document.querySelector('#cron-output pre').textContent.includes('hello from the script')`)
		p.shot("cron")

		// Pause, then resume.
		p.run(chromedp.Click(chromedp.CSS(`button[data-action="pause"]`)))
		p.run(chromedp.WaitVisible(chromedp.CSS(`button[data-action="resume"]`)))
		if got, _, err := jobs.Show(ctx, j.ID); err != nil || got.Enabled || got.State != cronjobs.StatePaused {
			t.Errorf("job after Pause: %+v %v", got, err)
		}
		p.run(chromedp.Click(chromedp.CSS(`button[data-action="resume"]`)))
		p.run(chromedp.WaitVisible(chromedp.CSS(`button[data-action="pause"]`)))
		if got, _, err := jobs.Show(ctx, j.ID); err != nil || !got.Enabled || got.State != cronjobs.StateScheduled {
			t.Errorf("job after Resume: %+v %v", got, err)
		}
		p.clean("cron")
	})

	t.Run("keys", func(t *testing.T) {
		p := tab.in(t)
		p.show("keys")
		p.until(`!!document.querySelector('#page table tbody tr')`)
		keys := p.text("#page table")
		if !strings.Contains(keys, "test-model@") || !strings.Contains(keys, "ok") {
			t.Errorf("the keys page shows no key of the model: %q", keys)
		}
		if strings.Contains(p.eval(`document.body.innerHTML`), modelKey) {
			t.Errorf("the keys page shows the key itself: %q", keys)
		}
		_, body := h.do("GET", "/api/v1/model/keys", "")
		if strings.Contains(body, modelKey) || !strings.Contains(body, `"status":"ok"`) {
			t.Errorf("GET /api/v1/model/keys: %s, want the key masked", body)
		}
		p.shot("keys")
		p.clean("keys")
	})

	// The Delegations page has its own test (TestDashboardDelegations);
	// so has Conversations (TestDashboardConversationsLive), which makes
	// its screenshot.
	for _, name := range []string{"conversations"} {
		t.Run(name, func(t *testing.T) {
			p := tab.in(t)
			p.show(name)
			p.until(fmt.Sprintf(`document.getElementById('page').dataset.page === %q && !!document.querySelector('#page h1')`, name))
			p.clean(name)
		})
	}
}

// With dashboard.enabled false the gateway serves no /ui/.
func TestDashboardOff(t *testing.T) {
	model := testkit.NewModelServer(t)
	for _, on := range []bool{true, false} {
		h := startUIGateway(t, model, "", &adaptertest.Adapter{Name: "chatfake"}, func(c *config.Config) { c.Dashboard.Enabled = on })
		res, err := http.Get(h.base + "/ui/")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if want := map[bool]int{true: http.StatusOK, false: http.StatusNotFound}[on]; res.StatusCode != want {
			t.Errorf("dashboard.enabled %v: GET /ui/ %d, want %d", on, res.StatusCode, want)
		}
	}
}

// selfInstance is the id under which h's gateway recorded itself among
// the instances, the only one.
func selfInstance(t *testing.T, h *uiGateway) string {
	t.Helper()
	ins, err := h.g.Store().Instances().Instances(context.Background())
	if err != nil || len(ins) != 1 {
		t.Fatalf("instances %+v, %v; want this gateway alone", ins, err)
	}
	return ins[0].ID
}

// The overview shows this gateway among the instances, and its turns
// per minute rise, without a reload, once a message was answered.
func TestDashboardOverviewTurns(t *testing.T) {
	model := testkit.NewModelServer(t)
	h := startUIGateway(t, model, "", &adaptertest.Adapter{Name: "chatfake"}, nil)
	p := openPage(t)
	p.run(chromedp.Navigate(h.base + "/ui/"))
	self := selfInstance(t, h)
	row := fmt.Sprintf(`document.querySelector('#page tr[data-id=%q]')`, self)
	p.until(row + ` && document.querySelector('[data-stat=turns] b').textContent === '0'`)
	if code, body := h.do("POST", "/api/v1/conversations/ov/messages", `{"text":"hello"}`); code != http.StatusAccepted {
		t.Fatalf("post a message: %d %s", code, body)
	}
	p.until(`document.querySelector('[data-stat=turns] b').textContent === '1'`)
	if got := p.eval(row + `.querySelector('td.turns').textContent`); got != "1" {
		t.Errorf("this gateway's turns per minute %q, want 1", got)
	}
	p.clean("overview")
}

// A key marked dead shows a Revive button on the Keys page; a press
// clears the mark for every gateway, and the page shows the key ok.
func TestDashboardKeyRevive(t *testing.T) {
	const modelKey = "sk-model-secret-0123456789"
	model := testkit.NewModelServer(t)
	h := startUIGateway(t, model, "", &adaptertest.Adapter{Name: "chatfake"}, func(c *config.Config) { c.Model.APIKey = modelKey })
	_, body := h.do("GET", "/api/v1/model/keys", "")
	var keys struct {
		Keys []llm.ModelKey `json:"keys"`
	}
	if err := json.Unmarshal([]byte(body), &keys); err != nil || len(keys.Keys) != 1 {
		t.Fatalf("GET /api/v1/model/keys: %s", body)
	}
	k := keys.Keys[0]
	if err := h.g.Store().Pools().MarkKey(context.Background(), k.Pool, llm.KeyState{ID: k.ID, Reason: llm.ClassAuth, DeadFor: "test"}); err != nil {
		t.Fatal(err)
	}
	p := openPage(t)
	p.run(chromedp.Navigate(h.base + "/ui/#/keys"))
	row := fmt.Sprintf(`document.querySelector('#page tr[data-id=%q]')`, k.ID)
	p.until(row + ` && ` + row + `.querySelector('td.status').textContent === 'dead'`)
	p.shot("keys")
	p.run(chromedp.Click(chromedp.CSS("button.revive")))
	p.until(row + `.querySelector('td.status').textContent === 'ok' && !document.querySelector('button.revive')`)
	if strings.Contains(p.eval(`document.body.innerHTML`), modelKey) {
		t.Error("the keys page shows the key itself")
	}
	if _, body := h.do("GET", "/api/v1/model/keys", ""); !strings.Contains(body, `"status":"ok"`) {
		t.Errorf("after the revive: %s", body)
	}
	p.clean("keys")
}
