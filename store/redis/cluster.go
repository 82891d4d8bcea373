package redis

import (
	"errors"
	"net/url"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/heraldgw/herald/internal/errs"
)

// Redis Cluster. Options.Cluster dials the seeds of a cluster with
// go-redis's cluster client, which learns which primary serves which slot
// and follows MOVED and ASK. Every script call names a key of its shard
// (shards.go), so the client sends it to the primary of that shard's
// slot, and a script touches that slot only.
//
// What is retried: a call refused before it ran (MOVED, ASK, READONLY
// from a primary turned replica, a connection that could not be made) is
// sent again, to the node the cluster now names; a call whose reply was
// lost is not, since a script may have run (scriptCmd.NoRetry), and fails
// Unavailable for its caller to decide, as on one server. A node that
// stops answering makes the client read the cluster's slots again, so
// that a failover's new primary is found without waiting for a MOVED.

// dialCluster makes a cluster client from seed URLs. As for one server,
// commands are not retried on a lost reply unless the URL sets
// max_retries.
func dialCluster(rawURL string) (goredis.UniversalClient, error) {
	opt, err := goredis.ParseClusterURL(rawURL)
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	if err != nil {
		return nil, errs.E("redis.Open", errs.Invalid, "malformed Redis Cluster URL: %v", err)
	}
	if u, err := url.Parse(rawURL); err == nil && !u.Query().Has("max_retries") {
		opt.MaxRetries = -1
	}
	if opt.MaxRedirects < 8 {
		opt.MaxRedirects = 8 // a failover may take a few redirects to settle
	}
	return goredis.NewClusterClient(opt), nil
}

// scriptCmd is a script call: never sent again after its reply was lost,
// since it may have run; refusals that say it did not run (MOVED, ASK,
// READONLY) are still followed.
type scriptCmd struct{ *goredis.SliceCmd }

func (scriptCmd) NoRetry() bool { return true }

// firstKey is the key a command is routed by: an FCALL's first key, or
// the first argument after the command's name.
func firstKey(cmd goredis.Cmder) string {
	args := cmd.Args()
	if len(args) > 1 {
		if name, _ := args[0].(string); strings.EqualFold(name, "fcall") || strings.EqualFold(name, "fcall_ro") {
			if len(args) > 3 {
				return str(args[3])
			}
			return ""
		}
		return str(args[1])
	}
	return ""
}

// redirected reports whether a command's error says it did not run where
// it was sent and may be sent again to the node the cluster names now.
func redirected(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	for _, p := range []string{"MOVED ", "ASK ", "READONLY", "CLUSTERDOWN", "TRYAGAIN"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	var op interface{ Timeout() bool }
	if errors.As(err, &op) && strings.Contains(s, "dial") {
		return true
	}
	return strings.Contains(s, "connection refused")
}
