package gateway

import (
	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/sessions"
	"github.com/heraldgw/herald/sessions/agent"
)

// newStatusLines adds to /status a conversation's token totals, with
// their cost where model.prices names the model, and the fallback model
// that answered its latest model call, when one did.
func newStatusLines(a *assembly) (*capability.Capability, error) {
	meta := a.db.Sessions().Meta
	a.base.Commands.AddStatus(sessions.MetaStatus(meta, func(m map[string]string) string {
		return sessions.UsageStatus(m, a.base.Config.Model.Price)
	}))
	a.base.Commands.AddStatus(sessions.MetaStatus(meta, agent.ModelStatus))
	return &capability.Capability{}, nil
}
