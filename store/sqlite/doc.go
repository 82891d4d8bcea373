// Package sqlite is herald's embedded store: one SQLite file (WAL mode,
// synchronous=FULL by default) that serves the sessions, outbox, lease and
// delegation store interfaces, through modernc.org/sqlite, so herald needs
// no cgo.
//
// # Writes
//
// Every write runs on one connection, driven by one goroutine (writer.go).
// SQLite admits one writer at a time anyway; queueing in Go is cheaper than
// sleeping in SQLite's busy handler, and it allows group commit: the
// operations that arrive while a transaction is being written run together
// in the next one. They run without a savepoint each; when one fails, the
// transaction is rolled back and the batch run again with a savepoint for
// each operation, so a failing operation undoes only itself (an
// operation's function may run twice, and sets its results anew each
// time). With synchronous=FULL a commit costs an fsync, so under load
// many turns share one. A write that finds the writer idle and nothing
// queued is committed on its caller's goroutine instead, which spares it
// two hand-offs between goroutines; commits still follow one another. Where
// the platform has fdatasync(2), commits sync with it, as SQLite's own
// builds do (the transpiled library defaults to fsync): the file's data
// and size reach the disk, its timestamps need not. Transactions start with BEGIN IMMEDIATE, since
// nearly all of them read before they write, and a process sharing the file
// waits up to the busy timeout for the lock. Reads that need no lock
// (History, Meta, outbox listings, timeline, signals, notes and
// delegations, the
// "anything ready?" check idle workers poll with) go to a small pool of
// read-only connections and never wait behind writes.
//
// Lease and claim bookkeeping (Claim, ClaimMany, Next, Renew, Release,
// outbox Claim and Postpone, ownership leases, a child's Claim and Renew,
// ClaimCompletions, a kanban card's claim: Change.Bookkeeping) and
// signals commit with
// synchronous=NORMAL: a power cut may lose such a commit, never corrupt
// the file, and what it loses is harmless — see commitMode. Everything a person sent or is owed (entries,
// acks, replies, history, metadata, dead letters, the timeline, notes)
// waits for the disk.
//
// Copying the log back into the database file (a checkpoint) is left to a
// goroutine with a connection of its own (checkpoint.go), which runs a
// passive checkpoint once the commits since the last one wrote about a
// thousand pages. SQLite would otherwise make the commit that crosses the
// mark do it, and every write queued behind that commit would wait for the
// copy and its fsync. The writer keeps SQLite's own automatic checkpoint,
// at twenty times the distance, for when the checkpointer cannot keep up.
//
// # Time
//
// Every timestamp is Unix nanoseconds from the injected clock, written into
// rows: enqueue times, ready times, lease and claim expiry, dedupe ages,
// outbox due times. Nothing compares against the machine's own clock, so a
// test moves time by hand and every process sharing the file agrees.
//
// # Schema
//
// The schema is created and upgraded by the steps in schema.go, with
// PRAGMA user_version recording how far a file has come.
//
// conversations has one row per conversation ever seen, never deleted,
// because lease_token must only ever grow. Its columns:
//
//   - lease_worker, lease_token, lease_expires: the lease. lease_expires is
//     NULL when nobody holds it. Every write under a lease matches
//     lease_token (and a held lease) in the same transaction, so a worker
//     whose lease was taken over or released commits nothing (fencing).
//     An expired lease nobody took over still works for its holder.
//   - due, due_seq: the ready index. due is when Claim may take the
//     conversation: the time it became ready while nobody holds it, the
//     lease expiry while somebody does (so a dead holder's conversation
//     comes back by itself), NULL when there is nothing to do. Claim takes
//     the smallest (due, due_seq) at or before now from a partial index of
//     the non-NULL rows: one seek, however many conversations exist.
//     due_seq breaks ties between conversations due at the same instant in
//     the order they became due. Append sets due only when it is NULL;
//     Release and Finish with release set it to now when entries remain
//     (behind those already waiting), NULL otherwise. A conversation Claim
//     finds due but empty gets due NULL and Claim tries the next.
//   - delivered, deliveries: the entry handed to a lease holder and not
//     acked yet, and how many holders it was handed to. A conversation has
//     at most one: Claim and Next hand it out again until it is acked, so
//     a dead worker's entry goes to the next holder first.
//   - delivered_at: when the entry was handed out under the lease (a
//     grant, or Next handing out a new one), for the running turn Meta
//     tells.
//
// Append reads the conversation's metadata (AppendResult.Meta) from the
// read pool after its transaction committed, for the router's busy-input
// mode and running-turn check; a failed read leaves Meta nil, and the
// entry is queued all the same. Meta makes the running turn
// (sessions.ConvMetaTurn) from the conversation row's live lease, the
// entry it has delivered and delivered_at, joined with that entry's
// body: nothing writes a mark, and one a process of an earlier version
// stored is left out.
//
// AppendClaim runs Append's statements and, in the same transaction, one
// conditional upsert of the conversation row that grants the lease as
// Claim does (the same SET, so the same token bump and ready time), and
// only when the new entry is the conversation's only one and no lease on
// it is live at now. When that upsert matches nothing, the conversation
// is made ready as Append makes it. The claimed turn's history is read
// after the commit, as a claim's is, and the metadata is not read: no
// turn was running for the router to tell.
//
// entries holds the turn queue: one row per unacked entry with its lane
// (sessions.Inbound.Lane) and the encoded Inbound. The index (conv, lane,
// id) gives each conversation's next entry, lowest lane first and FIFO
// within a lane, in one seek. ids come from AUTOINCREMENT so an id is never
// reused, not even after the entry is acked.
//
// dedupe remembers (conv, message_id) → first entry id for the dedupe
// window. Append checks and records it in the transaction that inserts the
// entry; a duplicate adds nothing and returns the first id. Expired rows
// are ignored by the check and pruned a few hundred at a time every few
// dozen writes, through the index on seen_at.
//
// Finish deletes the entries the turn absorbed (Finish.Absorbed) in its
// transaction, before it acks: each must be a queued entry of the
// conversation other than the one acked, or the whole Finish rolls back
// with NotFound. They go first so that the ready index Finish computes
// counts only what is left.
//
// FinishAndClaim runs Finish's statements and then Claim's in one
// transaction, committed as Finish's is (waiting for the disk): a Finish
// that fails rolls the claim back with it, and a worker moving from turn
// to turn pays one commit instead of two. ClaimMany runs Claim's
// statements up to n times in one transaction. A claimed turn's history
// (Turn.History) is read from the read pool after the claim committed, so
// the read keeps no writer waiting; Finish.Meta is written in Finish's
// transaction.
//
// history is each conversation's messages, one JSON row each, in id
// order. meta is a key/value table per conversation.
//
// timeline is what was delivered to each conversation, as the local API
// shows it: one row per item (its meta and the files it sent as JSON,
// empty for none), the cursor an AUTOINCREMENT id (so cursors
// grow and are never reused), read in pages through the (conv, cursor)
// index. The unique index (conv, item_id) makes a repeated append a no-op
// that returns the first cursor. The timeline grows with what herald
// delivers, as history does, unless Limits.TimelineMax bounds it
// (store.timeline_max_items): then the append that adds an item deletes,
// in its transaction, the conversation's items older than the newest
// TimelineMax (at most 1000 an append), through the same index. Cursors
// do not change, since AUTOINCREMENT never hands one out twice.
//
// signals is the short log of stop, interrupt and steer requests, and of
// a domain's own kinds (delegation.stop), that every process tails (a
// steer names its entry, with the entry's text and message id; a
// domain's signal names its target). Its cursor is an AUTOINCREMENT id;
// a tailer starting "from now" gets the largest one (0 for an empty log,
// below any later signal). Each Signal also deletes, through the index on at, up to
// a few hundred signals older than signalsKeep (an hour), so the log holds
// about the last hour.
//
// notes holds the agent's notes about each user (the memory tool), keyed
// by user rather than conversation so that they outlive /new, listed
// oldest first through the (user_key, id) index. A note is named by its
// key, the id its writer chose (notes.Add; a note from before
// schema version 16 by its row id), unique per user.
//
// outbox holds outbound messages: the encoded outbox.Message, the columns
// Claim filters on (platform, state pending|claimed|dead, next_attempt,
// claim_expires) and the ones the store keeps up to date (claim_token,
// attempts, last_error, created_at). A message is due when next_attempt has
// passed and it is pending or its claim expired; Claim reads each wanted
// platform's due rows from the (platform, next_attempt) index in due order,
// merges them, and bumps claim_token on each row it takes. A finish with a
// Handoff inserts the messages due now claimed by the handoff's worker,
// with the token a first claim gets (1). Ack, Release,
// Postpone and Dead match the claim token, so a claim that ran out and was
// taken by another worker changes nothing. AckAll acks a batch in one
// transaction, each message checked as Ack checks it, so one refused ack
// writes nothing of its own and stops none of the others. Dead rows leave
// the due index and are listed through their own partial index.
//
// Since schema version 15 a target's messages leave in id order: Claim
// takes a due row only when the (target, id) index, which leaves dead rows
// out, finds no earlier row to its target that the claiming worker does
// not hold under a live claim, so usually one index probe that finds
// nothing; a row behind one given back until later gets that later
// next_attempt, so it stops filling the due reads. A handed message is
// inserted claimed under the same test, else due. parts holds how far a
// message sent in parts got (outbox.Parts, encoded; NULL for none),
// written under the claim token. outbox_workers holds the delivery
// workers' heartbeats (worker, expires, and the ttl each beat holds);
// Claim first renews the claimer's own heartbeat by its ttl, then ends the
// live claims of every other worker whose heartbeat ran out (a scan of
// outbox by claim_worker, rare: a worker died) and forgets it. A claim of a row
// still in state claimed (its claim ran out or was ended) reports a
// resend.
//
// Since schema version 21 a row behind an earlier one that another worker
// holds under a live claim waits for that worker (waits_for) and leaves
// the due index: a backlog behind one claim is read once, not by every
// claim, and Claim reads window after window of due rows until it is full
// or none is left, so no claim comes back empty while a due row that no
// live claim holds up is there. The (waits_for, id) index gives the worker
// the rows that wait for it; taking a row makes the one after it to its
// target wait for the taker, and a settle of a row (Ack, Release, Postpone,
// Dead) lets the one after it go. A claim costs the due rows it reads
// (each waiting row once while it waits), those that wait for its worker
// (bounded as the due window is), and one (target, id) probe per row taken
// and per row settled.
// outbox_keys remembers idempotency keys for the dedupe window, also after
// the message was sent and deleted, so a retried Enqueue never sends twice.
//
// leases, added by the step to schema version 3, holds the ownership
// leases (package lease): one row per lease name with its holder,
// expires (Unix nanoseconds by the store's clock) and fencing token (the
// step to version 14). Acquire is one upsert that applies only for the
// same holder or over an expired row, so taking and renewing are one
// statement and a refusal writes nothing; Release expires the holder's
// row, keeping the token (lease.go).
//
// delegations, children and completions, added by the step to schema
// version 7, keep package delegation's records (delegation.go). Each has
// an AUTOINCREMENT seq beside its unique text id, so that what was
// written first sorts first and a seq is never reused.
//
//   - delegations: the conversation, created_at (the dispatch's own time,
//     else the clock's at its write) and the encoded Delegation without
//     its children. List reads it newest first through (conv, created_at)
//     or (created_at), seq breaking ties.
//   - children: one row per child, with its delegation and conversation,
//     idx (its task index), status, the claim (owner, token,
//     owner_expires: set while it runs), started_at and ended_at, the
//     child as dispatched (body), its last progress and its result, each
//     encoded. Claim takes the pending ones in seq order (dispatch order)
//     from the partial index of pending rows, each grant's token from the
//     one counter in claim_tokens, so a token is above every token granted
//     before; Renew and End match the token of a running row, so a claim
//     that was reaped (or never was) writes nothing, and StopPending
//     matches a pending row, which its end takes out of the partial index
//     Claim reads, so a stopped child is never claimed. Reap reads running
//     rows whose owner_expires has passed by the store's clock from the
//     partial index of running rows; Active counts, and List's active
//     query finds, a conversation's pending and running children through
//     the partial index of those.
//   - completions: one row per completion, state pending or delivered,
//     the claim (claim_worker, claim_token, which grows with each grant,
//     claim_expires), next_attempt, attempts, last_error, created_at,
//     delivered_at and the encoded Completion. A completion is due when
//     its pending row's next_attempt has passed; a claim moves
//     next_attempt to its expiry, so a claimed one leaves the due range of
//     the partial index until its claim runs out, and Retry moves it to
//     the retry time. Ack and Retry match a held claim's token.
//
// End, StopPending, and Reap for each child it ends, records the end and,
// when it completes the child's unit (delegation.CompletionFor, computed
// in Go on the delegation as read inside the same transaction), inserts
// the unit's completion: one transaction, so the last child of a unit
// makes its completion exactly once. StopPending reads the child and
// ends it in one write transaction, so against a Claim of the same child
// one of the two finds it pending and the other does not. A Reap ends its children in one transaction;
// two reapers, in one process or two sharing the file, take turns on the
// write lock, and the second finds the first's ends done. A dispatch
// written in a turn's commit (sessions.Finish.Writes, writes.go) runs
// Create's inserts inside the turn's transaction, after its lease check;
// an existing delegation or child id is a Conflict there too, and the
// whole commit rolls back.
package sqlite
