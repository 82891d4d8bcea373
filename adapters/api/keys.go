package api

import (
	"context"
	"net/http"

	"github.com/heraldgw/herald/llm"
)

// ModelKeys reads the model's keys and their state, masked (gateway's
// ModelKeys). Errors: Unavailable.
type ModelKeys func(ctx context.Context) ([]llm.ModelKey, error)

// ModelKeyRoutes are the model's keys' route, GET /api/v1/model/keys,
// served by keys: what `herald model keys --json` shows, each key
// masked.
func ModelKeyRoutes(keys ModelKeys) Routes { return keyRoutes{keys} }

type keyRoutes struct{ keys ModelKeys }

func (k keyRoutes) mount(s *Server) {
	s.route("GET", "/api/v1/model/keys", s.live(func(w http.ResponseWriter, r *http.Request) {
		keys, err := k.keys(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if keys == nil {
			keys = []llm.ModelKey{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"keys": keys})
	}))
}
