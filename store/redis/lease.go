package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/lease"
)

// An ownership lease (package lease) is one string key, P lease:<name>
// (P the prefix, glued on: herald:lease:adapter:telegram:polling:<bot id>), holding "<expiry ms>|<holder>". Whether it still counts is decided by
// the store's clock, as for conversation leases: the server's TIME, or the
// injected clock's time sent with the call. On the server's clock the key
// also expires by itself (PX the TTL, the same instant); on an injected
// clock it has no TTL of its own, since the server's time does not follow
// that clock, and Release or a takeover replaces it.
//
// The two scripts are few and rarely called (a renewal every few seconds
// per exclusive adapter), so they run by EVALSHA on their own rather than
// in the function library.

// leaseAcquireScript takes, renews or refuses a lease; it returns 1 when
// the holder has the lease afterwards, else 0 with nothing written.
//
//	KEYS[1]  the lease key
//	ARGV[1]  the holder
//	ARGV[2]  the TTL, ms
//	ARGV[3]  now, ms, by the injected clock; '' for the server's TIME
var leaseAcquireScript = goredis.NewScript(`
local now = tonumber(ARGV[3])
local server = now == nil
if server then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local old = redis.call('GET', KEYS[1])
if old then
  local exp, holder = string.match(old, '^(%d+)|(.*)$')
  if exp and holder ~= ARGV[1] and tonumber(exp) > now then
    return 0
  end
end
local ttl = tonumber(ARGV[2])
local v = string.format('%d', now + ttl) .. '|' .. ARGV[1]
if server then
  redis.call('SET', KEYS[1], v, 'PX', ttl)
else
  redis.call('SET', KEYS[1], v)
end
return 1
`)

// leaseReleaseScript deletes the lease if the holder has it; it returns 1
// when it did, else 0.
//
//	KEYS[1]  the lease key
//	ARGV[1]  the holder
var leaseReleaseScript = goredis.NewScript(`
local old = redis.call('GET', KEYS[1])
if old and string.match(old, '^%d+|(.*)$') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// Leases returns the ownership lease store.
func (db *DB) Leases() lease.Store { return leaseStore{db: db} }

func (db *DB) leaseKey(name string) string { return db.prefix + "lease:" + name }

type leaseStore struct{ db *DB }

var _ lease.Store = leaseStore{}

func (s leaseStore) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	const op = "redis.AcquireLease"
	if err := s.db.check(op); err != nil {
		return false, err
	}
	if err := lease.CheckAcquire(op, name, holder, ttl); err != nil {
		return false, err
	}
	n, err := leaseAcquireScript.Run(ctx, s.db.client, []string{s.db.leaseKey(name)}, holder, durMS(ttl), s.db.nowArg()).Int64()
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
	err := leaseReleaseScript.Run(ctx, s.db.client, []string{s.db.leaseKey(name)}, holder).Err()
	return s.db.fail(op, err)
}
