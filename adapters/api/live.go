package api

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/heraldgw/herald/internal/clock"
)

// livePoll is how often a live route's stream reads its answer again:
// a change any instance writes reaches an open dashboard within it.
const livePoll = 500 * time.Millisecond

// liveFailed is the event a live stream sends an answer that is not 200
// as (a browser's EventSource keeps "error" for its connection).
const liveFailed = "failed"

// live serves h as it is, or, to a client that asks for
// text/event-stream (a browser's EventSource does), as a stream: h's
// answer at once, and again each time it changes, read every livePoll
// on the API's clock. A 200 answer is sent as a "data:" event, any
// other as the event liveFailed with the error's body, so a page shows
// why; the stream goes on, with a keep-alive comment every KeepAlive,
// until the client goes or the adapter stops. Every read is h's own,
// so a stream shows exactly what a GET of the route would.
func (s *Server) live(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !wantsStream(r) {
			h(w, r)
			return
		}
		first := answer(h, r)
		if first.status != http.StatusOK && first.status < 500 {
			// A bad request is answered as such while a status can
			// still be sent: it will not get better by reading again.
			first.copyTo(w)
			return
		}
		clearWriteDeadline(w)
		out := newSSE(w)
		err := s.stream(r, h, first, out)
		if err != nil && r.Context().Err() == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, errShutdown) {
			s.log.Warn("live stream ended", "path", r.URL.Path, "err", err)
		}
	}
}

// stream sends first, then each answer of h that differs from the last
// sent.
func (s *Server) stream(r *http.Request, h http.HandlerFunc, first recorded, out *sse) error {
	ctx := r.Context()
	poll := s.opts.Clock.NewTimer(livePoll)
	defer poll.Stop()
	alive := s.opts.Clock.NewTicker(s.opts.KeepAlive)
	defer alive.Stop()
	var last recorded
	for next := first; ; {
		if next.status != last.status || !bytes.Equal(next.body, last.body) {
			if err := out.event(next.event(), next.body); err != nil {
				return err
			}
			last = next
		}
		if err := s.nextPoll(ctx, poll, livePoll, alive, out); err != nil {
			return err
		}
		next = answer(h, r)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// nextPoll waits until poll fires, and resets it to every, sending out a
// keep-alive comment at each tick of alive meanwhile. It returns ctx's
// error when ctx ends first, errShutdown when the adapter stops.
func (s *Server) nextPoll(ctx context.Context, poll clock.Timer, every time.Duration, alive clock.Ticker, out *sse) error {
	for {
		select {
		case <-poll.C():
			poll.Reset(every)
			return nil
		case <-alive.C():
			if err := out.comment(); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return errShutdown
		}
	}
}

// wantsStream reports whether r asks for server-sent events.
func wantsStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// recorded is one answer of a handler, kept to be sent as an event.
type recorded struct {
	header http.Header
	status int
	body   []byte
}

// answer runs h for r into a recorded answer.
func answer(h http.HandlerFunc, r *http.Request) recorded {
	rec := &recorder{header: http.Header{}}
	h(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return recorded{header: rec.header, status: rec.status, body: bytes.TrimRight(rec.body.Bytes(), "\n")}
}

// event is the name the answer is sent under: "" (a "data:" event) for
// a 200, liveFailed for any other.
func (a recorded) event() string {
	if a.status == http.StatusOK {
		return ""
	}
	return liveFailed
}

// copyTo writes the answer as a plain response.
func (a recorded) copyTo(w http.ResponseWriter) {
	for k, v := range a.header {
		w.Header()[k] = v
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// recorder is the http.ResponseWriter a live route's handler writes
// into for each read.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
