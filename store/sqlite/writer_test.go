package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"modernc.org/sqlite"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

// mustWrite commits fn through the writer, or fails t.
func mustWrite(t *testing.T, d *DB, fn func(*tx) error) {
	t.Helper()
	if err := d.w.do(context.Background(), "test", durable, fn); err != nil {
		t.Fatal(err)
	}
}

// makeScratch makes a table of one column, x, for a test's writes.
func makeScratch(t *testing.T, d *DB) {
	t.Helper()
	mustWrite(t, d, func(t *tx) error {
		_, err := t.exec(`CREATE TABLE scratch (x INTEGER)`)
		return err
	})
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

// batchOf commits ops as one batch: each is submitted while the writer is
// held by a write of the test's, and the hold is let go once all are
// queued. It returns each operation's answer.
func batchOf(t *testing.T, d *DB, ops ...func(*tx) error) []error {
	t.Helper()
	ctx := context.Background()
	inside, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- d.w.do(ctx, "hold", durable, func(*tx) error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	answers := make([]chan error, len(ops))
	for i, op := range ops {
		answers[i] = make(chan error, 1)
		go func() { answers[i] <- d.w.do(ctx, "test", durable, op) }()
		// In order: each is sent before the next is. The writer's loop
		// takes the first from the queue and waits for the hold; the
		// others stay queued.
		for d.w.queued.Load() != int64(i+1) || len(d.w.reqs) != i {
			runtime.Gosched()
		}
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("the holding write: %v", err)
	}
	errs := make([]error, len(ops))
	for i := range ops {
		errs[i] = <-answers[i]
	}
	return errs
}

// scratchRows is what scratch holds, in order.
func scratchRows(t *testing.T, d *DB) []int {
	t.Helper()
	rows, err := d.rdb.Query(`SELECT x FROM scratch ORDER BY x`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var xs []int
	for rows.Next() {
		var x int
		if err := rows.Scan(&x); err != nil {
			t.Fatal(err)
		}
		xs = append(xs, x)
	}
	return xs
}

// An operation of a batch that fails after it wrote is undone alone: its
// neighbours, before and after it, commit once each. The batch runs again
// with a savepoint for each operation, and so do the batches that follow
// it for a while, whose operations then run once.
func TestAFailingOperationOfABatchIsUndoneAlone(t *testing.T) {
	d, _, _ := testDB(t)
	makeScratch(t, d)
	runs := map[int]int{}
	insert := func(x int, fail bool) func(*tx) error {
		return func(t *tx) error {
			runs[x]++ // the writer runs one operation at a time
			if _, err := t.exec(`INSERT INTO scratch VALUES (?)`, x); err != nil {
				return err
			}
			if fail {
				return errors.New("refused after writing")
			}
			return nil
		}
	}

	got := batchOf(t, d, insert(1, false), insert(2, false))
	if got[0] != nil || got[1] != nil {
		t.Fatalf("a batch of two good writes answered %v", got)
	}
	if runs[1] != 1 || runs[2] != 1 {
		t.Errorf("a batch without a failure ran its operations %d and %d times, want once each", runs[1], runs[2])
	}

	got = batchOf(t, d, insert(3, false), insert(4, true), insert(5, false))
	if got[0] != nil || got[2] != nil {
		t.Errorf("the failing write's neighbours answered %v and %v, want success", got[0], got[2])
	}
	if got[1] == nil || !strings.Contains(got[1].Error(), "refused after writing") {
		t.Errorf("the failing write answered %v, want its own error", got[1])
	}
	if want := []int{1, 2, 3, 5}; !slices.Equal(scratchRows(t, d), want) {
		t.Errorf("scratch holds %v, want %v: the failed write undone, its neighbours kept once", scratchRows(t, d), want)
	}
	if runs[3] != 2 || runs[4] != 2 || runs[5] != 1 {
		t.Errorf("the batch ran its operations %d, %d and %d times, want 2, 2, 1: once as they were, up to the failure, then each in a savepoint",
			runs[3], runs[4], runs[5])
	}

	got = batchOf(t, d, insert(6, true), insert(7, false))
	if got[0] == nil || got[1] != nil {
		t.Errorf("the next batch answered %v, want the first write's failure alone", got)
	}
	if runs[6] != 1 || runs[7] != 1 {
		t.Errorf("the batch after a failure ran its operations %d and %d times, want once each, in savepoints", runs[6], runs[7])
	}
	if want := []int{1, 2, 3, 5, 7}; !slices.Equal(scratchRows(t, d), want) {
		t.Errorf("scratch holds %v, want %v", scratchRows(t, d), want)
	}
}

// fillUp caps the database at the pages it has, so that a write needing
// another page fails as it would on a full disk (SQLITE_FULL).
func fillUp(t *testing.T, d *DB) {
	t.Helper()
	mustWrite(t, d, func(t *tx) error {
		var pages int64
		if err := t.queryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
			return err
		}
		_, err := t.exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages))
		return err
	})
}

// A write the disk has no room for fails Unavailable, writes nothing and
// says so (errs.ErrNotRun), alone and in a batch: what the delivery
// worker reads to know that a failed commit handed it no reply.
func TestAWriteWithNoRoomIsNotRun(t *testing.T) {
	ctx := context.Background()
	d, _, _ := testDB(t)
	makeScratch(t, d)
	fillUp(t, d)
	big := strings.Repeat("x", 64<<10) // pages of overflow, which the file has not
	_, err := d.Sessions().Append(ctx, sessions.Inbound{Conv: "api:c", Text: big})
	if !errs.Is(err, errs.Unavailable) || !errors.Is(err, errs.ErrNotRun) || !strings.Contains(err.Error(), "full") {
		t.Errorf("an append with no room: %v, want Unavailable, full and marked not run", err)
	}
	if n, err := d.Sessions().QueueDepth(ctx, 10); err != nil || n != 0 {
		t.Errorf("the queue holds %d entries (%v) after the refused append, want none", n, err)
	}

	insertBig := func(t *tx) error {
		_, err := t.exec(`INSERT INTO scratch VALUES (?)`, big)
		return err
	}
	got := batchOf(t, d, insertBig, insertBig)
	for i, err := range got {
		if !errs.Is(err, errs.Unavailable) || !errors.Is(err, errs.ErrNotRun) {
			t.Errorf("write %d of a batch with no room: %v, want Unavailable and marked not run", i, err)
		}
	}
	if rows := scratchRows(t, d); len(rows) != 0 {
		t.Errorf("scratch holds %d rows after the refused batch, want none", len(rows))
	}
}
