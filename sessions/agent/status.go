package agent

import (
	"encoding/json"
	"fmt"

	"github.com/heraldgw/herald/llm"
	"github.com/heraldgw/herald/sessions"
)

// ModelStatus is the /status line of a conversation, by its metadata
// meta, whose latest model call a fallback answered: which one, and why
// the main model did not, as its turns' commits recorded it
// (sessions.ConvMetaFallback), on whichever instance they ran; "" when
// the main model answered.
func ModelStatus(meta map[string]string) string {
	var last llm.ChainState
	if v := meta[sessions.ConvMetaFallback]; v == "" || json.Unmarshal([]byte(v), &last) != nil || !last.Fallback {
		return ""
	}
	return fmt.Sprintf("Model: fallback %s answered the latest request (%s UTC); the main model did not: %s",
		last.Provider, last.At.UTC().Format("15:04"), last.Reason)
}
