package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"time"
)

// SQLite copies the write-ahead log back into the database file (a
// checkpoint) every so many pages, and by default the commit that crosses
// the mark does it: that commit, and every write queued behind it, waits
// for the copy and its fsync, tens of times a commit's cost. The writer
// connection leaves that to a checkpointer instead, which runs passive
// checkpoints on a connection of its own while the writer goes on
// appending to the log.
const (
	// checkpointPages is when the checkpointer copies the log back: the
	// writer counts the pages its commits add, roughly, and kicks it
	// past this many.
	checkpointPages = 1000
	// walSafetyPages is the writer's own automatic checkpoint, kept for
	// a checkpointer that cannot keep up (a long reader holding the log,
	// say), so the log never grows without bound.
	walSafetyPages = 20 * checkpointPages
	// checkpointPause is the least time between two checkpoints, so that
	// under heavy load they neither run back to back nor compete with
	// the writer's own fsyncs more than needed.
	checkpointPause = 50 * time.Millisecond
)

// checkpointer runs the passive checkpoints the writer asks for.
type checkpointer struct {
	db   *sql.DB // one connection, used only by run
	kick chan struct{}
	quit chan struct{}
	done chan struct{}
	// failing is set while checkpoints fail. Only run touches it.
	failing bool
}

func newCheckpointer(db *sql.DB) *checkpointer {
	return &checkpointer{
		db:   db,
		kick: make(chan struct{}, 1),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
}

func (c *checkpointer) start() { go c.run() }

// request asks for a checkpoint without waiting for it; requests made
// while one is pending are one request.
func (c *checkpointer) request() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	pause := time.NewTimer(0)
	defer pause.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-c.kick:
		}
		c.checkpoint()
		pause.Reset(checkpointPause)
		select {
		case <-c.quit:
			return
		case <-pause.C:
		}
	}
}

// checkpoint copies what it can of the log into the database file. A
// passive checkpoint never waits for a lock and stops at frames a reader
// still needs; the next one picks up from there.
// A failure is logged once until a checkpoint works again.
func (c *checkpointer) checkpoint() {
	var busy, logged, copied int64
	err := c.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logged, &copied)
	switch {
	case err != nil && !c.failing:
		slog.Warn("sqlite checkpoint failed; past its limit the writer checkpoints the log itself", "err", err, "limit_pages", walSafetyPages)
	case err == nil && c.failing:
		slog.Info("sqlite checkpoints work again")
	}
	c.failing = err != nil
}

// stop waits for a checkpoint in progress and ends run.
func (c *checkpointer) stop() {
	close(c.quit)
	<-c.done
}
