package delivery

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/outbox"
)

// downFiles is a store of file bytes that cannot be reached while down
// is set, and reads through to files otherwise.
type downFiles struct {
	files media.Store
	down  atomic.Bool
}

func (d *downFiles) File(ctx context.Context, id string) ([]byte, error) {
	if d.down.Load() {
		return nil, errs.E("down.File", errs.Unavailable, "the store cannot be reached")
	}
	return d.files.File(ctx, id)
}

// settledLog records what Settled is told.
type settledLog struct {
	mu  sync.Mutex
	got []string // "<id> accepted|dead: <reason>", the files' data lengths after
}

func (s *settledLog) settled(m outbox.Message, accepted bool, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	how := "dead: " + reason
	if accepted {
		how = "accepted"
	}
	for _, f := range m.Files {
		if len(f.Data) != 0 {
			how += " (with the bytes still in the message)"
		}
	}
	s.got = append(s.got, m.ID+" "+how)
}

func (s *settledLog) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// enqueueFile queues a message to telegram:42 sending the file kept
// under blob.
func (r *deliveryRig) enqueueFile(blob string) string {
	r.t.Helper()
	m := outbox.Message{
		Target: outbox.Target{Platform: "telegram", Chat: "42"}, Conv: "telegram:42", Text: "the chart", Kind: "file",
		Files: []outbox.File{{Name: "chart.png", MIME: "image/png", Size: 5, Blob: blob, Photo: true}},
	}
	id, _, err := r.store.Enqueue(context.Background(), m)
	if err != nil {
		r.t.Fatalf("Enqueue: %v", err)
	}
	r.d.Notify()
	return id
}

func TestDeliveryReadsTheFilesBytesForTheAdapter(t *testing.T) {
	files := openSQLite(t, nil).Files()
	if err := files.PutFile(context.Background(), "out-1", []byte("\x89PNG!")); err != nil {
		t.Fatal(err)
	}
	s := &scripted{}
	log := &settledLog{}
	r := newDeliveryRig(t, Options{Files: files, Settled: log.settled}, &adaptertest.Adapter{Name: "telegram", OnSend: s.send})
	id := r.enqueueFile("out-1")
	testkit.Eventually(t, "the file's message settled", func() bool { return len(log.all()) == 1 })
	if got := log.all()[0]; got != id+" accepted" {
		t.Errorf("settled %q, want %q", got, id+" accepted")
	}
	s.mu.Lock()
	sent := s.sent
	s.mu.Unlock()
	if len(sent) != 1 || len(sent[0].Files) != 1 || !bytes.Equal(sent[0].Files[0].Data, []byte("\x89PNG!")) || sent[0].Files[0].Name != "chart.png" {
		t.Fatalf("the adapter got %+v, want the file with its bytes", sent)
	}
}

func TestDeliveryDeadLettersAFileNoLongerKept(t *testing.T) {
	s := &scripted{}
	log := &settledLog{}
	r := newDeliveryRig(t, Options{Files: openSQLite(t, nil).Files(), Settled: log.settled}, &adaptertest.Adapter{Name: "telegram", OnSend: s.send})
	id := r.enqueueFile("out-gone")
	testkit.Eventually(t, "dead letter", func() bool { return len(r.dead()) == 1 })
	d := r.dead()[0]
	if d.ID != id || !strings.Contains(d.LastError, "the file's bytes are no longer kept: chart.png") {
		t.Errorf("dead letter %+v, want the file's message saying its bytes are gone", d)
	}
	if s.count() != 0 {
		t.Errorf("the adapter was called %d times, want none", s.count())
	}
	testkit.Eventually(t, "settled", func() bool { return len(log.all()) == 1 })
	if got := log.all()[0]; !strings.HasPrefix(got, id+" dead: the file's bytes are no longer kept") {
		t.Errorf("settled %q, want it dead with the reason", got)
	}
}

func TestDeliveryRetriesFilesTheStoreCannotGive(t *testing.T) {
	files := &downFiles{files: openSQLite(t, nil).Files()}
	files.down.Store(true)
	if err := files.files.PutFile(context.Background(), "out-1", []byte("bytes")); err != nil {
		t.Fatal(err)
	}
	s := &scripted{}
	r := newDeliveryRig(t, Options{Files: files}, &adaptertest.Adapter{Name: "telegram", OnSend: s.send})
	id := r.enqueueFile("out-1")
	m := r.waitReleased(id, func(m outbox.Message) bool { return m.Attempts == 1 })
	if !strings.Contains(m.LastError, "the bytes of chart.png could not be read") || !m.NextAttempt.After(r.clk.Now()) {
		t.Errorf("released %+v, want an attempt spent saying why, due after a backoff", m)
	}
	if s.count() != 0 || r.attempts("telegram", adapters.Transient.String()) != 1 {
		t.Errorf("%d sends, %d transient attempts; want none sent and the attempt counted", s.count(), r.attempts("telegram", adapters.Transient.String()))
	}
	files.down.Store(false)
	r.clk.Set(m.NextAttempt)
	r.d.Notify()
	testkit.Eventually(t, "sent once the store is back", func() bool { return s.count() == 1 })
	testkit.Eventually(t, "acked", func() bool {
		ms, _ := r.store.Pending(context.Background(), 10)
		return len(ms) == 0
	})
}
