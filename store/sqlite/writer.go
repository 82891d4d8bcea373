package sqlite

import (
	"context"
	"database/sql"
	"sync"

	"github.com/heraldgw/herald/internal/errs"
)

// maxBatch bounds how many operations share one transaction, so one commit
// never holds a long queue of callers behind a single slow batch.
const maxBatch = 128

// writer runs every write of the store on the one write connection. SQLite
// serializes writers anyway, and with synchronous=FULL each commit waits for
// an fsync, which costs far more than the statements in it. So the writer
// group-commits: while one transaction is being written, the operations that
// arrive queue up, and the next transaction runs them all, each in its own
// savepoint, under one BEGIN IMMEDIATE … COMMIT. Every operation is still
// all or nothing, and a caller hears back only after its operation is durable.
type writer struct {
	conn *sql.Conn
	st   *statements

	mu     sync.RWMutex // held for reading while submitting; for writing by stop
	closed bool
	reqs   chan *writeReq
	done   chan struct{} // closed when run has returned
}

// writeReq is one operation waiting for the writer.
type writeReq struct {
	ctx context.Context
	op  string
	fn  func(*tx) error
	res chan error // buffered, so the writer never waits on a caller
}

// tx is what an operation sees: the write connection inside an open
// transaction, and the prepared statements. Statements run with a
// background context: cancelling one caller must not interrupt the shared
// transaction its neighbours are in.
type tx struct {
	st *statements
}

func newWriter(conn *sql.Conn, st *statements) *writer {
	return &writer{
		conn: conn,
		st:   st,
		reqs: make(chan *writeReq, maxBatch),
		done: make(chan struct{}),
	}
}

func (w *writer) start() { go w.run() }

// stop lets the operations already submitted finish, then ends run.
func (w *writer) stop() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.reqs)
	}
	w.mu.Unlock()
	<-w.done
}

// do runs fn in a write transaction and returns its error once the
// transaction is committed (or fn's error, with nothing of fn written).
func (w *writer) do(ctx context.Context, op string, fn func(*tx) error) error {
	if err := ctx.Err(); err != nil {
		return errs.Wrap(op, errs.Unavailable, err)
	}
	r := &writeReq{ctx: ctx, op: op, fn: fn, res: make(chan error, 1)}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return errClosed(op)
	}
	select {
	case w.reqs <- r:
	case <-ctx.Done():
		w.mu.RUnlock()
		return errs.Wrap(op, errs.Unavailable, ctx.Err())
	}
	w.mu.RUnlock()
	select {
	case err := <-r.res:
		return err
	case <-ctx.Done():
		// The operation may still run and commit: like a timed-out network
		// call, the caller cannot know. It checks ctx first, so usually not.
		return errs.Wrap(op, errs.Unavailable, ctx.Err())
	}
}

func (w *writer) run() {
	defer close(w.done)
	batch := make([]*writeReq, 0, maxBatch)
	for first := range w.reqs {
		batch = append(batch[:0], first)
	fill:
		for len(batch) < maxBatch {
			select {
			case r, ok := <-w.reqs:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		w.commit(batch)
	}
}

// commit runs batch in one transaction and answers every request.
func (w *writer) commit(batch []*writeReq) {
	ctx := context.Background()
	results := make([]error, len(batch))
	fail := func(err error) {
		for _, r := range batch {
			r.res <- dbErr(r.op, err)
		}
	}
	if _, err := w.st.begin.ExecContext(ctx); err != nil {
		fail(err)
		return
	}
	t := &tx{st: w.st}
	single := len(batch) == 1
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			results[i] = errs.Wrap(r.op, errs.Unavailable, err)
			continue
		}
		if single {
			results[i] = r.fn(t)
			continue
		}
		if _, err := w.st.spOpen.ExecContext(ctx); err != nil {
			w.rollback()
			fail(err)
			return
		}
		err := r.fn(t)
		if err != nil {
			// Undo this operation only; its neighbours go on.
			if _, rerr := w.st.spUndo.ExecContext(ctx); rerr != nil {
				w.rollback()
				fail(rerr)
				return
			}
		}
		if _, rerr := w.st.spDone.ExecContext(ctx); rerr != nil {
			w.rollback()
			fail(rerr)
			return
		}
		results[i] = err
	}
	if single && results[0] != nil {
		w.rollback()
	} else if _, err := w.st.commit.ExecContext(ctx); err != nil {
		w.rollback()
		fail(err)
		return
	}
	for i, r := range batch {
		if results[i] != nil {
			r.res <- dbErr(r.op, results[i])
		} else {
			r.res <- nil
		}
	}
}

// rollback ends whatever transaction is open. SQLite may have rolled back
// already after an I/O error, so a failure here says nothing new.
func (w *writer) rollback() {
	_, _ = w.st.rollback.ExecContext(context.Background())
}
