package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/llm"
)

// ModelKeys reads the model's keys and their state, masked
// (llm.ModelPools.Keys). Errors: Unavailable.
type ModelKeys func(ctx context.Context) ([]llm.ModelKey, error)

// ReviveKey clears the dead or cooling mark of the model's key id, for
// every gateway on the store, and returns the models whose pool held it
// (llm.ModelPools.Revive). Errors: NotFound (no pool holds it),
// Unavailable.
type ReviveKey func(ctx context.Context, id string) ([]string, error)

// ModelKeyRoutes are the model's keys' routes: GET /api/v1/model/keys,
// served by keys, what `herald model keys --json` shows, each key
// masked; and POST /api/v1/model/keys/{id}/revive, served by revive,
// what `herald model keys --revive ID` does.
func ModelKeyRoutes(keys ModelKeys, revive ReviveKey) Routes { return keyRoutes{keys, revive} }

type keyRoutes struct {
	keys   ModelKeys
	revive ReviveKey
}

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
	s.route("POST", "/api/v1/model/keys/{id}/revive", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		models, err := k.revive(r.Context(), id)
		switch {
		case errs.Is(err, errs.NotFound):
			writeError(w, http.StatusNotFound, typeNotFound, fmt.Sprintf("no key %q in the model's or its fallbacks' keys", id))
		case err != nil:
			s.fail(w, r, err)
		default:
			writeJSON(w, http.StatusOK, map[string]any{"id": id, "status": "ok", "models": models})
		}
	})
}
