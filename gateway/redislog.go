package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// LogRedisClient sends what the Redis client library logs (dial failures,
// pool trouble) to log at warn level. The library otherwise writes plain
// lines to stderr, beside the gateway's JSON ones and past its secret
// masking. The setting is the library's, for the whole process: the
// binary makes it once.
func LogRedisClient(log *slog.Logger) {
	goredis.SetLogger(redisLog{log: log.With("part", "redis-client")})
}

type redisLog struct{ log *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.log.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}
