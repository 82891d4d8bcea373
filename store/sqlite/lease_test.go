package sqlite

import (
	"context"
	"testing"

	"github.com/heraldgw/herald/sessions"
)

// A file written before ownership leases existed (schema version 2) opens,
// keeps its data and gains the leases table.
func TestVersion2FileGainsLeases(t *testing.T) {
	ctx := context.Background()
	path := oldFile(t, 2, `INSERT INTO notes (user_key, text, at) VALUES ('telegram:1', 'likes tea', 1)`)
	d := openAt(t, path, nil, sessions.Limits{})
	var v int
	if err := d.rdb.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != len(migrations) {
		t.Errorf("user_version = %d, %v; want %d", v, err, len(migrations))
	}
	notes, err := d.Notes().Notes(ctx, "telegram:1")
	if err != nil || len(notes) != 1 || notes[0].Text != "likes tea" {
		t.Errorf("Notes after the upgrade = %+v, %v; want the note written before it", notes, err)
	}
	token, err := d.Leases().Acquire(ctx, "adapter:telegram", "p1", sessions.DefaultLeaseTTL)
	if err != nil || token == 0 {
		t.Errorf("Acquire after the upgrade = %v, %v; want a token", token, err)
	}
}
