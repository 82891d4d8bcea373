// Package redis is herald's store for several gateway processes sharing
// one Redis server. It implements sessions.Store and outbox.Store with
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
//	                                    (enqueued, ms). Consumer group "g"
//	                                    with the single consumer "c": the
//	                                    lease makes one holder, so the
//	                                    group's pending list holds the entry
//	                                    delivered and not yet acked. Entry
//	                                    ids are "<seq>-<lane>". Acked entries
//	                                    are deleted (XACK + XDEL); an emptied
//	                                    stream stays, with its group, for the
//	                                    next append.
//	P{conv}:state            hash      seq (entry id sequence); fence (the
//	                                    fencing counter, only increases);
//	                                    n0 … n5 (entries per lane, queued and
//	                                    delivered-unacked, so one HMGET tells
//	                                    whether there is work and where);
//	                                    groups (the lanes whose stream has
//	                                    its consumer group); pend (the entry
//	                                    delivered and not acked); worker,
//	                                    token (= fence at the grant) and exp
//	                                    (lease expiry, ms). An ended lease or
//	                                    an acked entry leaves '' in its
//	                                    fields.
//	P{conv}:dd:<message id>  string    "<entry id>|<until ms>": dedupe of the
//	                                    platform message id; counts until
//	                                    "until" by the store's clock, and the
//	                                    key's own TTL (the dedupe window)
//	                                    collects it
//	P{conv}:hist             list      history, one encoded sessions.Message
//	                                    per item, oldest first
//	P{conv}:meta             hash      metadata key → value
//	P{conv}:tl               stream    the timeline: what was delivered to
//	                                    the conversation, one entry per item
//	                                    with fields id (the item id), k
//	                                    (kind), t (text) and at (appended,
//	                                    ms); the entry id is the cursor,
//	                                    made by the stream ('*') so it only
//	                                    grows
//	P{conv}:tlid             hash      item id → cursor, so appending an
//	                                    item again returns the first cursor
//	                                    and adds nothing; written in the
//	                                    same script as the stream entry
//
// Shared by all conversations:
//
//	Pready                   zset      conversations with work and no live
//	                                    lease; member the conversation tag,
//	                                    score when it became ready (ms).
//	                                    Claim pops the lowest score; one that
//	                                    turns out to have no work (its holder
//	                                    finished after its lease was swept)
//	                                    is simply dropped then.
//	Pleases                  zset      leases over conversations with work,
//	                                    scored by expiry (ms); Claim sweeps
//	                                    the expired ones back into ready. A
//	                                    held conversation without work is
//	                                    left out (there is nothing to hand
//	                                    over) until an append gives it work,
//	                                    so a sweep never wades through idle
//	                                    leases.
//
//	Psignals                 stream    the signals log every process tails:
//	                                    fields c (conversation), k (kind), e
//	                                    (entry id), t (text), at (ms). Ids
//	                                    are "<ms>-<seq>" from the store's
//	                                    clock, one past the last id when
//	                                    that clock stands still or steps
//	                                    back, so that each XADD can trim
//	                                    exactly (MINID =) what is older than
//	                                    an hour by the same clock. Signals
//	                                    are few, so exact trimming is cheap.
//
// Per user:
//
//	Pnotes:{user}            stream    the agent's notes about a user (the
//	                                    memory tool), oldest first: fields t
//	                                    (text) and at (ms); the entry id is
//	                                    the note id, and DeleteNote is an
//	                                    XDEL. The user is escaped like a
//	                                    conversation tag.
//
// (P is glued on as it is: with the default prefix these are
// herald:ready, herald:leases and herald:signals.)
//
// The timeline and its id hash are kept whole for now: they grow with what
// herald delivers, as history does. A trimming policy (XTRIM by MINID, with
// the matching ids dropped from the hash) can come later without changing
// cursors.
//
// Finish.Absorbed: the finish script looks every absorbed entry up (XRANGE
// on the lane its id names) before its first write and answers NOTFOUND,
// having written nothing, when one is not queued. The absorbed entries
// were never delivered, so they are only deleted (XDEL; the group skips
// deleted entries when it reads on), and their lanes' counts drop in the
// same HSET as the acked entry's.
//
// The outbox is global, not per conversation:
//
//	Pob:m:<id>               hash      one message: d (the encoded
//	                                    outbox.Message), p (platform), n
//	                                    (attempts), next (next attempt, ms),
//	                                    at (created, ms), e (last error), and
//	                                    while claimed: tok (claim token), exp
//	                                    (claim expiry, ms), w (worker)
//	Pob:due:<platform>       zset      unclaimed messages of one platform
//	                                    scored by next attempt (ms)
//	Pob:claimed:<platform>   zset      claimed messages of one platform
//	                                    scored by claim expiry (ms)
//	Pob:all                  zset      undelivered messages (claimed or
//	                                    not) scored by enqueue sequence
//	Pob:dead                 zset      dead letters scored by enqueue
//	                                    sequence
//	Pob:idem:<key>           string    "<id>|<until ms>": idempotency key,
//	                                    like the inbound dedupe
//	Pob:seq                  string    message id sequence; ids are the
//	                                    sequence zero-padded to 12 digits so
//	                                    equal due times sort in enqueue order
//	Pob:tok                  string    claim token counter
//
// The outbox uses sorted sets rather than a stream because its entries are
// not consumed in arrival order: a failed send is retried later with
// backoff, a rate-limited one at the platform's retry-after, and a
// message for a platform with no adapter waits without being read at
// all. A sorted set per platform scored by the next attempt serves "due
// now for these platforms, oldest first" directly; a stream would need its
// entries re-added for every delay.
//
// Cost: every operation is one round trip, an EVALSHA or, for history,
// metadata, timeline, signal and note reads and note deletes, one plain
// command; the scripts keep their calls
// few (one HMGET reads a conversation's whole state, one HSET writes it),
// because each call inside a script costs about as much as a small
// command. `herald bench queue --store redis` measures Append → Claim →
// Finish against bare XADD + XREADGROUP + XACK on the same server.
//
// Time: scripts take the current time as an argument when Options.Clock is
// set (tests), else they read the server's TIME, so lease and claim expiry
// are decided by one clock, the store's, never by comparing machines.
//
// Fencing: every grant of a conversation increments its fence and makes
// it the lease token. Next, Renew, Release, Finish and AppendHistory check
// the token inside their script and write nothing when it is not the
// current one. An expired lease that nobody has taken over is still
// current: the token, not the clock, is what makes a write safe.
//
// Durability is the server's: run it with appendonly yes (appendfsync
// always loses nothing acknowledged; everysec up to a second) so that
// queued turns and outbox messages survive a restart.
//
// The server must not evict keys (maxmemory-policy noeviction, Redis's
// default): the scripts keep counts and indexes beside the data, and an
// evicted key would leave them disagreeing.
//
// Cluster: a conversation's own keys share a slot, but Append, Claim,
// Renew, Release and Finish also touch the shared ready and leases sets
// and Finish the outbox, and the outbox scripts build their keys inside
// the script. These need a single Redis primary (with replicas or
// Sentinel as you like); Redis Cluster is not supported for them yet.
package redis
