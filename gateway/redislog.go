package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/heraldgw/herald/internal/logcalm"
	goredis "github.com/redis/go-redis/v9"
)

// LogRedisClient sends what the Redis client library logs (dial failures,
// pool trouble) to log at warn level. The library otherwise writes plain
// lines to stderr, beside the gateway's JSON ones and past its secret
// masking. Identical lines are shown once a LogRepeatWindow, counted,
// as the gateway's own warnings are. The setting is the library's, for
// the whole process: the binary makes it once.
func LogRedisClient(log *slog.Logger) {
	calm := slog.New(logcalm.Handler(log.Handler(), LogRepeatWindow))
	goredis.SetLogger(redisLog{log: calm.With("part", "redis-client")})
}

type redisLog struct{ log *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.log.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}
