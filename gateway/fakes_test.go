package gateway

import (
	"log/slog"
	"net/http"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/adapters/adaptertest"
)

// exclusiveAdapter is an adaptertest.Adapter whose Run needs the lease
// named by name.
type exclusiveAdapter struct {
	adaptertest.Adapter
	name string
}

var _ adapters.Exclusive = (*exclusiveAdapter)(nil)

func (e *exclusiveAdapter) Exclusive() string { return e.name }

// mountAdapter is an adaptertest.Adapter that receives over the HTTP server.
type mountAdapter struct {
	adaptertest.Adapter
	mount func(mux *http.ServeMux, inbox adapters.Inbox)
}

var _ adapters.Mounter = (*mountAdapter)(nil)

func (m *mountAdapter) Mount(mux *http.ServeMux, inbox adapters.Inbox) { m.mount(mux, inbox) }

// quietLogger drops what it is given; tests that read logs make their own.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
