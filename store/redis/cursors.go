package redis

import (
	"context"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/errs"
)

// The adapters' receive cursors (adapters.Cursors) of a platform are one
// hash, P cursors:<platform>, a field per channel holding "<at ms>|<value>",
// at by the store's clock. It keeps a field for every channel ever put,
// which is as many as the channels a bot received in. The scripts are
// rarely called (about once a second per busy channel, and at a
// takeover), so they run by EVALSHA on their own.

// cursorPutScript puts a cursor.
//
//	KEYS[1]  the platform's cursor hash
//	ARGV[1]  the channel
//	ARGV[2]  the value
//	ARGV[3]  now, ms, by the injected clock; '' for the server's TIME
var cursorPutScript = goredis.NewScript(`
local now = tonumber(ARGV[3])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', now) .. '|' .. ARGV[2])
return 1
`)

// cursorsScript returns the cursors put after a time, as a flat list of
// channel and "<at ms>|<value>".
//
//	KEYS[1]  the platform's cursor hash
//	ARGV[1]  the window, ms
//	ARGV[2]  now, ms, by the injected clock; '' for the server's TIME
var cursorsScript = goredis.NewScript(`
local now = tonumber(ARGV[2])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local since = now - tonumber(ARGV[1])
local out = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local at = tonumber(string.match(all[i + 1], '^(%d+)|'))
  if at and at > since then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
`)

// Cursors returns the adapters' receive cursors.
func (db *DB) Cursors() adapters.Cursors { return cursorStore{db: db} }

func (db *DB) cursorsKey(platform string) string { return db.prefix + "cursors:" + platform }

type cursorStore struct{ db *DB }

var _ adapters.Cursors = cursorStore{}

func (s cursorStore) PutCursor(ctx context.Context, platform, channel, value string) error {
	const op = "redis.PutCursor"
	if err := s.db.check(op); err != nil {
		return err
	}
	if err := adapters.CheckCursor(op, platform, channel, value); err != nil {
		return err
	}
	err := cursorPutScript.Run(ctx, s.db.client, []string{s.db.cursorsKey(platform)}, channel, value, s.db.nowArg()).Err()
	return s.db.fail(op, err)
}

func (s cursorStore) Cursors(ctx context.Context, platform string, within time.Duration) (map[string]string, error) {
	const op = "redis.Cursors"
	if err := s.db.check(op); err != nil {
		return nil, err
	}
	if err := adapters.CheckCursors(op, platform, within); err != nil {
		return nil, err
	}
	flat, err := cursorsScript.Run(ctx, s.db.client, []string{s.db.cursorsKey(platform)}, durMS(within), s.db.nowArg()).StringSlice()
	if err != nil {
		return nil, s.db.fail(op, err)
	}
	if len(flat)%2 != 0 {
		return nil, errs.E(op, errs.Internal, "unexpected script reply %v", flat)
	}
	out := make(map[string]string, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		_, value, _ := strings.Cut(flat[i+1], "|")
		out[flat[i]] = value
	}
	return out, nil
}
