package bench

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the driver herald's store uses, for the raw loop

	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/store/sqlite"
)

// sqliteBackend measures herald's SQLite store against bare INSERT and
// DELETE transactions on a file opened with the durability herald uses
// (WAL, synchronous=FULL). Both files live in a temporary directory
// removed afterwards.
type sqliteBackend struct {
	dir     string
	raw     *sql.DB
	rawPool *sql.DB // the pool benchmark's raw loop
}

func newSQLiteBackend(parent string) (*sqliteBackend, error) {
	dir, err := os.MkdirTemp(parent, "herald-bench-")
	if err != nil {
		return nil, err
	}
	return &sqliteBackend{dir: dir}, nil
}

func (b *sqliteBackend) open(context.Context) (sessionStore, error) {
	return sqlite.Open(b.path(), sqlite.Options{Synchronous: "FULL"})
}

// path is herald's database file.
func (b *sqliteBackend) path() string { return filepath.Join(b.dir, "herald.db") }

// gatewayStore: the file open opens, which the gateway opens with the
// same durability, its default.
func (b *sqliteBackend) gatewayStore(cfg *config.Store) {
	cfg.Backend, cfg.SQLitePath = config.BackendSQLite, b.path()
}

func (b *sqliteBackend) rawPrepare(ctx context.Context, convs int) error {
	dsn := "file:" + filepath.Join(b.dir, "raw.db") +
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return err
	}
	// SQLite runs one writer at a time; one connection queues writers in
	// Go instead of in SQLite's sleeping busy handler, which is the
	// fastest way to run write-only transactions concurrently.
	db.SetMaxOpenConns(1)
	b.raw = db
	_, err = db.ExecContext(ctx, `CREATE TABLE queue (id INTEGER PRIMARY KEY, conv INTEGER NOT NULL, text TEXT NOT NULL)`)
	return err
}

// rawStep commits the entry, then commits its removal: the two durable
// writes any queue on SQLite needs at least.
func (b *sqliteBackend) rawStep(ctx context.Context, conv int) error {
	res, err := b.raw.ExecContext(ctx, `INSERT INTO queue (conv, text) VALUES (?, ?)`, conv, payload)
	if err != nil {
		return err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return err
	}
	_, err = b.raw.ExecContext(ctx, `DELETE FROM queue WHERE id = ?`, id)
	return err
}

func (b *sqliteBackend) cleanup(context.Context) error {
	for _, db := range []*sql.DB{b.raw, b.rawPool} {
		if db != nil {
			db.Close()
		}
	}
	return os.RemoveAll(b.dir)
}

// serverCPU: SQLite runs in this process, whose CPU time includes it.
func (b *sqliteBackend) serverCPU(context.Context) (time.Duration, bool) { return 0, false }
