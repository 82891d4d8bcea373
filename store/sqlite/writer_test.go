package sqlite

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"modernc.org/sqlite"

	"github.com/heraldgw/herald/sessions"
)

// makeScratch makes a table of one column, x, for a test's writes.
func makeScratch(t *testing.T, d *DB) {
	t.Helper()
	if err := d.w.do(context.Background(), "test", durable, func(t *tx) error {
		_, err := t.exec(`CREATE TABLE scratch (x INTEGER)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// An operation that panics, committed by its caller alone, undoes what it
// wrote and leaves the writer free for the next write.
func TestAWriteThatPanicsLeavesTheWriterUsable(t *testing.T) {
	ctx := context.Background()
	d, _, _ := testDB(t)
	makeScratch(t, d)
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want the operation's panic", p)
			}
		}()
		_ = d.w.do(ctx, "test", durable, func(t *tx) error {
			if _, err := t.exec(`INSERT INTO scratch VALUES (1)`); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	if err := d.w.do(ctx, "test", durable, func(t *tx) error {
		_, err := t.exec(`INSERT INTO scratch VALUES (2)`)
		return err
	}); err != nil {
		t.Fatalf("the write after the panic: %v", err)
	}
	var n, sum int
	if err := d.rdb.QueryRow(`SELECT count(*), total(x) FROM scratch`).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 1 || sum != 2 {
		t.Errorf("scratch holds %d rows summing to %d, want only the second write's", n, sum)
	}
}

// Close waits for a write its caller is committing alone, which commits.
func TestCloseWaitsForAWriteInProgress(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "herald.db")
	d := openAt(t, path, nil, sessions.Limits{})
	makeScratch(t, d)
	inside, release := make(chan struct{}), make(chan struct{})
	wrote := make(chan error, 1)
	go func() {
		wrote <- d.w.do(ctx, "test", durable, func(t *tx) error {
			close(inside)
			<-release
			_, err := t.exec(`INSERT INTO scratch VALUES (7)`)
			return err
		})
	}()
	<-inside
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	close(release)
	if err := <-wrote; err != nil {
		t.Fatalf("the write in progress: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	d2 := openAt(t, path, nil, sessions.Limits{})
	var x int
	if err := d2.rdb.QueryRow(`SELECT x FROM scratch`).Scan(&x); err != nil || x != 7 {
		t.Errorf("after reopening, scratch holds %d (%v), want the write's 7", x, err)
	}
}

// On Linux a store commits with fdatasync once it is open.
func TestCommitsSyncWithFdatasync(t *testing.T) {
	testDB(t)
	if runtime.GOOS == "linux" && !sqlite.FdatasyncEnabled() {
		t.Error("an open store on Linux commits with fsync, want fdatasync")
	}
}
