package api

import (
	"context"
	"sync"
	"time"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// pageSize is how many timeline items one read asks for.
const pageSize = 200

// errShutdown ends a wait when the adapter stops.
var errShutdown = errs.E("api.follow", errs.Closed, "the gateway is shutting down")

// followHooks are what a follow does besides reading the timeline:
// keepAlive, when set, runs every KeepAlive; side, when set, runs
// whenever sideReady is signalled (streamed pieces of a reply to send);
// passing, when set, is given each item awaitReply reads that is not
// the answer it waits for.
type followHooks struct {
	keepAlive func() error
	sideReady <-chan struct{}
	side      func() error
	passing   func(sessions.TimelineItem) error
}

// follow calls each with every item of conv's timeline after the cursor
// after, in order, as they arrive, until each returns true or an error, ctx
// ends (ctx's error is returned) or the adapter stops (a Closed error). It
// reads again when a local send wakes it and every Poll otherwise, since a
// reply may be delivered by another process.
func (s *Server) follow(ctx context.Context, conv, after string, each func(sessions.TimelineItem) (bool, error), hooks followHooks) error {
	poll := time.NewTicker(s.opts.Poll)
	defer poll.Stop()
	var alive <-chan time.Time
	if hooks.keepAlive != nil {
		t := time.NewTicker(s.opts.KeepAlive)
		defer t.Stop()
		alive = t.C
	}
	failing := false
	for {
		// Watch before reading: a send between the read and the wait
		// still wakes us.
		woken, unwatch := s.wake.watch(conv)
		items, err := s.opts.Timeline.ReadTimeline(ctx, conv, after, pageSize)
		switch {
		case err == nil:
			failing = false
		case ctx.Err() != nil:
			unwatch()
			return ctx.Err()
		case errs.Is(err, errs.Invalid):
			unwatch()
			return err
		default:
			// The store may come back; keep polling, and say so once.
			if !failing {
				s.log.Warn("timeline read failed; polling on", "conv", conv, "err", err)
			}
			failing = true
		}
		for _, it := range items {
			after = it.Cursor
			stop, err := each(it)
			if stop || err != nil {
				unwatch()
				return err
			}
		}
		if len(items) == pageSize {
			unwatch()
			continue
		}
		for waiting := true; waiting; {
			select {
			case <-woken:
				waiting = false
			case <-poll.C:
				waiting = false
			case <-alive:
				if err := hooks.keepAlive(); err != nil {
					unwatch()
					return err
				}
			case <-hooks.sideReady:
				if err := hooks.side(); err != nil {
					unwatch()
					return err
				}
			case <-ctx.Done():
				unwatch()
				return ctx.Err()
			case <-s.done:
				unwatch()
				return errShutdown
			}
		}
		unwatch()
	}
}

// scan calls each with the items of conv's timeline after the cursor
// from, in order, a page at a time, until each returns true or the
// timeline ends. Unlike follow it does not wait for more.
func (s *Server) scan(ctx context.Context, conv, from string, each func(sessions.TimelineItem) bool) error {
	for {
		items, err := s.opts.Timeline.ReadTimeline(ctx, conv, from, pageSize)
		if err != nil {
			return err
		}
		for _, it := range items {
			if each(it) {
				return nil
			}
			from = it.Cursor
		}
		if len(items) < pageSize {
			return nil
		}
	}
}

// wakeups lets local sends wake the requests following a conversation.
// A watcher gets a channel that is closed by the next send to the
// conversation.
type wakeups struct {
	mu    sync.Mutex
	convs map[string]*watchers
}

type watchers struct {
	ch chan struct{}
	n  int
}

// watch returns the channel the next send to conv closes, and a func to
// call when no longer waiting on it.
func (w *wakeups) watch(conv string) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.convs == nil {
		w.convs = make(map[string]*watchers)
	}
	ws := w.convs[conv]
	if ws == nil {
		ws = &watchers{ch: make(chan struct{})}
		w.convs[conv] = ws
	}
	ws.n++
	return ws.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		ws.n--
		if ws.n == 0 && w.convs[conv] == ws {
			delete(w.convs, conv)
		}
	}
}

func (w *wakeups) wake(conv string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ws := w.convs[conv]; ws != nil {
		close(ws.ch)
		delete(w.convs, conv)
	}
}
