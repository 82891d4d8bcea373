package sqlite

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/sessions"
)

// The writer leaves checkpoints to the checkpointer: its own automatic
// checkpoint is far off, yet what the commits logged reaches the
// database file soon after.
func TestCheckpointsRunOffTheWriter(t *testing.T) {
	ctx := context.Background()
	d, _, path := testDB(t)
	var auto int
	if err := d.wconn.QueryRowContext(ctx, `PRAGMA wal_autocheckpoint`).Scan(&auto); err != nil {
		t.Fatal(err)
	}
	if auto != walSafetyPages {
		t.Fatalf("writer's wal_autocheckpoint = %d, want %d", auto, walSafetyPages)
	}
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()

	// Each entry takes a few pages: well past checkpointPages in all,
	// well short of the writer's own mark.
	text := strings.Repeat("x", 10<<10)
	const entries = 2 * checkpointPages / 3
	for i := range entries {
		mustAppend(t, d.Sessions(), sessions.Inbound{Conv: "t:" + strconv.Itoa(i), Text: text})
	}
	want := before + int64(entries)*int64(len(text))/2
	testkit.EventuallyWithin(t, 10*time.Second, func() (bool, string) {
		got := size()
		return got >= want, fmt.Sprintf("database file is %d bytes after %d entries of %d bytes, want at least %d: nothing was checkpointed", got, entries, len(text), want)
	})
}
