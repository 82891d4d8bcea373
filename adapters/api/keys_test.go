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
		o.Routes = []api.Routes{api.ModelKeyRoutes(func(context.Context) ([]llm.ModelKey, error) { return keys, fail }, nil)}
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

// POST /api/v1/model/keys/{id}/revive revives the key as ReviveKey
// does, behind the API key: 200 naming the models whose pool held it,
// 404 for a key no pool holds, 503 when the store cannot be written.
func TestModelKeyRevive(t *testing.T) {
	var revived []string
	var fail error
	f := newFixture(t, func(o *api.Options) {
		o.APIKey = testKey
		o.Routes = []api.Routes{api.ModelKeyRoutes(nil, func(_ context.Context, id string) ([]string, error) {
			switch {
			case fail != nil:
				return nil, fail
			case id != "k_1":
				return nil, errs.E("llm.Revive", errs.NotFound, "no pool has a key %s", id)
			}
			revived = append(revived, id)
			return []string{"m@host"}, nil
		})}
	})
	auth := []string{"Authorization", "Bearer " + testKey}
	code, b := f.do(t, "POST", "/api/v1/model/keys/k_1/revive", "", auth...)
	var got struct {
		ID     string   `json:"id"`
		Status string   `json:"status"`
		Models []string `json:"models"`
	}
	if code != http.StatusOK || json.Unmarshal(b, &got) != nil || got.ID != "k_1" || got.Status != "ok" || len(got.Models) != 1 || got.Models[0] != "m@host" {
		t.Errorf("revive k_1: %d %s", code, b)
	}
	if len(revived) != 1 {
		t.Errorf("revived %v, want k_1 once", revived)
	}
	if code, b := f.do(t, "POST", "/api/v1/model/keys/k_none/revive", "", auth...); code != http.StatusNotFound || !strings.Contains(string(b), `no key \"k_none\"`) {
		t.Errorf("revive of an unknown key: %d %s, want 404 naming it", code, b)
	}
	if code, _ := f.do(t, "POST", "/api/v1/model/keys/k_1/revive", ""); code != http.StatusUnauthorized {
		t.Errorf("without the key: %d, want 401", code)
	}
	if code, _ := f.do(t, "GET", "/api/v1/model/keys/k_1/revive", "", auth...); code != http.StatusMethodNotAllowed {
		t.Errorf("GET of the revive: %d, want 405", code)
	}
	fail = errs.E("llm.Revive", errs.Unavailable, "the store is down")
	if code, b := f.do(t, "POST", "/api/v1/model/keys/k_1/revive", "", auth...); code != http.StatusServiceUnavailable {
		t.Errorf("with the store down: %d %s, want 503", code, b)
	}
}
