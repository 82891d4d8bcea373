package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/heraldgw/herald/internal/errs"
)

// maxBatch bounds how many operations share one transaction, so one commit
// never holds a long queue of callers behind a single slow batch.
const maxBatch = 128

// guardedBatches is how many batches run with a savepoint for each
// operation after a batch in which one failed: a run of failures, as a
// board's contended claims make, then costs one batch run twice, not
// every batch.
const guardedBatches = 16

// writer runs every write of the store on the one write connection. SQLite
// serializes writers anyway, and with synchronous=FULL each commit waits for
// an fsync, which costs far more than the statements in it. So the writer
// group-commits: while one transaction is being written, the operations that
// arrive queue up, and the next transaction runs them all under one BEGIN
// IMMEDIATE … COMMIT. Every operation is still all or nothing, and a caller
// hears back only after its operation is committed.
//
// The operations of a batch run one after another without a savepoint of
// their own, which would cost each two statements and a copy of the pages
// it changes. When one fails, its writes may be in the transaction beside
// its neighbours', so the writer rolls the transaction back and runs the
// batch again, each operation in a savepoint that a failure undoes alone.
// An operation's fn may therefore run twice, the first run's writes
// discarded: it sets what it hands back anew on every run, and changes
// nothing outside the transaction but the store's counters of writes
// toward a prune or a trim (pruneDue, trimNewRun), which a discarded run
// moves on, as an operation undone in its savepoint does.
//
// A caller that finds the writer idle, with nothing queued, commits its
// operation itself, on its own goroutine: alone, the hand-off to run's
// goroutine and back would cost more than the statements. Whoever commits
// holds lead, so commits still follow one another on the one connection.
type writer struct {
	conn *sql.Conn
	st   *statements
	// full is set when the store runs with synchronous=FULL; relaxed is
	// set while the connection is switched to NORMAL for a batch of
	// bookkeeping writes. Only the holder of lead touches relaxed.
	full, relaxed bool
	// ckpt checkpoints the log once the commits since the last request
	// wrote about checkpointPages pages (pages). Only the holder of lead
	// touches pages.
	ckpt  *checkpointer
	pages int
	// guarded counts the batches still to run with a savepoint for each
	// operation, after one in which an operation failed (guardedBatches).
	// Only the holder of lead touches it.
	guarded int

	// lead is held while a batch is committed, by run or by a caller
	// committing its own operation. queued counts the requests sent to
	// reqs and not yet taken into a batch; a caller goes alone only when
	// it is zero, so queued requests are never overtaken.
	lead   sync.Mutex
	queued atomic.Int64

	mu     sync.RWMutex // held for reading while submitting; for writing by stop
	closed bool
	reqs   chan *writeReq
	done   chan struct{} // closed when run has returned
}

// commitMode says what a write must survive.
type commitMode int

const (
	// durable writes survive a power cut once their call returns:
	// entries, acks, replies, history, metadata.
	durable commitMode = iota
	// bookkeeping writes only move leases and claims around (Claim,
	// Next's delivery mark, Renew, Release, outbox Claim and Postpone).
	// Their commit skips the fsync, and the next durable commit, which
	// follows them in the log, makes them durable too. A power cut that
	// loses one also killed every process that saw it, so a lost grant
	// or token bump endangers nothing: the entry is still unacked, the
	// message still pending, and a later grant's token still exceeds
	// every token any live process holds. A crash of herald alone loses
	// nothing: the operating system still writes the log out. Signals
	// are bookkeeping too: processes tail them from the time they start,
	// so after a power cut none would read a lost one anyway.
	bookkeeping
)

// writeReq is one operation waiting for the writer.
type writeReq struct {
	ctx  context.Context
	op   string
	mode commitMode
	fn   func(*tx) error
	res  chan error // buffered, so the writer never waits on a caller
}

// tx is what an operation sees: the write connection inside an open
// transaction, and the prepared statements. Statements run with a
// background context: cancelling one caller must not interrupt the shared
// transaction its neighbours are in.
type tx struct {
	st   *statements
	conn *sql.Conn
}

// exec runs a statement that is not among the prepared ones (the other
// domains' tables) inside the transaction.
func (t *tx) exec(query string, args ...any) (sql.Result, error) {
	return t.conn.ExecContext(context.Background(), query, args...)
}

// query runs a query inside the transaction.
func (t *tx) query(query string, args ...any) (*sql.Rows, error) {
	return t.conn.QueryContext(context.Background(), query, args...)
}

// queryRow runs a query of one row inside the transaction.
func (t *tx) queryRow(query string, args ...any) *sql.Row {
	return t.conn.QueryRowContext(context.Background(), query, args...)
}

func newWriter(conn *sql.Conn, st *statements, full bool, ckpt *checkpointer) *writer {
	return &writer{
		conn: conn,
		st:   st,
		full: full,
		ckpt: ckpt,
		reqs: make(chan *writeReq, maxBatch),
		done: make(chan struct{}),
	}
}

func (w *writer) start() { go w.run() }

// stop lets the operations already submitted finish, then ends run.
func (w *writer) stop() {
	w.mu.Lock()
	first := !w.closed
	if first {
		w.closed = true
		close(w.reqs)
	}
	w.mu.Unlock()
	<-w.done
	if first {
		// A caller committing alone finishes before the connection
		// closes; lead stays held, since nothing commits after stop.
		w.lead.Lock()
	}
}

// do runs fn in a write transaction and returns its error once the
// transaction is committed as mode asks (or fn's error, with nothing of fn
// written). An error that says nothing of fn was written is marked
// errs.ErrNotRun: a failed operation's transaction, or its savepoint, is
// rolled back, and so is a batch whose statements failed. A failed
// COMMIT is marked only when it surely committed nothing (no room, a
// lock). A caller whose ctx ends while its operation waits or runs
// cannot know either.
func (w *writer) do(ctx context.Context, op string, mode commitMode, fn func(*tx) error) error {
	if err := ctx.Err(); err != nil {
		return notRun(op, err)
	}
	r := &writeReq{ctx: ctx, op: op, mode: mode, fn: fn, res: make(chan error, 1)}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return errClosed(op)
	}
	if w.queued.Load() == 0 && w.lead.TryLock() {
		w.mu.RUnlock()
		w.commitAlone(r)
		return <-r.res
	}
	w.queued.Add(1)
	select {
	case w.reqs <- r:
	case <-ctx.Done():
		w.queued.Add(-1)
		w.mu.RUnlock()
		return notRun(op, ctx.Err())
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

// undoFailed is the error of a batch whose failed operation's savepoint
// could not be rolled back to (undo, the rollback's error). On a full
// disk, an I/O error or a lock SQLite rolls the whole transaction back
// itself, savepoints and all: every operation of the batch is undone,
// and the operation's own error, SQLite's, says why.
func undoFailed(opErr, undo error) error {
	if hasCode(opErr, sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_NOMEM) {
		return opErr
	}
	return undo
}

// hasCode reports whether err is SQLite's, with one of codes as its
// primary code.
func hasCode(err error, codes ...int) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && slices.Contains(codes, se.Code()&0xff)
}

// notRun is err, a failure that wrote nothing, with its code, marked
// errs.ErrNotRun.
func notRun(op string, err error) error {
	return errs.MarkNotRun(dbErr(op, err))
}

func (w *writer) run() {
	defer close(w.done)
	batch := make([]*writeReq, 0, maxBatch)
	for first := range w.reqs {
		w.lead.Lock()
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
		w.queued.Add(-int64(len(batch)))
		w.commit(batch)
		w.lead.Unlock()
	}
}

// commitAlone commits r by itself on the caller's goroutine; the caller
// holds lead. An operation that panics leaves no transaction open behind
// it for the next commit.
func (w *writer) commitAlone(r *writeReq) {
	defer w.lead.Unlock()
	defer func() {
		if p := recover(); p != nil {
			w.rollback()
			panic(p)
		}
	}()
	w.commit([]*writeReq{r})
}

// commit runs batch in one transaction and answers every request.
func (w *writer) commit(batch []*writeReq) {
	ctx := context.Background()
	results := make([]error, len(batch))
	fail := func(err error) {
		for _, r := range batch {
			r.res <- notRun(r.op, err)
		}
	}
	if err := w.setSync(batch); err != nil {
		fail(err)
		return
	}
	guarded := len(batch) > 1 && w.guarded > 0
	if guarded {
		w.guarded--
	}
	if _, err := w.st.begin.ExecContext(ctx); err != nil {
		fail(err)
		return
	}
	t := &tx{st: w.st, conn: w.conn}
	failed, err := w.runOps(t, batch, results, guarded)
	if err == nil && failed && len(batch) > 1 {
		// The failed operation's writes are in the transaction beside its
		// neighbours': undo them all, and run the batch again with a
		// savepoint for each operation.
		w.rollback()
		w.guarded = guardedBatches
		clear(results)
		if _, err = w.st.begin.ExecContext(ctx); err == nil {
			failed, err = w.runOps(t, batch, results, true)
		}
	}
	if err != nil {
		w.rollback()
		fail(err)
		return
	}
	if failed {
		w.rollback()
	} else if _, err := w.st.commit.ExecContext(ctx); err != nil {
		w.rollback()
		// A COMMIT surely committed nothing when the disk had no room for
		// its log or a lock kept it from starting; one whose log write
		// went out and whose sync failed may come back when the log is
		// recovered, and is not told not run.
		if !hasCode(err, sqlite3.SQLITE_FULL, sqlite3.SQLITE_BUSY) {
			for _, r := range batch {
				r.res <- dbErr(r.op, err)
			}
			return
		}
		fail(err)
		return
	}
	for i, r := range batch {
		if results[i] != nil {
			r.res <- notRun(r.op, results[i])
		} else {
			r.res <- nil
		}
	}
	w.countPages()
}

// runOps runs batch's operations in the open transaction t and sets
// their results. Guarded, each runs in a savepoint of its own, which a
// failure undoes, and failed is false. Bare, they run as they are, and
// the first to fail stops the run with failed set: its writes, if any,
// are then in the transaction, and only a rollback of it all takes them
// out. err is a failure of the savepoints themselves.
func (w *writer) runOps(t *tx, batch []*writeReq, results []error, guarded bool) (failed bool, err error) {
	ctx := context.Background()
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			// Not run, so nothing of it is written.
			results[i] = errs.Wrap(r.op, errs.Unavailable, err)
			continue
		}
		if !guarded {
			if results[i] = r.fn(t); results[i] != nil {
				return true, nil
			}
			continue
		}
		if _, err := w.st.spOpen.ExecContext(ctx); err != nil {
			return false, err
		}
		results[i] = r.fn(t)
		if results[i] != nil {
			// Undo this operation only; its neighbours go on.
			if _, err := w.st.spUndo.ExecContext(ctx); err != nil {
				return false, undoFailed(results[i], err)
			}
		}
		if _, err := w.st.spDone.ExecContext(ctx); err != nil {
			return false, err
		}
	}
	return false, nil
}

// countPages adds the pages the last commit wrote to the log and asks for
// a checkpoint past checkpointPages.
func (w *writer) countPages() {
	err := w.conn.Raw(func(dc any) error {
		n, _, err := dc.(sqlite.DBStatus).Status(sqlite.DBStatusCacheWrite, true)
		w.pages += n
		return err
	})
	if err == nil && w.pages >= checkpointPages {
		w.pages = 0
		w.ckpt.request()
	}
}

// setSync relaxes the connection to synchronous=NORMAL for a batch of
// bookkeeping writes only, and puts FULL back for any batch with a durable
// write in it.
func (w *writer) setSync(batch []*writeReq) error {
	if !w.full {
		return nil
	}
	relax := true
	for _, r := range batch {
		if r.mode == durable {
			relax = false
			break
		}
	}
	if relax == w.relaxed {
		return nil
	}
	// Not a prepared statement: SQLite applies this pragma when it
	// compiles it, so it must be compiled each time.
	pragma := `PRAGMA synchronous = FULL`
	if relax {
		pragma = `PRAGMA synchronous = NORMAL`
	}
	if _, err := w.conn.ExecContext(context.Background(), pragma); err != nil {
		return err
	}
	w.relaxed = relax
	return nil
}

// rollback ends whatever transaction is open. SQLite may have rolled back
// already after an I/O error, so a failure here says nothing new.
func (w *writer) rollback() {
	_, _ = w.st.rollback.ExecContext(context.Background())
}
