package agent

import (
	"github.com/heraldgw/herald/capability"
	"github.com/heraldgw/herald/sessions"
)

// StatusLines adds to /status a conversation's token totals, with their
// cost where model.prices names the model, and the fallback model that
// answered its latest model call, when one did.
func StatusLines(as capability.Assembled) (*capability.Capability, error) {
	a := as.Assembly()
	meta := a.Store.Sessions().Meta
	a.Commands.AddStatus(sessions.MetaStatus(meta, func(m map[string]string) string {
		return sessions.UsageStatus(m, a.Config.Model.Price)
	}))
	a.Commands.AddStatus(sessions.MetaStatus(meta, ModelStatus))
	return &capability.Capability{}, nil
}
