package api_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// timeline is an in-memory sessions.Timeline. Cursors are a zero-padded
// sequence across conversations, so they compare as strings.
type timeline struct {
	mu    sync.Mutex
	seq   int
	reads int
	convs map[string][]sessions.TimelineItem
	ids   map[string]string // item id → cursor
	// Fail, when set, is returned by every call.
	Fail error
}

var _ sessions.Timeline = (*timeline)(nil)

func newTimeline() *timeline {
	return &timeline{convs: make(map[string][]sessions.TimelineItem), ids: make(map[string]string)}
}

func (tl *timeline) AppendTimeline(ctx context.Context, item sessions.TimelineItem) (string, error) {
	const op = "fake.AppendTimeline"
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.Fail != nil {
		return "", tl.Fail
	}
	if item.Conv == "" || item.ID == "" {
		return "", errs.E(op, errs.Invalid, "empty conversation or id")
	}
	if c, ok := tl.ids[item.ID]; ok {
		return c, nil
	}
	tl.seq++
	item.Cursor = fmt.Sprintf("%020d", tl.seq)
	item.At = time.Unix(1700000000, 0).Add(time.Duration(tl.seq) * time.Second).UTC()
	tl.ids[item.ID] = item.Cursor
	tl.convs[item.Conv] = append(tl.convs[item.Conv], item)
	return item.Cursor, nil
}

func (tl *timeline) ReadTimeline(ctx context.Context, conv, after string, limit int) ([]sessions.TimelineItem, error) {
	const op = "fake.ReadTimeline"
	if after != "" {
		if _, err := strconv.ParseUint(after, 10, 64); err != nil || len(after) != 20 {
			return nil, errs.E(op, errs.Invalid, "cursor %q is not ours", after)
		}
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.reads++
	if tl.Fail != nil {
		return nil, tl.Fail
	}
	var out []sessions.TimelineItem
	for _, it := range tl.convs[conv] {
		if len(out) == limit {
			break
		}
		if strings.Compare(it.Cursor, after) > 0 {
			out = append(out, it)
		}
	}
	return out, nil
}

// SetFail sets Fail.
func (tl *timeline) SetFail(err error) {
	tl.mu.Lock()
	tl.Fail = err
	tl.mu.Unlock()
}

func (tl *timeline) TimelineEnd(ctx context.Context, conv string) (string, error) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.Fail != nil {
		return "", tl.Fail
	}
	if its := tl.convs[conv]; len(its) > 0 {
		return its[len(its)-1].Cursor, nil
	}
	return "", nil
}

// Reads counts ReadTimeline calls.
func (tl *timeline) Reads() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.reads
}

// Items returns conv's timeline.
func (tl *timeline) Items(conv string) []sessions.TimelineItem {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]sessions.TimelineItem(nil), tl.convs[conv]...)
}

// inbox is a fake adapters.Inbox: DeliverFunc decides what a delivery
// does; every delivery is recorded.
type inbox struct {
	DeliverFunc func(ctx context.Context, in sessions.Inbound) error

	mu  sync.Mutex
	got []sessions.Inbound
	ch  chan sessions.Inbound
}

var _ adapters.Inbox = (*inbox)(nil)

func newInbox() *inbox { return &inbox{ch: make(chan sessions.Inbound, 100)} }

func (b *inbox) Deliver(ctx context.Context, in sessions.Inbound) error {
	b.mu.Lock()
	fn := b.DeliverFunc
	b.mu.Unlock()
	if fn != nil {
		if err := fn(ctx, in); err != nil {
			return err
		}
	}
	b.mu.Lock()
	b.got = append(b.got, in)
	b.mu.Unlock()
	select {
	case b.ch <- in:
	default: // a test that does not call Next needs no copy
	}
	return nil
}

// OnDeliver sets DeliverFunc.
func (b *inbox) OnDeliver(fn func(ctx context.Context, in sessions.Inbound) error) {
	b.mu.Lock()
	b.DeliverFunc = fn
	b.mu.Unlock()
}

// Next waits for the next delivery.
func (b *inbox) Next(t testing.TB) sessions.Inbound {
	t.Helper()
	select {
	case in := <-b.ch:
		return in
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery within 5s")
		return sessions.Inbound{}
	}
}

// Got returns the deliveries so far.
func (b *inbox) Got() []sessions.Inbound {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]sessions.Inbound(nil), b.got...)
}
