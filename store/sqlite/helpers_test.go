package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/sessions"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testDB opens a store on a fresh file with a simulated clock.
func testDB(t *testing.T) (*DB, *clock.Fake, string) {
	t.Helper()
	clk := clock.NewFake(t0)
	path := filepath.Join(t.TempDir(), "herald.db")
	return openAt(t, path, clk, sessions.Limits{}), clk, path
}

// openAt opens the file at path; the test closes it at its end.
func openAt(t *testing.T, path string, clk clock.Clock, lim sessions.Limits) *DB {
	t.Helper()
	d, err := Open(path, Options{Clock: clk, Limits: lim})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func mustAppend(t *testing.T, s sessions.Store, in sessions.Inbound) sessions.AppendResult {
	t.Helper()
	res, err := s.Append(context.Background(), in)
	if err != nil {
		t.Fatalf("Append(%+v): %v", in, err)
	}
	return res
}

func mustClaim(t *testing.T, s sessions.Store, worker string, ttl time.Duration) *sessions.Turn {
	t.Helper()
	turn, err := s.Claim(context.Background(), worker, ttl)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if turn == nil {
		t.Fatalf("Claim by %s: nothing ready", worker)
	}
	return turn
}

func wantCode(t *testing.T, what string, err error, code errs.Code) {
	t.Helper()
	if !errs.Is(err, code) {
		t.Errorf("%s: got error %v, want code %s", what, err, code)
	}
}

// oldFile writes a database file as a herald of schema version v left it:
// the first v migrations, then stmts. It returns the file's path.
func oldFile(t *testing.T, v int, stmts ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "herald.db")
	old, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	all := append(slices.Clone(migrations[:v]), stmts...)
	for _, stmt := range append(all, fmt.Sprintf(`PRAGMA user_version = %d`, v)) {
		if _, err := old.Exec(stmt); err != nil {
			t.Fatalf("writing a version %d file: %v", v, err)
		}
	}
	return path
}
