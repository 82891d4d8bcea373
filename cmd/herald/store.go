package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/store/redis"
	"github.com/heraldgw/herald/store/sqlite"
)

// store is one opened backend serving every domain's store interface.
type store interface {
	Sessions() sessions.Store
	Outbox() outbox.Store
	Close() error
}

var (
	_ store = (*sqlite.DB)(nil)
	_ store = (*redis.DB)(nil)
)

// storeSettings says which backend to open and where.
type storeSettings struct {
	Backend     string // "sqlite" or "redis"
	Home        string // $HERALD_HOME
	SQLitePath  string // the SQLite file under Home
	RedisURL    string
	RedisPrefix string
}

// storeSettingsFromEnv reads the store's environment variables, with the
// defaults CONTRACT.md names. It is the one place the binary reads them
// until herald has a config file.
func storeSettingsFromEnv(getenv func(string) string) (storeSettings, error) {
	s := storeSettings{
		Backend:     getenv("HERALD_STORE"),
		Home:        getenv("HERALD_HOME"),
		RedisURL:    getenv("REDIS_URL"),
		RedisPrefix: getenv("HERALD_REDIS_PREFIX"),
	}
	if s.Backend == "" {
		s.Backend = "sqlite"
	}
	if s.Backend != "sqlite" && s.Backend != "redis" {
		return s, fmt.Errorf("HERALD_STORE is %q; want sqlite or redis", s.Backend)
	}
	if s.Home == "" || s.Home == "~" || strings.HasPrefix(s.Home, "~/") {
		// A value set in a service manager or a secret store reaches us
		// unexpanded, so "~" is read as the user's home here too.
		userHome := getenv("HOME")
		if userHome == "" {
			var err error
			if userHome, err = os.UserHomeDir(); err != nil {
				return s, fmt.Errorf("HERALD_HOME is not set and the home directory is unknown: %w", err)
			}
		}
		switch {
		case s.Home == "":
			s.Home = filepath.Join(userHome, ".herald")
		default:
			s.Home = filepath.Join(userHome, strings.TrimPrefix(s.Home, "~"))
		}
	}
	s.SQLitePath = filepath.Join(s.Home, "herald.db")
	if s.RedisURL == "" {
		s.RedisURL = "redis://127.0.0.1:6379/0"
	}
	if s.RedisPrefix == "" {
		s.RedisPrefix = "herald:"
	}
	return s, nil
}

// where names the store's location for logs, without secrets.
func (s storeSettings) where() string {
	if s.Backend == "redis" {
		if u, err := url.Parse(s.RedisURL); err == nil {
			return u.Redacted()
		}
		return "(unparsable REDIS_URL)"
	}
	return s.SQLitePath
}

func openStore(ctx context.Context, s storeSettings) (store, error) {
	switch s.Backend {
	case "redis":
		// No Clock: lease expiry is then decided by the Redis server's
		// clock, the one every gateway process sharing it agrees on.
		return redis.Open(ctx, redis.Options{URL: s.RedisURL, Prefix: s.RedisPrefix})
	default:
		if err := os.MkdirAll(s.Home, 0o700); err != nil {
			return nil, fmt.Errorf("creating HERALD_HOME: %w", err)
		}
		return sqlite.Open(s.SQLitePath, sqlite.Options{})
	}
}
