package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// streamPoll is how often a board's event stream reads the board's log
// (the API's kanbanPoll). A change waits a random part of it before it
// is made, so that the changes, each seen just after a read, do not fall
// in step with the reads.
const streamPoll = 500 * time.Millisecond

// seenScript notes, in the page, the wall-clock time each card's element
// first appears on the board: a MutationObserver on the columns, so the
// time is the DOM's, before the browser paints it.
const seenScript = `(() => {
  window.__seen = {};
  const columns = document.getElementById('columns');
  const mark = () => {
    const t = performance.timeOrigin + performance.now();
    for (const el of columns.querySelectorAll('.card[data-id]')) {
      if (!(el.dataset.id in window.__seen)) window.__seen[el.dataset.id] = t;
    }
  };
  mark();
  new MutationObserver(mark).observe(columns, { childList: true, subtree: true });
  return true;
})()`

// measureChanges opens the Kanban page, then makes n cards through the
// API one after another: each card's time from the create call
// returning to its element on the page, and to its event on a stream of
// the board read directly.
func measureChanges(ctx context.Context, br *browser, base string, n int) (herald, ref DashboardChange, offsetMs float64, err error) {
	tctx, cancel, err := br.tab()
	if err != nil {
		return herald, ref, 0, err
	}
	defer cancel()
	wctx, wcancel := context.WithTimeout(tctx, browserWait)
	err = chromedp.Do(wctx,
		chromedp.Navigate(base+"/ui/#/kanban"),
		chromedp.Poll[chromedp.Void](`document.getElementById('live')?.textContent === 'live' && document.querySelectorAll('#columns .column').length > 0`, chromedp.WithPollingInterval(20*time.Millisecond)))
	if err == nil {
		_, err = chromedp.Run(wctx, chromedp.Evaluate[bool](seenScript))
	}
	wcancel()
	if err != nil {
		return herald, ref, 0, fmt.Errorf("opening the board: %w", err)
	}
	if offsetMs, err = clockOffset(tctx); err != nil {
		return herald, ref, 0, err
	}
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	events, err := followBoard(sctx, base)
	if err != nil {
		return herald, ref, 0, err
	}
	var took, refTook []time.Duration
	for i := range n {
		select {
		case <-ctx.Done():
			return herald, ref, offsetMs, ctx.Err()
		case <-time.After(rand.N(streamPoll)):
		}
		id, made, err := createCard(ctx, base, "change "+strconv.Itoa(i))
		if err != nil {
			return herald, ref, offsetMs, err
		}
		at, err := eventOf(ctx, events, id)
		if err != nil {
			return herald, ref, offsetMs, err
		}
		wctx, wcancel := context.WithTimeout(tctx, browserWait)
		shown, err := chromedp.Run(wctx, chromedp.Poll[float64](fmt.Sprintf("window.__seen[%q]", id), chromedp.WithPollingInterval(10*time.Millisecond)))
		wcancel()
		if err != nil {
			return herald, ref, offsetMs, fmt.Errorf("card %s on the board: %w", id, err)
		}
		browserAt := time.UnixMicro(int64((shown - offsetMs) * 1000))
		took, refTook = append(took, browserAt.Sub(made)), append(refTook, at.Sub(made))
	}
	return changeFigures(took), changeFigures(refTook), offsetMs, nil
}

func changeFigures(d []time.Duration) DashboardChange {
	s := slices.Clone(d)
	slices.Sort(s)
	return DashboardChange{Changes: len(s), P50Ms: ms(percentile(s, 50)), P99Ms: ms(percentile(s, 99))}
}

// clockOffset is the browser's wall clock less this process's, in ms:
// of 5 reads, the one that took least, against its midpoint.
func clockOffset(ctx context.Context) (float64, error) {
	best, offset := time.Duration(-1), 0.0
	ctx, cancel := context.WithTimeout(ctx, browserWait)
	defer cancel()
	for range 5 {
		before := time.Now()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`performance.timeOrigin + performance.now()`))
		after := time.Now()
		if err != nil {
			return 0, fmt.Errorf("reading the browser's clock: %w", err)
		}
		if rtt := after.Sub(before); best < 0 || rtt < best {
			mid := before.Add(rtt / 2)
			best, offset = rtt, v-float64(mid.UnixMicro())/1000
		}
	}
	return offset, nil
}

// createCard makes a card on the board through the API and returns its
// id and when the call returned.
func createCard(ctx context.Context, base, title string) (string, time.Time, error) {
	body, _ := json.Marshal(map[string]string{"title": title})
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/api/v1/kanban/boards/"+dashboardBoard+"/cards", bytes.NewReader(body))
	if err != nil {
		return "", time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", time.Time{}, err
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	made := time.Now()
	if err != nil {
		return "", made, err
	}
	var card struct {
		ID string `json:"id"`
	}
	if res.StatusCode != http.StatusCreated || json.Unmarshal(b, &card) != nil || card.ID == "" {
		return "", made, fmt.Errorf("creating a card: %s %s", res.Status, b)
	}
	return card.ID, made, nil
}

// boardEvent is a card's created event as the stream delivered it.
type boardEvent struct {
	card string
	at   time.Time // when its data line was read
	err  error     // the stream ended
}

// followBoard reads the board's event stream over HTTP, as a client
// without a browser does, and sends each created event on.
func followBoard(ctx context.Context, base string) (<-chan boardEvent, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/kanban/boards/"+dashboardBoard+"/events", nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the board's event stream: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		return nil, fmt.Errorf("the board's event stream: %s", res.Status)
	}
	out := make(chan boardEvent, 64)
	go func() {
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		kind := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				kind = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && kind == "created":
				at := time.Now()
				var ev struct {
					Card string `json:"card"`
				}
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err == nil {
					send(ctx, out, boardEvent{card: ev.Card, at: at})
				}
			case line == "":
				kind = ""
			}
		}
		err := sc.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		send(ctx, out, boardEvent{err: fmt.Errorf("the board's event stream ended: %w", err)})
	}()
	return out, nil
}

// send sends ev on out unless ctx ended: nobody reads then.
func send(ctx context.Context, out chan<- boardEvent, ev boardEvent) {
	select {
	case out <- ev:
	case <-ctx.Done():
	}
}

// eventOf waits for card's created event and returns when it was read.
func eventOf(ctx context.Context, events <-chan boardEvent, card string) (time.Time, error) {
	wait := time.NewTimer(browserWait)
	defer wait.Stop()
	for {
		select {
		case ev := <-events:
			if ev.err != nil {
				return time.Time{}, ev.err
			}
			if ev.card == card {
				return ev.at, nil
			}
		case <-wait.C:
			return time.Time{}, fmt.Errorf("no created event for card %s on the stream", card)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}
