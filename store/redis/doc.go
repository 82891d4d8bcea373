// Package redis is herald's store for several gateway processes sharing
// one Redis server. It implements sessions.Store, outbox.Store,
// lease.Store and delegation.Store with
// Streams, sorted sets and Lua scripts. Every change that touches more
// than one key is one script that makes all its checks (the lease token,
// the entry, the claim) before its first write, so a call either happens
// whole or, refused, writes nothing.
//
// This package is the only one that knows key names. Every key starts
// with the prefix P (Options.Prefix, default "herald:"). A conversation's
// keys carry the conversation in a hash tag, P{conv}:…, so they live in
// one Redis Cluster slot; in the tag, '%' and '}' of the conversation key
// are written %25 and %7D.
//
// Per conversation:
//
//	P{conv}:q0 … P{conv}:q5  stream    the turn queue, one stream per lane
//	                                    (sessions.Inbound.Lane); fields d
//	                                    (the encoded inbound) and at
//	                                    (enqueued, ms). It holds the entries
//	                                    not yet delivered and the one
//	                                    delivered and not yet acked, which
//	                                    the state's pend names (see below),
//	                                    unless that one was delivered as it
//	                                    was appended and is kept in the
//	                                    state (pd, pat) instead; so a lane's
//	                                    next entry is its first
//	                                    (XRANGE - + COUNT 1) once pend is
//	                                    settled. Entry ids are
//	                                    "<seq>-<lane>". An acked entry is
//	                                    deleted (XDEL); an emptied stream
//	                                    stays for the next append. (A stream
//	                                    of an earlier layout may carry a
//	                                    consumer group "g", and its state a
//	                                    field groups: nothing reads them.)
//	P{conv}:state            hash      seq (entry id sequence); fence (the
//	                                    fencing counter, only increases: by
//	                                    one with each grant, and with each
//	                                    ClearHistory, see histcache.go);
//	                                    hl (the history's length, written
//	                                    with every append to it and by
//	                                    ClearHistory; absent in a state of
//	                                    an earlier layout);
//	                                    n0 … n5 (entries per lane, queued and
//	                                    delivered-unacked); lanes (a digit
//	                                    for each lane whose count is above
//	                                    zero, in no order, so one HMGET of a
//	                                    few fields tells whether there is
//	                                    work and where); pend (the entry delivered and not
//	                                    acked), dlv (how often it was
//	                                    delivered) and pst (when it was
//	                                    handed out under the lease, ms:
//	                                    Meta's running turn); worker, token (= fence
//	                                    at the grant) and exp (lease expiry,
//	                                    ms); pd and pat (the pending entry's
//	                                    data and enqueue time, when it was
//	                                    delivered as it was appended and so
//	                                    never went into its lane's stream).
//	                                    An ended lease or an acked entry
//	                                    leaves '' in its fields.
//	P{conv}:dd:<message id>  string    "<entry id>|<until ms>": dedupe of the
//	                                    platform message id; counts until
//	                                    "until" by the store's clock, and the
//	                                    key's own TTL (the dedupe window)
//	                                    collects it
//	P{conv}:hist             list      history, one encoded chat.Message
//	                                    per item, oldest first
//	P{conv}:meta             hash      metadata key → value
//	P{conv}:tl               stream    the timeline: what was delivered to
//	                                    the conversation, one entry per item
//	                                    with fields id (the item id), k
//	                                    (kind), t (text), at (appended,
//	                                    ms), r (what it replies to), m
//	                                    (meta, JSON) and f (the files it
//	                                    sent, JSON); the entry id is the cursor,
//	                                    made by the stream ('*') so it only
//	                                    grows
//	P{conv}:tlid             hash      item id → cursor, so appending an
//	                                    item again returns the first cursor
//	                                    and adds nothing; written in the
//	                                    same script as the stream entry
//	P{conv}:dlg              zset      the conversation's delegations,
//	                                    scored by creation (ms)
//	P{conv}:dlglive          zset      those of them with a child pending
//	                                    or running, scored the same
//	P{conv}:dlgact           set       the conversation's children pending
//	                                    or running (Active is its SCARD)
//
// Shared by all conversations:
//
//	Pready                   zset      the ready index: every conversation
//	                                    with work, and no other; member the
//	                                    conversation tag, score the time a
//	                                    Claim may take it (ms): when it
//	                                    became ready, or, while it is held,
//	                                    its lease's expiry, so a lease that
//	                                    runs out makes it ready without a
//	                                    sweep. Claim takes the first member
//	                                    unless its score is after now or its
//	                                    lease is live, in which case none is
//	                                    ready.
//
//	Pactive                  zset      the activity index: every
//	                                    conversation with its last
//	                                    activity (ms), the time of its last
//	                                    append (q_append) or commit
//	                                    (q_finish), each written by the
//	                                    script that makes it; member the
//	                                    conversation tag. conv_list reads a
//	                                    page of it newest first, with each
//	                                    conversation's lane counts and
//	                                    lease (HMGET of its state) and
//	                                    metadata (HGETALL), in one call
//	                                    (sessions.Conversations).
//
//	Psignals                 stream    the signals log every process tails:
//	                                    fields c (conversation), k (kind), e
//	                                    (entry id), t (text), m (message id
//	                                    of a steered entry), tg (target of a
//	                                    domain's signal; absent from those
//	                                    written before it), at (ms). Ids
//	                                    are "<ms>-<seq>" from the store's
//	                                    clock, one past the last id when
//	                                    that clock stands still or steps
//	                                    back, so that each XADD can trim
//	                                    exactly (MINID =) what is older than
//	                                    an hour by the same clock. Signals
//	                                    are few, so exact trimming is cheap.
//	                                    A cursor is the id of the last
//	                                    signal read (signals.go).
//
//	Pleasetoken:<name>       string    the counter an ownership lease's
//	                                    fencing tokens are drawn from (INCR,
//	                                    no TTL)
//	Please:<name>            string    an ownership lease (package lease),
//	                                    "<expiry ms>|<token>|<holder>"; the holder
//	                                    may take and renew it, another only
//	                                    once the expiry has passed by the
//	                                    store's clock. On the server's clock
//	                                    the key also expires by itself at
//	                                    that instant (PX); on an injected
//	                                    clock it has no TTL, and a takeover
//	                                    or Release replaces it (lease.go)
//	Pinstances               hash      the roll of gateway processes
//	                                    (package instances), a field an
//	                                    instance id: "<expiry ms>|<last seen
//	                                    ms>|<the encoded instance>" by the
//	                                    store's clock; inst_list drops the
//	                                    fields that ran out (instances.go)
//
// Per user:
//
//	Pnotes:{user}            stream    the agent's notes about a user (the
//	                                    memory tool), oldest first: fields t
//	                                    (text), at (ms) and k (the note id
//	                                    its writer chose; a note without k,
//	                                    from before, is named by its entry
//	                                    id); a delete looks the id up and
//	                                    XDELs its entry (lua/lib_notes.lua).
//	                                    The user is escaped like a
//	                                    conversation tag.
//
// (P is glued on as it is: with the default prefix these are
// herald:ready, herald:signals and, for an adapter's lease,
// herald:lease:adapter:telegram:polling:<bot id>.)
//
// Sharded layout (Options.Shards above 0, and every Redis Cluster;
// shards.go): each shard has the keys above after its own prefix,
// P{label}:, which hashes the keys of a shard to one slot. Where each
// key lives:
//
//	a conversation's keys    the conversation's shard:
//	                         P{label}:{conv}:state, …:q0 … :q5, :dd:<id>,
//	                         :hist, :meta, :tl, :tlid, :ctl (only the
//	                         shard's tag is hashed)
//	ready, active            one per shard, of the shard's conversations:
//	                         P{label}:ready, P{label}:active. Claim reads
//	                         every shard's head (ZRANGE, one round trip)
//	                         and claims in the shards holding the ones
//	                         ready longest (claim.go); QueueDepth sums
//	                         the shards; Conversations reads the same page
//	                         of every shard's activity index and merges
//	                         them (activity, then tag, both highest first)
//	P{label}:fwd             zset, one per shard: the writes of its
//	                         conversations' commits whose home is another
//	                         shard, until applied there (forward.go)
//	controllers' states      the conversation's shard: the state's hash
//	                         and its conversation's index as above, and
//	                         the due index P{label}:ctl:due of the shard's
//	                         states (controllers.go); DueControllers
//	                         merges every shard's
//	notes:{user}             the user's shard (of the user key)
//	file:<id>                the file id's shard
//	pool:{name}, …:conv:<c>  the pool name's shard, both
//	lease:<name>,            the lease name's shard, both (the acquire
//	leasetoken:<name>        script writes both)
//	P{label}:signals         one stream per shard, of the signals of
//	                         the shard's conversations (sig_append runs
//	                         in the conversation's shard). SignalsAfter
//	                         reads every shard's stream after its part of
//	                         the cursor (one round trip) and merges them
//	                         by id (ms, then seq; the lower shard on a
//	                         tie); a cursor is every shard's last id
//	                         read, in shard order, joined by ",", each
//	                         part moved only past the signals returned
//	                         from its shard (signals.go)
//	instances,               one key each, at P as in the one-server
//	cursors:<platform>       layout: a command or script on one key
//	                         touches one slot wherever it hashes
//
// A commit (q_finish) runs in its conversation's shard, and so do its
// writes: its outbox messages, dispatches, controllers' states and
// usage. The writes of a user's notes, files and cron jobs live
// elsewhere: they are forwarded (forward.go).
//
// The timeline and its id hash grow with what herald delivers, as history
// does, unless Limits.TimelineMax bounds them (store.timeline_max_items):
// then each append that takes the stream past the bound reads the oldest
// entries beyond it (at most 1000), drops their ids from the hash and the
// entries from the stream (XDEL), in the same script. Cursors do not
// change; one older than the oldest entry kept reads from the oldest.
//
// The pending entry: the lease makes one holder per conversation, so one
// delivered-unacked entry at most, and the state hash records it (pend,
// dlv) in the same script as the read that delivers it. A consumer group
// would only repeat that record, at the cost of its creation with each
// stream and of a write (propagated to the AOF) with each read, so the
// lanes are read with XRANGE. The entry stays in its stream until the
// finish that acks it deletes it; a Claim after a lost or released lease
// reads it again from there and counts the delivery in dlv. An entry that
// AppendClaim delivered as it was appended never enters its stream: its
// data and enqueue time wait in the state hash (pd, pat), written in the
// HSET that grants the lease, read from there by a Claim after a lost or
// released lease, and cleared by the finish's HSET, which saves the
// stream's XADD and XDEL on the path most turns take.
//
// Finish.Absorbed: q_finish looks every absorbed entry up (XRANGE
// on the lane its id names) before its first write and answers NOTFOUND,
// having written nothing, when one is not queued. The absorbed entries
// were never delivered, so they are only deleted (XDEL), and their lanes'
// counts drop in the same HSET as the acked entry's.
//
// The outbox is not per conversation. In a sharded layout (shards.go)
// each shard has the keys below after its own prefix, P{label}:, so
// Pob:… stands for the shard's: a message is in its conversation's shard
// when it has one (where that conversation's commits enqueue theirs),
// else in its target's (layout.of of "platform:chat[:thread]"); its id
// names its shard, and every key about it (its hash, its target's index,
// its idempotency key, the claim indexes it is in) is that shard's. The
// worker keys (ob:workers, ob:beats, ob:waits:<worker>) are kept in every
// shard the worker beats or claims in, which is every shard (Beat beats
// each, and a claim's ob_peek renews the heartbeat in each).
//
//	Pob:m:<id>               hash      one message: d (the encoded
//	                                    outbox.Message), p (platform), t
//	                                    (target), n (attempts), next (next
//	                                    attempt, ms), at (created, ms), e
//	                                    (last error), pg (outbox.Parts,
//	                                    encoded, once a part went), and
//	                                    while claimed: tok (claim token), exp
//	                                    (claim expiry, ms), w (worker); w
//	                                    left after a claim ran out tells the
//	                                    next claim it is a resend; wf (the
//	                                    worker it waits for, see ob:waits)
//	Pob:t:<target>           zset      a target's undelivered messages that
//	                                    are not dead, scored by sequence: a
//	                                    message is claimed or handed only
//	                                    while every earlier one here is held
//	                                    by the same worker under a live claim;
//	                                    one per shard, so the order holds
//	                                    among a target's messages of one
//	                                    shard (Unsent reads every shard's)
//	Pob:waits:<worker>       zset      messages that wait behind a live
//	                                    claim of worker, scored by sequence,
//	                                    out of due:<platform> (their hash
//	                                    names the worker in wf): read by that
//	                                    worker's claims; taking a message
//	                                    makes the one after it wait for the
//	                                    taker, settling one lets it go
//	Pob:workers              zset      delivery workers by heartbeat expiry
//	                                    (ms); ob_claim renews the claimer's
//	                                    by its ob:beats ttl, and ends the
//	                                    live claims of another whose
//	                                    heartbeat ran out (a scan of
//	                                    ob:handed and the claimed index of
//	                                    every platform in ob:platforms) and
//	                                    forgets it
//	Pob:beats                hash      worker → how long its beat holds (ms)
//	Pob:platforms            set       the platforms ob_claim claimed for
//	Pob:due:<platform>       zset      unclaimed messages of one platform
//	                                    scored by next attempt (ms)
//	Pob:claimed:<platform>   zset      messages of one platform claimed
//	                                    by ob_claim, scored by claim expiry
//	                                    (ms)
//	Pob:handed               zset      messages handed to a delivery
//	                                    worker as a finish enqueued them
//	                                    (Finish.Handoff), of every
//	                                    platform, scored by claim expiry
//	                                    (ms); in no other index until that
//	                                    has passed
//	Pob:all                  zset      undelivered messages but those in
//	                                    Pob:handed, scored by enqueue
//	                                    sequence
//	Pob:dead                 zset      dead letters scored by enqueue
//	                                    sequence
//	Pob:idem:<key>           string    "<id>|<until ms>": idempotency key,
//	                                    like the inbound dedupe
//	Pob:seq                  string    message id sequence; ids are the
//	                                    sequence zero-padded to 12 digits so
//	                                    equal due times sort in enqueue order,
//	                                    after the shard's label and '_' in
//	                                    a sharded layout ("3_000000000042");
//	                                    the indexes in enqueue order are
//	                                    scored by the sequence
//	Pob:tok                  string    claim token counter
//
// Delegations (package delegation), global but for the conversation's
// keys above. In the sharded layout (shards.go) a delegation, with its
// children, completions and the conversation's keys above, lives in the
// shard of the conversation that dispatched it, since the turn's commit
// that dispatches it runs there: every key below starts with that
// shard's prefix in place of P, and each index (pending, running, tok,
// all, live, due) is one per shard, holding that shard's delegations:
//
//	Pdlg:d:<id>              hash      one delegation: b (the encoded
//	                                    Delegation without its children), ct
//	                                    (its conversation's tag), ind ('1'
//	                                    when its completions are
//	                                    independent), n (children), left
//	                                    (children not ended yet), at
//	                                    (created, ms), orc ('1' for an
//	                                    orchestrator's workers, dlg_start),
//	                                    q (in the sharded layout, the
//	                                    dispatch's sequence: see below)
//	Pdlg:kids:<id>           list      its children's ids, in dispatch order
//	Pdlg:c:<id>              hash      one child: d (its delegation), i (task
//	                                    index), g (group), ct (conversation
//	                                    tag), t (the encoded child as
//	                                    dispatched), s (status), and o
//	                                    (owner), tok (claim token), exp (claim
//	                                    expiry, ms) while it runs, p (encoded
//	                                    progress), r (encoded result), st and
//	                                    en (started and ended, ms), sv (its
//	                                    steers, a JSON array) and sn (their
//	                                    count, which dlg_end checks), orc ('1'
//	                                    for an orchestrator's worker: its
//	                                    end adds no tokens to the
//	                                    conversation)
//	Pdlg:pending             list      pending children, oldest dispatch
//	                                    first: a dispatch pushes its children
//	                                    in order, a claim pops from the head,
//	                                    a stop (dlg_stop) removes its child;
//	                                    dlg_pending reads its head for a
//	                                    claim across shards, and drops the
//	                                    children there that are not pending
//	Pdlg:running             zset      running children scored by claim
//	                                    expiry (ms)
//	Pdlg:tok                 string    the child claim token counter: the
//	                                    last token granted. In the sharded
//	                                    layout every token is its shard's
//	                                    index modulo the shard count
//	                                    (lib_delegation.lua's dlg_token), so
//	                                    a claim names its child's shard and
//	                                    two shards never grant one token
//	Pdlg:all                 zset      every delegation, scored by creation
//	                                    (ms)
//	Pdlg:live                zset      delegations with a child pending or
//	                                    running, scored the same
//	Pdlg:cmp:<id>            hash      one completion: dl (delegation), u
//	                                    (unit), r (the results, a JSON array
//	                                    by task index), n (total), st
//	                                    (pending or delivered), next (due,
//	                                    ms), at (created, ms), dat (delivered,
//	                                    ms), a (attempts), e (last error), tok
//	                                    (claim token, one up per grant), and
//	                                    while claimed w (worker) and exp
//	                                    (claim expiry, ms); where it goes
//	                                    (conversation, user, origin, session)
//	                                    is read from its delegation's b
//	Pdlg:cmps:<delegation>   list      a delegation's completion ids, in the
//	                                    order they were made
//	Pdlg:due                 zset      pending completions scored by the
//	                                    time they are due (ms): created, the
//	                                    retry time, or while claimed the
//	                                    claim's expiry, so a claim that runs
//	                                    out makes it due again without a
//	                                    sweep
//
// A dispatch is the same write, lib_delegation.lua's DLGPUT, whether a
// turn's commit carries it (Finish.Writes: delegation.go's dispatchOp,
// run by q_finish after its lease check, with the script's time
// put in for a dispatch that has none) or Create writes it (dlg_create,
// which runs it only when neither the delegation's hash nor a child's
// exists, else answers Conflict, and when its children fit under its
// limit, else answers Full). DLGPUT counts the conversation's active set
// in the step that writes: in a commit, a dispatch that does not fit is
// written with its children ended rejected and their completions made.
// Start's dlg_start writes an orchestrator's workers as dlg_create
// writes a dispatch (same checks, same DLGPUT), then grants each child a
// claim as dlg_claim does, in the same step, and marks the delegation
// and its children orc: dlg_complete makes no completion for them, and
// dlg_end adds none of their tokens to the conversation's totals (the
// orchestrator's own include them). They stay in Pdlg:pending, running,
// and a claim drops them there as it drops any child not pending (in
// the sharded layout, dlg_pending drops them first).
// A turn's commit does not check that its ids are new: they
// are the turn's own, made with delegation.NewID. Equal creation times
// sort in no particular order. Each step under a claim is one script
// that checks it before its first write: dlg_claim (pop, grant a token
// from Pdlg:tok, index by expiry), dlg_renew, dlg_end (status, result,
// the indexes, and, when the child is the last of its unit to end, the
// unit's completion, computed in the script as delegation.CompletionFor
// computes it: the unit's children all ended with a result, the results
// ordered by task index), dlg_cmp_claim, dlg_cmp_ack and dlg_cmp_retry.
// StopPending's dlg_stop is the one end not under a claim: it checks
// that the child is pending, takes it out of Pdlg:pending, and records
// its end as dlg_end does (lib_delegation.lua's dlg_end_child, the same
// code, completion and all), so against a dlg_claim of the same child
// one of the two scripts finds it pending and the other does not.
// Reap reads the children whose claims ran out by the store's clock
// (dlg_expired), and ends each with dlg_end, which checks again that the
// claim is the same and ran out, so of several reapers one ends each
// child and a claim renewed in between is left alone. A child's
// statuses are written only by these scripts, pending and running or a
// terminal one End or StopPending was given (Go checks it is terminal),
// so the scripts take any other status for an end. Reads are one call
// each: dlg_read (a delegation, or a List page, with the children, at
// one instant), dlg_completions, and for Child and Active a plain HMGET
// or SCARD; End and StopPending read their child (HMGET) before their
// script, to name the result (StopPending answers a child it reads as
// not pending without one).
//
// Delegations across shards (delegation.go). A Claim reads every shard
// at once (dlg_pending: its token counter, and when its first pending
// children were dispatched: their delegation's creation ms, then its
// dispatch sequence q, which a process makes one up for each dispatch
// and above every one its claims read, so that dispatches of one
// millisecond in two shards are claimed in the order one process made
// them), picks the n oldest of all, and claims that many from each
// shard holding some, at once, each child given the least token it may
// get: above every counter read and rising in the order the claim
// answers, so a claim's tokens rise as one counter's would; a shard
// that had fewer to give than it showed (another claimer came between)
// is made up for by another pass, up to three. ClaimCompletions reads
// the head of every shard's Pdlg:due (ZRANGE, scores) and claims the
// soonest due of all the same way; Reap reads every shard's run-out
// children (dlg_expired) and ends the soonest expired of all, each in
// its shard. A List of every conversation reads every shard's newest
// and merges them, newest first (equal times by id down, as ZREVRANGE
// orders them); a conversation's List, Active and dispatches go to its
// shard. End and Renew go to the shard the claim's token names;
// AckCompletion and RetryCompletion to the shard of the completion's
// conversation. The ids of delegations and children are the delegation
// package's and name no shard: Child, Delegation, Steer, StopPending
// and Completions look in the shard this process remembers for the id
// (filled by its Create, Start, Claim and Reap calls and look-ups, 8192
// ids at most), else ask every shard at once and remember the one that
// has it. Ids are unique across shards only as delegation.NewID makes
// them: Create refuses an id in use in its own shard only.
//
// The outbox uses sorted sets rather than a stream because its entries are
// not consumed in arrival order: a failed send is retried later with
// backoff, a rate-limited one at the platform's retry-after, and a
// message for a platform with no adapter waits without being read at
// all. A sorted set per platform scored by the next attempt serves "due
// now for these platforms, oldest first" directly; a stream would need its
// entries re-added for every delay.
//
// Cron jobs, once-only claims, kanban boards and approvals list their
// keys in their files (cron.go, once.go, kanban.go, approvals.go), after
// P in the one-server layout. In the sharded layout (shards.go) each key
// is after the prefix of the shard it lives in:
//
//	cron job, its runs        the job's shard, pfxOf(job id); the index of
//	                          every job and the due index are one per
//	                          shard: Jobs, DueJobs (merged by due time,
//	                          then id, up to the limit) and NextDue read
//	                          every shard at once; Run, given a run id
//	                          only, asks every shard which holds it
//	                          (everyshard.go) and remembers; DueJobs,
//	                          NextDue and StaleOnce, read by the
//	                          scheduler's loop again and again, leave out
//	                          a shard that is unavailable or slower than a
//	                          second (a failover), which holds back only
//	                          its own jobs until the next read
//	once-only claim           its subject's shard: the second field of its
//	                          identity kind:subject:…, the whole identity
//	                          when it has no second field; so a cron fire
//	                          (cron:<job>:<when>) is in its job's shard
//	                          and cron_fire_start and cron_fire_end claim
//	                          and write the job in one slot (a fire not
//	                          named after its job is refused there); the
//	                          index of live fires and the token counter
//	                          are one per shard, and StaleOnce reads every
//	                          shard and merges by claim expiry
//	kanban, all of it         one shard, of("kanban"): a change may write
//	                          cards and events of several boards at once,
//	                          and a card's id does not name its board, so
//	                          boards spread over shards would cut changes
//	                          in two and cost every call by a card's id a
//	                          lookup; kanban's traffic is small beside the
//	                          conversations' (kanban.go)
//	approval                  its conversation's shard, convPfx(conv), with
//	                          the conversation's indexes of its approvals
//	                          and its sessions' grants; the indexes of
//	                          every pending and every decided approval and
//	                          the sequence counter are one per shard, read
//	                          every shard and merged (the pending by when
//	                          asked, the decided newest first); an id,
//	                          the approver's, is found by asking every
//	                          shard (everyshard.go) and remembered, and
//	                          asked for before a create, so that a taken
//	                          id is a Conflict; the always grants are one
//	                          hash, Pappr:always, outside the shards (one
//	                          key, read and written alone)
//
// Scripts: the Lua files in lua/ are the functions of one library, loaded
// with FUNCTION LOAD at Open (again if the server lost it) and called with
// FCALL; see scripts.go. The two ownership lease scripts are the
// exception: called only every few seconds per exclusive adapter, they run
// on their own by EVALSHA (EVAL when the server does not have them yet);
// see lease.go. This needs Redis 7.0 or later, and a user allowed
// FUNCTION LOAD, FCALL, EVALSHA and EVAL.
//
// Cost: every operation is one FCALL or, for history, timeline, signal
// and note reads, note deletes and SetMeta (HSET or HDEL), one plain
// command; Meta is one FCALL (q_meta: the metadata hash, and the running
// turn from the state's lease, pend and pst; an entry over 4 KiB comes
// back slimmed to what the mark reads of it, its text's first kilobyte
// and its control key, not whole). Calls made at
// the same time by different goroutines (FCALLs, and the history and
// metadata reads and writes) share round trips: a
// few senders each send every call waiting as one pipeline, and on one server
// without WAIT a call with nothing else in flight goes from its caller's
// goroutine (batch.go). The calls a
// turn makes are folded so that a turn is two FCALLs on the queue
// (AppendClaim, then the FinishAndClaim that commits it and claims the
// next): Append's script returns the conversation's metadata (one HGETALL,
// and the running turn when a live lease has an entry handed out) with
// the new entry, so the router makes no Meta read of its own, and
// given a worker it leases an idle conversation in the same step (as a
// claim would: a new fence, the entry pend, indexed at the lease's
// expiry), returning the turn instead of the metadata; a claim (AppendClaim's, Claim, ClaimMany, the claim of
// FinishAndClaim) brings the conversation's history with it (one LRANGE in
// the script), except that AppendClaim leaves it out when it is the one
// this process kept from its last turn of the conversation (read from
// the state's hl in the HMGET it makes anyway; histcache.go); ClaimMany leases a backlog n at a time; Finish, given a
// Handoff, enqueues its outbox messages due now already claimed (tok, exp
// and w in the message's hash, the id in Pob:handed alone, one
// token for them all: the first one's sequence number negated, which no
// ob_claim hands out), so the delivery worker sends them
// without an ob_claim; and AckAll acks a batch of sent messages in one
// call, which for handed messages whose claims hold is one ZREM of
// Pob:handed and the DEL, without reading their hashes: a message still
// in Pob:handed is under its handed claim, as nobody can claim it before
// it leaves (ob_claim makes those whose claims ran out due
// again, in Pob:due:<platform> and Pob:all, before it claims); the outbox claim and ack move
// a batch's messages between indexes with one ZREM or ZADD per index, not
// one per message. The scripts keep their calls
// few and small (on the common path one HMGET of the state fields a
// script uses, one HSET for all it changes, no command whose answer the
// state hash already holds), because each call inside a script costs about as much as a small
// command, and each field read, reply converted and number parsed adds to
// it. `herald bench queue --store redis` measures Append → Claim →
// FinishAndClaim against bare XADD + XREADGROUP + XACK on the same server;
// `herald bench pipeline --store redis` whole turns, router to adapter;
// BenchmarkRedisTurnCalls (cmd/herald/bench) the server's CPU time of a
// turn's calls alone.
//
// Time: scripts take the current time as an argument when Options.Clock is
// set (tests), else they read the server's TIME, so lease and claim expiry
// are decided by one clock, the store's, never by comparing machines.
//
// Fencing: every grant of a conversation increments its fence and makes
// it the lease token. Next, Renew, Release, Finish, FinishAndClaim and
// AppendHistory check the token inside their script and write nothing
// (and claim nothing) when it is not the current one. An expired lease
// that nobody has taken over is still current: the token, not the clock,
// is what makes a write safe.
//
// Durability is the server's: run it with appendonly yes (appendfsync
// always loses nothing acknowledged; everysec up to a second) so that
// queued turns and outbox messages survive a restart.
//
// The server must not evict keys (maxmemory-policy noeviction, Redis's
// default): the scripts keep counts and indexes beside the data, and an
// evicted key would leave them disagreeing.
//
// Cluster: every script call touches the keys of one shard, one slot
// (see Sharded layout above): Append, Claim, Renew, Release and Finish
// touch the ready and activity indexes of the conversation's shard, a
// claim script builds the keys of the conversations it claims from the
// prefix it is given, and FinishAndClaim claims in its own shard only,
// the claim of another shard's conversation being a call of its own.
package redis
