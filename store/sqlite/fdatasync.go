package sqlite

import (
	"sync"

	"modernc.org/sqlite"
)

var fdatasyncOnce sync.Once

// syncWithData makes SQLite commit with fdatasync(2) rather than fsync(2)
// where the platform has it. SQLite's own builds do so wherever their
// configure script finds fdatasync; the transpiled library defaults to
// fsync. fdatasync writes a file's data and the metadata needed to read it
// back (its size among them) but not its timestamps, so a commit is as
// durable and, where the timestamps cost a write of their own, waits for
// less. The switch is
// process-wide; where it is unavailable (macOS, Windows) commits keep
// SQLite's own way.
func syncWithData() {
	fdatasyncOnce.Do(func() { _, _ = sqlite.Fdatasync(true) })
}
