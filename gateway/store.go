package gateway

import (
	"context"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/config"
	"github.com/heraldgw/herald/controllers"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/delegation"
	"github.com/heraldgw/herald/instances"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/kanban"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/media"
	"github.com/heraldgw/herald/notes"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/signals"
	"github.com/heraldgw/herald/store/redis"
	"github.com/heraldgw/herald/store/sqlite"
)

// Store is one opened backend serving every domain's store interface.
type Store interface {
	Sessions() sessions.Store
	Signals() signals.Store      // the cluster's bus: stop, steer, a domain's own kinds
	Timeline() sessions.Timeline // what the local API's conversations were sent
	Notes() notes.Store          // what the agent remembers about each user
	Outbox() outbox.Store
	Leases() lease.Store       // ownership of the adapters that run in one process
	Cursors() adapters.Cursors // where an adapter's receiving got to, per channel
	Delegations() delegation.Store
	Cron() cronjobs.Store
	Once() lease.OnceStore // once-only claims on fires (cron jobs', controllers' ticks)
	Kanban() kanban.Store
	Controllers() controllers.Store
	Pools() llm.PoolStore       // the model's credential pools
	Files() media.Store         // file bytes no platform can give again
	Approvals() approvals.Store // what dangerous actions asked, and the grants left
	Instances() instances.Store // the roll of gateway processes
	// Conversations lists conversations by their last activity.
	Conversations() sessions.Conversations
	Close() error
}

var (
	_ Store = (*sqlite.DB)(nil)
	_ Store = (*redis.DB)(nil)
)

// OpenStore opens the backend cfg names. clk is the store's clock for
// SQLite (nil: the wall clock). Redis takes clk only when it is set: left
// nil, lease expiry is decided by the Redis server's clock, the one every
// gateway process sharing it agrees on, which is what production wants.
func OpenStore(ctx context.Context, cfg config.Store, sqlitePath string, clk clock.Clock) (Store, error) {
	const op = "gateway.OpenStore"
	switch cfg.Backend {
	case config.BackendRedis:
		return redis.Open(ctx, redis.Options{URL: cfg.RedisURL, Prefix: cfg.RedisPrefix, Clock: clk, Limits: cfg.Limits(),
			Cluster: cfg.RedisMode == config.RedisCluster, WaitReplicas: cfg.RedisWaitReplicas})
	case config.BackendSQLite, "":
		return sqlite.Open(sqlitePath, sqlite.Options{Clock: clk, Limits: cfg.Limits()})
	}
	return nil, errs.E(op, errs.Invalid, "unknown store backend %q (sqlite or redis)", cfg.Backend)
}
