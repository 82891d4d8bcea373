package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/adapters/api"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/llm"
)

// GET /api/v1/model/keys answers the keys as ModelKeys reads them,
// behind the API key; a store that cannot be read is a 503.
func TestModelKeys(t *testing.T) {
	until := epoch.Add(time.Minute)
	keys := []llm.ModelKey{
		{Model: "m@host", Pool: "host", KeyStatus: llm.KeyStatus{ID: "k_1", Key: "sk-…abcd", Status: "ok", Uses: 3}},
		{Model: "m@host", Pool: "host", KeyStatus: llm.KeyStatus{ID: "k_2", Key: "sk-…wxyz", Status: "cooling", CoolingUntil: until, Reason: llm.ClassRateLimited}},
	}
	var fail error
	f := newFixture(t, func(o *api.Options) {
		o.APIKey = testKey
		o.Routes = []api.Routes{api.ModelKeyRoutes(func(context.Context) ([]llm.ModelKey, error) { return keys, fail })}
	})
	code, b := f.do(t, "GET", "/api/v1/model/keys", "", "Authorization", "Bearer "+testKey)
	var got struct {
		Keys []llm.ModelKey `json:"keys"`
	}
	if code != http.StatusOK || json.Unmarshal(b, &got) != nil {
		t.Fatalf("GET /api/v1/model/keys: %d %s", code, b)
	}
	if len(got.Keys) != 2 || got.Keys[1].Status != "cooling" || !got.Keys[1].CoolingUntil.Equal(until) || got.Keys[0].Uses != 3 || got.Keys[0].Key != "sk-…abcd" {
		t.Errorf("keys %+v, want %+v", got.Keys, keys)
	}
	if code, b := f.do(t, "GET", "/api/v1/model/keys", ""); code != http.StatusUnauthorized {
		t.Errorf("without the key: %d %s, want 401", code, b)
	}
	fail = errs.E("llm.Status", errs.Unavailable, "the store is down")
	if code, b := f.do(t, "GET", "/api/v1/model/keys", "", "Authorization", "Bearer "+testKey); code != http.StatusServiceUnavailable || strings.Contains(string(b), "sk-") {
		t.Errorf("with the store down: %d %s, want 503", code, b)
	}
}

// Without the route mounted, there are no keys to read.
func TestModelKeysOnlyWhenMounted(t *testing.T) {
	f := newFixture(t, nil)
	if code, _ := f.do(t, "GET", "/api/v1/model/keys", ""); code != http.StatusNotFound {
		t.Errorf("GET /api/v1/model/keys unmounted: %d, want 404", code)
	}
}
