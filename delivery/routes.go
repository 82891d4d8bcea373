package delivery

import (
	"slices"
	"sync"

	"github.com/heraldgw/herald/adapters"
)

// Routes are the adapters that can send right now, by platform. The
// delivery worker claims only messages for these platforms, so a message
// for a platform whose adapter is off or has stopped stays pending and
// spends no attempt.
type Routes struct {
	mu sync.RWMutex
	up map[string]adapters.Adapter
}

// NewRoutes returns an empty set.
func NewRoutes() *Routes { return &Routes{up: map[string]adapters.Adapter{}} }

// Up makes a's platform a route.
func (r *Routes) Up(a adapters.Adapter) {
	r.mu.Lock()
	r.up[a.Platform()] = a
	r.mu.Unlock()
}

// Down removes platform's route.
func (r *Routes) Down(platform string) {
	r.mu.Lock()
	delete(r.up, platform)
	r.mu.Unlock()
}

// Get returns the adapter serving platform.
func (r *Routes) Get(platform string) (adapters.Adapter, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.up[platform]
	return a, ok
}

// Platforms lists the platforms with a route, sorted.
func (r *Routes) Platforms() []string {
	r.mu.RLock()
	out := make([]string, 0, len(r.up))
	for p := range r.up {
		out = append(out, p)
	}
	r.mu.RUnlock()
	slices.Sort(out)
	return out
}
