package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/lease"
)

// An ownership lease (package lease) is one string key, P lease:<name>
// (P the prefix, glued on: herald:lease:adapter:telegram:polling:<bot
// id>; in the sharded layout the prefix of the name's shard, P{label}:),
// holding "<expiry ms>|<token>|<holder>", and a counter, P
// leasetoken:<name> in the same shard, that the lease's fencing tokens
// are drawn from: it has no TTL, so a token is never given twice even
// after the lease key expired or was released. Whether a lease still counts is decided by the
// store's clock, as for conversation leases: the server's TIME, or the
// injected clock's time sent with the call. On the server's clock the key
// also expires by itself (PX the TTL, the same instant); on an injected
// clock it has no TTL of its own, since the server's time does not follow
// that clock, and Release or a takeover replaces it. A value of the older
// form "<expiry ms>|<holder>" reads as token 0.
//
// The scripts are few and rarely called (a renewal every few seconds per
// exclusive adapter, a check before each poll), so they run by EVALSHA
// on their own rather than in the function library.

// leaseRead is the Lua that reads a lease's value (KEYS[1]) and the
// store's time: exp, token and holder (nil when there is no lease) and
// now, with server true when now is the server's TIME. ARGV[3] is now by
// the injected clock, ” for the server's.
const leaseRead = `
local now = tonumber(ARGV[3])
local server = now == nil
if server then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local exp, token, holder
local old = redis.call('GET', KEYS[1])
if old then
  exp, token, holder = string.match(old, '^(%d+)|(%d+)|(.*)$')
  if not exp then
    exp, holder = string.match(old, '^(%d+)|(.*)$')
    token = '0'
  end
  exp, token = tonumber(exp), tonumber(token)
end
`

// leaseAcquireScript takes, renews or refuses a lease; it returns the
// grant's token, or 0 with nothing written.
//
//	KEYS[1]  the lease key
//	KEYS[2]  the lease's token counter
//	ARGV[1]  the holder
//	ARGV[2]  the TTL, ms
//	ARGV[3]  now, ms, by the injected clock; '' for the server's TIME
var leaseAcquireScript = goredis.NewScript(leaseRead + `
local live = exp and exp > now
if live and holder ~= ARGV[1] then
  return 0
end
if not (live and holder == ARGV[1] and token > 0) then
  token = redis.call('INCR', KEYS[2])
end
local ttl = tonumber(ARGV[2])
local v = string.format('%d', now + ttl) .. '|' .. string.format('%d', token) .. '|' .. ARGV[1]
if server then
  redis.call('SET', KEYS[1], v, 'PX', ttl)
else
  redis.call('SET', KEYS[1], v)
end
return token
`)

// leaseCheckScript returns 1 when the holder holds the lease under the
// token, unexpired, else 0. It writes nothing.
//
//	KEYS[1]  the lease key
//	ARGV[1]  the holder
//	ARGV[2]  the token
//	ARGV[3]  now, ms, by the injected clock; '' for the server's TIME
var leaseCheckScript = goredis.NewScript(leaseRead + `
if exp and exp > now and holder == ARGV[1] and token == tonumber(ARGV[2]) then
  return 1
end
return 0
`)

// leaseReleaseScript deletes the lease if the holder has it; it returns 1
// when it did, else 0.
//
//	KEYS[1]  the lease key
//	ARGV[1]  the holder
//	ARGV[3]  '' (leaseRead's now; the server's time is read, not used)
var leaseReleaseScript = goredis.NewScript(leaseRead + `
if holder == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// Leases returns the ownership lease store.
func (db *DB) Leases() lease.Store { return leaseStore{db: db} }

// leaseKey and leaseTokenKey are a lease's keys, both in the shard of its
// name, as leaseAcquireScript writes both.
func (db *DB) leaseKey(name string) string { return db.pfxOf(name) + "lease:" + name }

func (db *DB) leaseTokenKey(name string) string { return db.pfxOf(name) + "leasetoken:" + name }

type leaseStore struct{ db *DB }

var _ lease.Store = leaseStore{}

func (s leaseStore) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (int64, error) {
	const op = "redis.AcquireLease"
	if err := s.db.check(op); err != nil {
		return 0, err
	}
	if err := lease.CheckAcquire(op, name, holder, ttl); err != nil {
		return 0, err
	}
	keys := []string{s.db.leaseKey(name), s.db.leaseTokenKey(name)}
	token, err := leaseAcquireScript.Run(ctx, s.db.client, keys, holder, durMS(ttl), s.db.nowArg()).Int64()
	if err != nil {
		return 0, s.db.fail(op, err)
	}
	return token, nil
}

func (s leaseStore) Check(ctx context.Context, name, holder string, token int64) (bool, error) {
	const op = "redis.CheckLease"
	if err := s.db.check(op); err != nil {
		return false, err
	}
	if err := lease.CheckRelease(op, name, holder); err != nil {
		return false, err
	}
	n, err := leaseCheckScript.Run(ctx, s.db.client, []string{s.db.leaseKey(name)}, holder, token, s.db.nowArg()).Int64()
	if err != nil {
		return false, s.db.fail(op, err)
	}
	return n == 1, nil
}

func (s leaseStore) Release(ctx context.Context, name, holder string) error {
	const op = "redis.ReleaseLease"
	if err := s.db.check(op); err != nil {
		return err
	}
	if err := lease.CheckRelease(op, name, holder); err != nil {
		return err
	}
	err := leaseReleaseScript.Run(ctx, s.db.client, []string{s.db.leaseKey(name)}, holder, "", "").Err()
	return s.db.fail(op, err)
}
