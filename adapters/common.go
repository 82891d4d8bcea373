package adapters

import (
	"log/slog"

	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

// Common holds the options every adapter takes (Options.Access,
// GroupSessions, Logger and Clock), so that each adapter checks them and
// fills their zero values the same way (Complete).
type Common struct {
	Access *Access
	Scope  string       // a Scope* value
	Log    *slog.Logger // once completed, it names the platform
	Clock  clock.Clock
}

// Complete checks c and fills it in for platform: a nil Access serves the
// users allowed in the platform's config with allow-all off, an empty
// Scope is ScopeAuto, a nil Log is slog.Default() and a nil Clock the
// wall clock. The Log it returns names the platform, the one place an
// adapter's lines get it. Errors: Invalid for an unknown Scope.
func (c Common) Complete(platform string, allowed []string) (Common, error) {
	switch c.Scope {
	case "":
		c.Scope = ScopeAuto
	case ScopeAuto, ScopeShared, ScopePerUser:
	default:
		return Common{}, errs.E("adapters.Complete", errs.Invalid, "group sessions %q is not %s, %s or %s",
			c.Scope, ScopeAuto, ScopeShared, ScopePerUser)
	}
	if c.Access == nil {
		c.Access = NewAccess(platform, allowed, false)
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	c.Log = c.Log.With("platform", platform)
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return c, nil
}
