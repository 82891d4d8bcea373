package gateway

import (
	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/redact"
)

// useMaskers adds to r the masks of those of as that implement
// adapters.Masker. The adapters are made after the gateway's logger, so
// the loggers that already use r mask with them from then on.
func useMaskers(r *redact.Redactor, as []adapters.Adapter) {
	var masks []func(string) string
	for _, a := range as {
		if m, ok := a.(adapters.Masker); ok {
			masks = append(masks, m.Mask)
		}
	}
	r.AddMasks(masks...)
}
