package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// Options configure Open.
type Options struct {
	// Clock is the time source for every timestamp written: lease
	// expiry, ready times, dedupe age, outbox due times. Nil means clock.Real{}.
	Clock clock.Clock
	// Limits bound what the store accepts and how long it remembers
	// message ids and idempotency keys; zero fields take the defaults.
	Limits sessions.Limits
	// Synchronous is SQLite's synchronous setting: "FULL" (the default:
	// a committed write survives a power cut) or "NORMAL" (survives a
	// crash of herald, may lose the last commits on a power cut).
	Synchronous string
}

// busyTimeout is how long a connection waits for another process's write
// lock before giving up with an Unavailable error.
const busyTimeout = 10 * time.Second

// readConns is the size of the read pool. Reads in WAL mode never block
// the writer nor each other, so listing history or the outbox does not
// wait behind the write queue.
const readConns = 4

// DB is an opened herald database file. It serves the sessions and the
// outbox store interfaces and is safe for concurrent use.
type DB struct {
	clk clock.Clock
	lim sessions.Limits

	wdb   *sql.DB // one connection, driven only by w
	wconn *sql.Conn
	w     *writer
	ckpt  *checkpointer
	rdb   *sql.DB // the read pool
	reads *readStatements

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	// writes counts writes that remember a key (message ids, idempotency
	// keys), to prune the expired ones now and then. Only operations
	// running on the writer touch it.
	writes int
	// newRuns is where each job is in the cycle of trims of its runs
	// (trimNewRun). Only operations running on the writer touch it.
	newRuns map[string]int

	sessions *sessionStore
	outbox   *outboxStore
}

// Open opens (creating if needed) the database file at path, creating its
// parent directory too, and brings its schema up to date.
func Open(path string, opts Options) (*DB, error) {
	const op = "sqlite.Open"
	if path == "" {
		return nil, errs.E(op, errs.Invalid, "empty database path")
	}
	syncMode := strings.ToUpper(strings.TrimSpace(opts.Synchronous))
	switch syncMode {
	case "":
		syncMode = "FULL"
	case "FULL", "NORMAL":
	default:
		return nil, errs.E(op, errs.Invalid, "synchronous must be FULL or NORMAL, not %q", opts.Synchronous)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, errs.Wrap(op, errs.Invalid, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, errs.Wrap(op, errs.Unavailable, err)
	}
	// Commit with fdatasync(2) where the platform has it, as SQLite's own
	// builds do (the transpiled library defaults to fsync): a file's data
	// and size reach the disk, not its timestamps, so a commit is as
	// durable. The switch is process-wide and idempotent; where it is
	// unavailable (macOS, Windows) commits keep SQLite's own way.
	_, _ = sqlite.Fdatasync(true)
	d := &DB{clk: opts.Clock, lim: opts.Limits.WithDefaults(), newRuns: map[string]int{}}
	if d.clk == nil {
		d.clk = clock.Real{}
	}
	if err := d.open(abs, syncMode); err != nil {
		d.closeAll()
		return nil, dbErr(op, err)
	}
	d.sessions = &sessionStore{d: d}
	d.outbox = &outboxStore{d: d}
	d.w.start()
	d.ckpt.start()
	return d, nil
}

func (d *DB) open(path, syncMode string) error {
	ctx := context.Background()
	file := "file:" + (&url.URL{Path: path}).EscapedPath()
	syncPragma := "synchronous(" + syncMode + ")"
	var err error
	// The writer owns the only write connection: SQLite admits one writer
	// at a time, and queueing in Go is cheaper than spinning on SQLITE_BUSY.
	d.wdb, err = openPool(file, 1, "immediate", "journal_mode(WAL)", syncPragma, "temp_store(MEMORY)",
		"wal_autocheckpoint("+strconv.Itoa(walSafetyPages)+")")
	if err != nil {
		return err
	}
	if d.wconn, err = d.wdb.Conn(ctx); err != nil {
		return err
	}
	if err := migrate(ctx, d.wconn); err != nil {
		return err
	}
	st, err := prepareStatements(ctx, d.wconn)
	if err != nil {
		return err
	}
	cdb, err := openPool(file, 1, "", syncPragma)
	if err != nil {
		return err
	}
	d.ckpt = newCheckpointer(cdb)
	d.w = newWriter(d.wconn, st, syncMode == "FULL", d.ckpt)

	if d.rdb, err = openPool(file, readConns, "", "query_only(1)"); err != nil {
		return err
	}
	d.reads, err = prepareReads(ctx, d.rdb)
	return err
}

// openPool opens a pool of at most conns connections to file, kept open,
// each with the busy timeout and pragmas, and _txlock=txlock unless it is
// empty.
func openPool(file string, conns int, txlock string, pragmas ...string) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busyTimeout.Milliseconds(), 10)+")")
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	if txlock != "" {
		q.Set("_txlock", txlock)
	}
	db, err := sql.Open("sqlite", file+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxLifetime(0)
	return db, nil
}

// Sessions returns the conversation store.
func (d *DB) Sessions() sessions.Store { return d.sessions }

// Outbox returns the outbound message store.
func (d *DB) Outbox() outbox.Store { return d.outbox }

// Close waits for the writes already submitted, then closes the file.
// Every method called afterwards returns an errs.Closed error. Closing
// twice is harmless.
func (d *DB) Close() error {
	d.closeOnce.Do(func() {
		d.closed.Store(true)
		if d.w != nil {
			d.w.stop()
		}
		if d.ckpt != nil {
			d.ckpt.stop()
		}
		d.closeErr = dbErr("sqlite.Close", d.closeAll())
	})
	return d.closeErr
}

func (d *DB) closeAll() error {
	var errList []error
	if d.reads != nil {
		errList = append(errList, d.reads.close())
	}
	if d.rdb != nil {
		errList = append(errList, d.rdb.Close())
	}
	if d.ckpt != nil {
		errList = append(errList, d.ckpt.db.Close())
	}
	if d.w != nil {
		errList = append(errList, d.w.st.close())
	}
	if d.wconn != nil {
		errList = append(errList, d.wconn.Close())
	}
	if d.wdb != nil {
		errList = append(errList, d.wdb.Close())
	}
	return errors.Join(errList...)
}

// check is every method's first step.
func (d *DB) check(ctx context.Context, op string) error {
	if d.closed.Load() {
		return errClosed(op)
	}
	if err := ctx.Err(); err != nil {
		return errs.Wrap(op, errs.Unavailable, err)
	}
	return nil
}

// fail turns err into the store's error for op. A database error from a
// store closed under the call is reported as Closed, which is what the
// caller can act on.
func (d *DB) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	err = dbErr(op, err)
	if d.closed.Load() && (errs.Is(err, errs.Internal) || errs.Is(err, errs.Unavailable)) {
		return errClosed(op)
	}
	return err
}

func errClosed(op string) error { return errs.E(op, errs.Closed, "store is closed") }

// dbErr gives err a code: errors that already carry one keep it; SQLite's
// busy, full-disk and I/O errors are Unavailable (retry later); anything
// else is Internal.
func dbErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errs.Wrap(op, errs.Unavailable, err)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR,
			sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY,
			sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_NOLFS, sqlite3.SQLITE_PERM:
			return errs.Wrap(op, errs.Unavailable, err)
		}
	}
	return errs.Wrap(op, errs.Internal, err)
}

// now reads the injected clock as stored: Unix nanoseconds.
func (d *DB) now() (time.Time, int64) {
	t := d.clk.Now()
	return t, nanos(t)
}

// pruneDue reports whether this write should also drop some expired keys.
// Pruning every pruneEvery writes, pruneBatch keys at most, keeps the
// dedupe tables bounded at a cost spread thinly over the writes.
func (d *DB) pruneDue() bool {
	d.writes++
	return d.writes%pruneEvery == 0
}

const (
	pruneEvery = 64
	pruneBatch = 512
)

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func formatID(id int64) string { return strconv.FormatInt(id, 10) }

// parseID reads an id this store handed out; anything else names nothing.
func parseID(s string) (int64, bool) {
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id > 0
}

// limit turns a listing limit into SQL's: zero or less means no limit.
func limit(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}
