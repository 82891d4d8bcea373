package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestQueryPlans keeps the hot statements on their indexes: a plan that
// falls back to scanning a whole table makes every operation slower as the
// database grows.
func TestQueryPlans(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "herald.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, tc := range []struct {
		desc  string
		query string
		args  []any
	}{
		{"claim pick", sqlClaimPick, []any{1}},
		{"next pick", sqlNextPick, []any{"c", 1}},
		{"ready any", sqlReadyAny, []any{1}},
		{"conv ready", sqlConvReady, []any{"c", 1}},
		{"conv held", sqlConvHeld, []any{"c", 1}},
		{"grant", sqlClaimGrant, []any{"c", "w", 1, 1, 1, 1}},
		{"turn running", sqlTurnRunning, []any{"c", 1}},
		{"append grant", sqlAppendGrant, []any{"c", "w", 1, 1, 1, 1}},
		{"release", sqlRelease, []any{"c", 1, 1}},
		{"finish release", sqlFinishRelease, []any{"c", 1, 1, 1}},
		{"conversations", sqlConvList, []any{1, 10}},
		{"conversations before", sqlConvListBefore, []any{1, 10, 5, "c"}},
		{"conversation", sqlConvOne, []any{1, "c"}},
		{"history tail", sqlHistoryTail, []any{"c", 100}},
		{"history count", sqlHistoryCount, []any{"c"}},
		{"turn history", sqlTurnHistory, []any{"c"}},
		{"dedupe get", sqlDedupeGet, []any{"c", "m", 1}},
		{"dedupe prune", sqlDedupePrune, []any{1, 10}},
		{"outbox due", sqlOutboxDue, []any{"telegram", 1, 10, 0, 0}},
		{"outbox waiting", sqlOutboxWaiting, []any{"w", 1, 10}},
		{"outbox waiting any", sqlOutboxWaitingAny, []any{"w", 1}},
		{"outbox after", sqlOutboxAfter, []any{"telegram:1", 1}},
		{"outbox unpark", sqlOutboxUnpark, []any{"telegram:1", 1}},
		{"outbox due any", sqlOutboxDueAny, []any{"telegram", 1}},
		{"outbox dead list", sqlOutboxDeadList, []any{10}},
		{"outbox key prune", sqlOutboxKeyPrune, []any{1, 10}},
		{"history list", sqlHistoryList, []any{"c"}},
		{"history drop", sqlHistoryDrop, []any{"c", 2}},
		{"expire leases", sqlExpireLeases, []any{1}},
		{"entry absorb", sqlEntryAbsorb, []any{1, "c", 2}},
		{"timeline cursor", sqlTimelineCursor, []any{"c", "m"}},
		{"timeline read", sqlTimelineRead, []any{"c", 0, 10}},
		{"timeline end", sqlTimelineEnd, []any{"c"}},
		{"timeline trim", sqlTimelineTrim, []any{"c", 100}},
		{"signal prune", sqlSignalPrune, []any{1, 10}},
		{"signals end", sqlSignalsEnd, nil},
		{"signals read", sqlSignalsRead, []any{0, 10}},
		{"note delete", sqlNoteDelete, []any{1, "u"}},
		{"notes list", sqlNotesList, []any{"u"}},
		{"cron update", sqlCronUpdate, []any{"j", 1, 2, 1, "{}"}},
		{"cron update body", sqlCronUpdateBody, []any{"j", 1, 2, 1, "{}"}},
		{"cron due", sqlCronDue, []any{1, 10}},
		{"cron run start", sqlCronRunStart, []any{"r", "j", 1, "{}"}},
		{"cron run end", sqlCronRunEnd, []any{"r", "j", 1, "{}"}},
		{"cron run trim", sqlCronRunTrim, []any{"j", 50}},
		{"cron runs", sqlCronRuns, []any{"j", 50}},
		{"once claim", sqlOnceClaim, []any{"f", "o", 1, 1}},
		{"once done", sqlOnceDone, []any{"f", 1, 1}},
	} {
		rows, err := d.rdb.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+tc.query, tc.args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.desc, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		t.Logf("%s:\n  %s", tc.desc, strings.Join(plan, "\n  "))
		for _, p := range plan {
			// "SCAN c" walks the one-row subquery Claim picks the
			// conversation with, and the turn's history joins to;
			// "SCAN CONSTANT ROW" makes that row.
			if strings.HasPrefix(p, "SCAN ") && !strings.Contains(p, "USING") && p != "SCAN c" && p != "SCAN CONSTANT ROW" {
				t.Errorf("%s scans a table: %s", tc.desc, p)
			}
		}
	}
}
