package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations[i] brings a database from user_version i to i+1. A released
// step is never edited: a change to the schema is a new step, so a file
// written by any earlier herald opens and is upgraded in place.
var migrations = []string{
	// 0 → 1: the turn queue, session state and the outbox.
	`
CREATE TABLE conversations (
	conv          TEXT PRIMARY KEY,
	due           INTEGER,
	due_seq       INTEGER NOT NULL DEFAULT 0,
	lease_worker  TEXT NOT NULL DEFAULT '',
	lease_token   INTEGER NOT NULL DEFAULT 0,
	lease_expires INTEGER,
	delivered     INTEGER,
	deliveries    INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX conversations_due ON conversations (due, due_seq) WHERE due IS NOT NULL;

CREATE TABLE entries (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	conv        TEXT NOT NULL,
	lane        INTEGER NOT NULL,
	enqueued_at INTEGER NOT NULL,
	body        BLOB NOT NULL
);
CREATE INDEX entries_queue ON entries (conv, lane, id);

CREATE TABLE dedupe (
	conv       TEXT NOT NULL,
	message_id TEXT NOT NULL,
	entry_id   INTEGER NOT NULL,
	seen_at    INTEGER NOT NULL,
	PRIMARY KEY (conv, message_id)
) WITHOUT ROWID;
CREATE INDEX dedupe_seen ON dedupe (seen_at);

CREATE TABLE history (
	id   INTEGER PRIMARY KEY,
	conv TEXT NOT NULL,
	body BLOB NOT NULL
);
CREATE INDEX history_conv ON history (conv, id);

CREATE TABLE meta (
	conv  TEXT NOT NULL,
	key   TEXT NOT NULL,
	value TEXT NOT NULL,
	PRIMARY KEY (conv, key)
) WITHOUT ROWID;

CREATE TABLE outbox (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	platform      TEXT NOT NULL,
	target        TEXT NOT NULL,
	conv          TEXT NOT NULL,
	idem_key      TEXT NOT NULL,
	state         TEXT NOT NULL CHECK (state IN ('pending', 'claimed', 'dead')),
	next_attempt  INTEGER NOT NULL,
	claim_worker  TEXT NOT NULL DEFAULT '',
	claim_token   INTEGER NOT NULL DEFAULT 0,
	claim_expires INTEGER,
	attempts      INTEGER NOT NULL DEFAULT 0,
	last_error    TEXT NOT NULL DEFAULT '',
	created_at    INTEGER NOT NULL,
	body          BLOB NOT NULL
);
CREATE INDEX outbox_due ON outbox (platform, next_attempt) WHERE state <> 'dead';
CREATE INDEX outbox_dead ON outbox (id) WHERE state = 'dead';

CREATE TABLE outbox_keys (
	key     TEXT PRIMARY KEY,
	msg_id  INTEGER NOT NULL,
	seen_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX outbox_keys_seen ON outbox_keys (seen_at);
`,
	// 1 → 2: the timeline of delivered messages, the signals log and
	// per-user notes.
	`
CREATE TABLE timeline (
	cursor  INTEGER PRIMARY KEY AUTOINCREMENT,
	conv    TEXT NOT NULL,
	item_id TEXT NOT NULL,
	kind    TEXT NOT NULL,
	text    TEXT NOT NULL,
	at      INTEGER NOT NULL
);
CREATE UNIQUE INDEX timeline_item ON timeline (conv, item_id);
CREATE INDEX timeline_conv ON timeline (conv, cursor);

CREATE TABLE signals (
	cursor   INTEGER PRIMARY KEY AUTOINCREMENT,
	conv     TEXT NOT NULL,
	kind     TEXT NOT NULL,
	entry_id TEXT NOT NULL,
	text     TEXT NOT NULL,
	at       INTEGER NOT NULL
);
CREATE INDEX signals_at ON signals (at);

CREATE TABLE notes (
	id       INTEGER PRIMARY KEY AUTOINCREMENT,
	user_key TEXT NOT NULL,
	text     TEXT NOT NULL,
	at       INTEGER NOT NULL
);
CREATE INDEX notes_user ON notes (user_key, id);
`,
	// 2 → 3: ownership leases (package lease).
	`
CREATE TABLE leases (
	name    TEXT PRIMARY KEY,
	holder  TEXT NOT NULL,
	expires INTEGER NOT NULL
) WITHOUT ROWID;
`,
	// 3 → 4: what a timeline item replies to ('' for items from before,
	// and for those that reply to nothing).
	`
ALTER TABLE timeline ADD COLUMN reply_to TEXT NOT NULL DEFAULT '';
`,
	// 4 → 5: the message id of a steered entry ('' for signals from
	// before, and for the other kinds).
	`
ALTER TABLE signals ADD COLUMN message_id TEXT NOT NULL DEFAULT '';
`,
	// 5 → 6: what inside the conversation a domain's signal is for ('' for
	// signals from before, and for the sessions' own kinds).
	`
ALTER TABLE signals ADD COLUMN target TEXT NOT NULL DEFAULT '';
`,
	// 6 → 7: delegations, their children and their completions (package
	// delegation), and the counter child claims take their tokens from.
	`
CREATE TABLE delegations (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT NOT NULL UNIQUE,
	conv       TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	body       BLOB NOT NULL
);
CREATE INDEX delegations_conv ON delegations (conv, created_at);
CREATE INDEX delegations_created ON delegations (created_at);

CREATE TABLE children (
	seq           INTEGER PRIMARY KEY AUTOINCREMENT,
	id            TEXT NOT NULL UNIQUE,
	delegation    TEXT NOT NULL,
	conv          TEXT NOT NULL,
	idx           INTEGER NOT NULL,
	status        TEXT NOT NULL,
	owner         TEXT NOT NULL DEFAULT '',
	token         INTEGER NOT NULL DEFAULT 0,
	owner_expires INTEGER,
	started_at    INTEGER NOT NULL DEFAULT 0,
	ended_at      INTEGER NOT NULL DEFAULT 0,
	body          BLOB NOT NULL,
	progress      BLOB,
	result        BLOB
);
CREATE INDEX children_delegation ON children (delegation, idx);
CREATE INDEX children_pending ON children (seq) WHERE status = 'pending';
CREATE INDEX children_running ON children (owner_expires) WHERE status = 'running';
CREATE INDEX children_active ON children (conv, delegation) WHERE status IN ('pending', 'running');

CREATE TABLE completions (
	seq           INTEGER PRIMARY KEY AUTOINCREMENT,
	id            TEXT NOT NULL UNIQUE,
	delegation    TEXT NOT NULL,
	conv          TEXT NOT NULL,
	state         TEXT NOT NULL CHECK (state IN ('pending', 'delivered')),
	claim_worker  TEXT NOT NULL DEFAULT '',
	claim_token   INTEGER NOT NULL DEFAULT 0,
	claim_expires INTEGER,
	next_attempt  INTEGER NOT NULL,
	attempts      INTEGER NOT NULL DEFAULT 0,
	last_error    TEXT NOT NULL DEFAULT '',
	created_at    INTEGER NOT NULL,
	delivered_at  INTEGER NOT NULL DEFAULT 0,
	body          BLOB NOT NULL
);
CREATE INDEX completions_due ON completions (next_attempt, seq) WHERE state = 'pending';
CREATE INDEX completions_delegation ON completions (delegation, seq);

CREATE TABLE claim_tokens (
	name  TEXT PRIMARY KEY,
	token INTEGER NOT NULL
) WITHOUT ROWID;
`,
	// 7 → 8: cron jobs and their runs (package cronjobs), and the
	// once-only claims on fires (lease.OnceStore). A job or a run is kept
	// whole, encoded, beside the columns it is looked up by; due_at is
	// NULL for a job that wants no fire (Job.DueAt is zero).
	`
CREATE TABLE cron_jobs (
	id      TEXT PRIMARY KEY,
	version INTEGER NOT NULL,
	due_at  INTEGER,
	job     BLOB NOT NULL
);
CREATE INDEX cron_jobs_due ON cron_jobs (due_at) WHERE due_at IS NOT NULL;

CREATE TABLE cron_runs (
	id         TEXT PRIMARY KEY,
	job        TEXT NOT NULL,
	started_at INTEGER NOT NULL,
	run        BLOB NOT NULL
);
CREATE INDEX cron_runs_job ON cron_runs (job, started_at, id);

CREATE TABLE once_fires (
	id      TEXT PRIMARY KEY,
	owner   TEXT NOT NULL,
	token   INTEGER NOT NULL,
	expires INTEGER NOT NULL,
	done    INTEGER NOT NULL DEFAULT 0,
	done_at INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX once_fires_stale ON once_fires (expires) WHERE done = 0;
CREATE INDEX once_fires_done ON once_fires (done_at) WHERE done = 1;
`,
	// 8 → 9: kanban boards (package kanban). A card, a comment, a run,
	// an event and a subscription are kept whole, encoded, beside the
	// columns they are looked up and ordered by; the board's event log
	// is ordered by seq, the cursor the store hands out.
	`
CREATE TABLE kanban_boards (
	slug  TEXT PRIMARY KEY,
	board BLOB NOT NULL
) WITHOUT ROWID;

CREATE TABLE kanban_cards (
	id         TEXT PRIMARY KEY,
	board      TEXT NOT NULL,
	status     TEXT NOT NULL,
	priority   INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	idem_key   TEXT NOT NULL,
	version    INTEGER NOT NULL,
	card       BLOB NOT NULL
);
CREATE INDEX kanban_cards_board ON kanban_cards (board, status, priority DESC, created_at, id);
CREATE UNIQUE INDEX kanban_cards_key ON kanban_cards (board, idem_key) WHERE idem_key != '';

CREATE TABLE kanban_links (
	parent TEXT NOT NULL,
	child  TEXT NOT NULL,
	PRIMARY KEY (parent, child)
) WITHOUT ROWID;
CREATE INDEX kanban_links_child ON kanban_links (child, parent);

CREATE TABLE kanban_comments (
	id      TEXT PRIMARY KEY,
	card    TEXT NOT NULL,
	at      INTEGER NOT NULL,
	comment BLOB NOT NULL
);
CREATE INDEX kanban_comments_card ON kanban_comments (card, at, id);

CREATE TABLE kanban_runs (
	id      TEXT PRIMARY KEY,
	card    TEXT NOT NULL,
	started INTEGER NOT NULL,
	run     BLOB NOT NULL
);
CREATE INDEX kanban_runs_card ON kanban_runs (card, started, id);

CREATE TABLE kanban_events (
	seq   INTEGER PRIMARY KEY AUTOINCREMENT,
	board TEXT NOT NULL,
	card  TEXT NOT NULL,
	event BLOB NOT NULL
);
CREATE INDEX kanban_events_board ON kanban_events (board, seq);
CREATE INDEX kanban_events_card ON kanban_events (card, seq);

CREATE TABLE kanban_subscriptions (
	id      TEXT PRIMARY KEY,
	board   TEXT NOT NULL,
	version INTEGER NOT NULL,
	sub     BLOB NOT NULL
);
CREATE INDEX kanban_subscriptions_board ON kanban_subscriptions (board, id);
`,
	// 9 → 10: cards' attachments (kanban.Attachment), kept whole,
	// encoded, one row a card and name; the files are on disk.
	`
CREATE TABLE kanban_attachments (
	card       TEXT NOT NULL,
	name       TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	attachment BLOB NOT NULL,
	PRIMARY KEY (card, name)
) WITHOUT ROWID;
`,
	// 10 → 11: the session controllers' states (controllers.State), one
	// row a conversation, kind and id, with a rowid because a state's
	// data may be large; due_at (Unix nanoseconds) is NULL for a state
	// that does not fire on time, which the partial index leaves out.
	`
CREATE TABLE controllers (
	conv       TEXT NOT NULL,
	kind       TEXT NOT NULL,
	id         TEXT NOT NULL,
	data       BLOB NOT NULL,
	due_at     INTEGER,
	version    INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (conv, kind, id)
);
CREATE INDEX controllers_due ON controllers (due_at) WHERE due_at IS NOT NULL;
`,
	// 11 → 12: a timeline item's meta (sessions.TimelineItem.Meta), as
	// JSON; '' for items from before, and for those with none.
	`
ALTER TABLE timeline ADD COLUMN meta TEXT NOT NULL DEFAULT '';
`,
	// 12 → 13: a child's steers (delegation.Child.Steers), a JSON array
	// of strings; NULL for a child never steered.
	`
ALTER TABLE children ADD COLUMN steers BLOB;
`,
	// 13 → 14: the model's credential pools (llm.KeyState), one row a
	// pool and key id; cooling_until in Unix nanoseconds, 0 when not
	// cooling.
	`
CREATE TABLE pool_keys (
	pool          TEXT NOT NULL,
	id            TEXT NOT NULL,
	cooling_until INTEGER NOT NULL DEFAULT 0,
	reason        TEXT NOT NULL DEFAULT '',
	dead_for      TEXT NOT NULL DEFAULT '',
	uses          INTEGER NOT NULL DEFAULT 0,
	last_use      INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (pool, id)
) WITHOUT ROWID;
`,
	// 14 → 15: the outbox's order per target (each target's messages by
	// id, to find the earlier ones a claim must wait for), how far a
	// message sent in parts got (outbox.Parts, encoded; NULL for none),
	// and the heartbeats of the delivery workers (outbox.Store.Beat), by
	// which a dead worker's claims end at once.
	`
ALTER TABLE outbox ADD COLUMN parts BLOB;
CREATE INDEX outbox_target ON outbox (target, id) WHERE state <> 'dead';
CREATE TABLE outbox_workers (
	worker  TEXT PRIMARY KEY,
	expires INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX outbox_workers_expires ON outbox_workers (expires);
`,
	// 15 → 16: a note's id as its writer named it (notes.Add), so
	// that a turn names a note before its commit writes it; a note from
	// before keeps its row id as its name.
	`
ALTER TABLE notes ADD COLUMN key TEXT NOT NULL DEFAULT '';
UPDATE notes SET key = CAST(id AS TEXT);
CREATE UNIQUE INDEX notes_key ON notes (user_key, key);
`,
	// 16 → 17: an ownership lease's fencing token (package lease); a
	// lease from before counts as token 0, and its next grant is 1.
	`
ALTER TABLE leases ADD COLUMN token INTEGER NOT NULL DEFAULT 0;
`,
	// 17 → 18: the adapters' receive cursors (adapters.Cursors), one row a
	// platform and channel; at is Unix nanoseconds by the store's clock.
	`
CREATE TABLE cursors (
	platform TEXT NOT NULL,
	channel  TEXT NOT NULL,
	value    TEXT NOT NULL,
	at       INTEGER NOT NULL,
	PRIMARY KEY (platform, channel)
) WITHOUT ROWID;
CREATE INDEX cursors_at ON cursors (platform, at);
`,
	// 18 → 19: the key each conversation of a pool last used
	// (llm.PoolRead.Sticky), used_at in Unix nanoseconds, pruned past
	// llm.StickyTTL.
	`
CREATE TABLE pool_convs (
	pool    TEXT NOT NULL,
	conv    TEXT NOT NULL,
	id      TEXT NOT NULL,
	used_at INTEGER NOT NULL,
	PRIMARY KEY (pool, conv)
) WITHOUT ROWID;
CREATE INDEX pool_convs_used ON pool_convs (used_at);
`,
	// 19 → 20: how long a delivery worker's heartbeat holds (ttl, in
	// nanoseconds), so that its claims renew it as its beats do; 0 for a
	// heartbeat from before, which its claims leave as it is.
	`
ALTER TABLE outbox_workers ADD COLUMN ttl INTEGER NOT NULL DEFAULT 0;
`,
	// 20 → 21: the kanban lanes' states (kanban.LaneState: the breaker's
	// count, a pause), kept whole, encoded, one row a lane.
	`
CREATE TABLE kanban_lanes (
	lane    TEXT PRIMARY KEY,
	version INTEGER NOT NULL,
	state   BLOB NOT NULL
) WITHOUT ROWID;
`,
	// 21 → 22: the worker a message waits for (waits_for): set when a
	// claim finds it behind an earlier message that worker holds, cleared
	// when that one is settled. A message that waits leaves outbox_due, so
	// that a backlog behind one claim does not fill every claim's read;
	// outbox_waiting finds it for the worker it waits for.
	`
ALTER TABLE outbox ADD COLUMN waits_for TEXT NOT NULL DEFAULT '';
DROP INDEX outbox_due;
CREATE INDEX outbox_due ON outbox (platform, next_attempt) WHERE state <> 'dead' AND waits_for = '';
CREATE INDEX outbox_waiting ON outbox (waits_for, id) WHERE waits_for <> '';
`,
	// 22 → 23: file bytes no platform can give again (media.Store): an
	// upload through the local API, a file a message sends; at is Unix
	// nanoseconds by the store's clock.
	`
CREATE TABLE files (
	id   TEXT PRIMARY KEY,
	data BLOB NOT NULL,
	at   INTEGER NOT NULL
) WITHOUT ROWID;
`,
	// 23 → 24: the files a timeline item sent (sessions.TimelineItem.Files),
	// as JSON; '' for items from before, and for those with none.
	`
ALTER TABLE timeline ADD COLUMN files TEXT NOT NULL DEFAULT '';
`,
	// 24 → 25: approvals and the grants they leave (package approvals).
	// An approval is kept whole, encoded, beside the columns it is looked
	// up and ordered by: decision is '' while it is pending, decided_at
	// (Unix nanoseconds) 0; seq is the order of creation. A grant is one
	// row a scope and pattern: conv and session are both '' for an
	// always grant.
	`
CREATE TABLE approvals (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT NOT NULL UNIQUE,
	conv       TEXT NOT NULL,
	key        TEXT NOT NULL,
	decision   TEXT NOT NULL DEFAULT '',
	decided_at INTEGER NOT NULL DEFAULT 0,
	body       BLOB NOT NULL
);
CREATE INDEX approvals_pending ON approvals (conv, key, seq) WHERE decision = '';
CREATE INDEX approvals_pending_all ON approvals (seq) WHERE decision = '';
CREATE INDEX approvals_decided ON approvals (conv, decided_at, seq) WHERE decision <> '';
CREATE INDEX approvals_decided_all ON approvals (decided_at, seq) WHERE decision <> '';

CREATE TABLE approval_grants (
	conv    TEXT NOT NULL,
	session TEXT NOT NULL,
	pattern TEXT NOT NULL,
	body    BLOB NOT NULL,
	PRIMARY KEY (conv, session, pattern)
) WITHOUT ROWID;
`,
	// 25 → 26: the roll of gateway processes (package instances), one row
	// an instance, kept whole, encoded, with last_seen set; expires is
	// Unix nanoseconds by the store's clock.
	`
CREATE TABLE instances (
	id      TEXT PRIMARY KEY,
	expires INTEGER NOT NULL,
	body    BLOB NOT NULL
) WITHOUT ROWID;
`,
	// 26 → 27: when each conversation was last active (active_at, Unix
	// nanoseconds): its last append or commit, written by the statements
	// those already run; 0 for a conversation not active since, which
	// sessions.Conversations does not list until it is.
	`
ALTER TABLE conversations ADD COLUMN active_at INTEGER NOT NULL DEFAULT 0;
CREATE INDEX conversations_active ON conversations (active_at, conv) WHERE active_at > 0;
`,
	// 27 → 28: fewer pages a kanban write: a run keyed by its card and
	// id, without a rowid, an index of its id and one by card (a card's
	// runs are few, sorted as read); an event's seq its rowid without
	// AUTOINCREMENT, whose sqlite_sequence row each commit wrote (events
	// are never deleted, so the next rowid, one past the largest, never
	// gives a seq again). A card keeps its rowid: its row is large, and
	// without one the cards' pages split more often than the index of
	// their ids costs.
	`
CREATE TABLE kanban_runs_new (
	card    TEXT NOT NULL,
	id      TEXT NOT NULL,
	started INTEGER NOT NULL,
	run     BLOB NOT NULL,
	PRIMARY KEY (card, id)
) WITHOUT ROWID;
INSERT INTO kanban_runs_new SELECT card, id, started, run FROM kanban_runs;
DROP TABLE kanban_runs;
ALTER TABLE kanban_runs_new RENAME TO kanban_runs;

CREATE TABLE kanban_events_new (
	seq   INTEGER PRIMARY KEY,
	board TEXT NOT NULL,
	card  TEXT NOT NULL,
	event BLOB NOT NULL
);
INSERT INTO kanban_events_new SELECT seq, board, card, event FROM kanban_events;
DROP TABLE kanban_events;
ALTER TABLE kanban_events_new RENAME TO kanban_events;
CREATE INDEX kanban_events_board ON kanban_events (board, seq);
CREATE INDEX kanban_events_card ON kanban_events (card, seq);
`,
	// 28 → 29: the due jobs read in the order they are listed in, due
	// time then id, from the index alone: with due_at only, the jobs due
	// at one time were all read and sorted by id to list the first few,
	// every job of the slot for each read when thousands are due at once.
	`
DROP INDEX cron_jobs_due;
CREATE INDEX cron_jobs_due ON cron_jobs (due_at, id) WHERE due_at IS NOT NULL;
`,
	// 29 → 30: a card's runs and the index of its events are keyed by
	// the card's row (card_row, its integer key, given in the order the
	// cards are made) before its id, which is random: the runs and
	// events of the cards in play sit together on a few pages, where by
	// id each went to a page of its own. A run or event of no card (yet)
	// has card_row 0. The cards' rowids are kept, made their key so that
	// no VACUUM renumbers them.
	`
CREATE TABLE kanban_cards_new (
	row        INTEGER PRIMARY KEY,
	id         TEXT NOT NULL UNIQUE,
	board      TEXT NOT NULL,
	status     TEXT NOT NULL,
	priority   INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	idem_key   TEXT NOT NULL,
	version    INTEGER NOT NULL,
	card       BLOB NOT NULL
);
INSERT INTO kanban_cards_new SELECT rowid, id, board, status, priority, created_at, idem_key, version, card FROM kanban_cards;
DROP TABLE kanban_cards;
ALTER TABLE kanban_cards_new RENAME TO kanban_cards;
CREATE INDEX kanban_cards_board ON kanban_cards (board, status, priority DESC, created_at, id);
CREATE UNIQUE INDEX kanban_cards_key ON kanban_cards (board, idem_key) WHERE idem_key != '';

CREATE TABLE kanban_runs_new (
	card_row INTEGER NOT NULL,
	card     TEXT NOT NULL,
	id       TEXT NOT NULL,
	started  INTEGER NOT NULL,
	run      BLOB NOT NULL,
	PRIMARY KEY (card_row, card, id)
) WITHOUT ROWID;
INSERT INTO kanban_runs_new
	SELECT COALESCE((SELECT row FROM kanban_cards c WHERE c.id = r.card), 0), card, id, started, run FROM kanban_runs r;
DROP TABLE kanban_runs;
ALTER TABLE kanban_runs_new RENAME TO kanban_runs;

ALTER TABLE kanban_events ADD COLUMN card_row INTEGER NOT NULL DEFAULT 0;
UPDATE kanban_events SET card_row = COALESCE((SELECT row FROM kanban_cards c WHERE c.id = kanban_events.card), 0);
DROP INDEX kanban_events_card;
CREATE INDEX kanban_events_card ON kanban_events (card_row, card, seq);
`,
	// 30 → 31: when the entry handed out under a lease was handed out,
	// so that the conversation's metadata tells its running turn from
	// the lease (sessions.ConvMetaTurn) where a worker used to write a
	// mark. Marks written before are dropped.
	`
ALTER TABLE conversations ADD COLUMN delivered_at INTEGER;
DELETE FROM meta WHERE key = 'turn';
`,
}

// migrate brings the database on conn to the newest schema. Each step runs
// in its own transaction together with the user_version bump, so a crash
// mid-way leaves the file at a version it can resume from.
func migrate(ctx context.Context, conn *sql.Conn) error {
	var version int
	if err := conn.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	if version > len(migrations) {
		return fmt.Errorf("database schema version %d is newer than this herald knows (%d)", version, len(migrations))
	}
	for v := version; v < len(migrations); v++ {
		if err := migrateStep(ctx, conn, v); err != nil {
			return fmt.Errorf("migrating schema to version %d: %w", v+1, err)
		}
	}
	return nil
}

func migrateStep(ctx context.Context, conn *sql.Conn, v int) (err error) {
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.Background(), `ROLLBACK`)
		}
	}()
	// Another process may have migrated the file between our read of
	// user_version and taking the write lock.
	var current int
	if err := conn.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&current); err != nil {
		return err
	}
	if current > v {
		_, err := conn.ExecContext(ctx, `COMMIT`)
		return err
	}
	if _, err := conn.ExecContext(ctx, migrations[v]); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, v+1)); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, `COMMIT`)
	return err
}
