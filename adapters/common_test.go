package adapters_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/heraldgw/herald/adapters"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
)

func TestCommonComplete(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	given := adapters.NewAccess("slack", nil, true)
	tests := []struct {
		desc      string
		in        adapters.Common
		wantScope string
		bad       bool
	}{
		{desc: "zero values", in: adapters.Common{}, wantScope: adapters.ScopeAuto},
		{desc: "given values", in: adapters.Common{Access: given, Scope: adapters.ScopePerUser, Log: log, Clock: clock.Real{}},
			wantScope: adapters.ScopePerUser},
		{desc: "an unknown scope", in: adapters.Common{Scope: "per_thread"}, bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := tc.in.Complete("slack", []string{"U1"})
			if tc.bad {
				if !errs.Is(err, errs.Invalid) {
					t.Errorf("Complete = %+v, %v; want Invalid", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			// The config's list serves U1 alone; the given access serves all.
			if got.Scope != tc.wantScope || got.Access == nil || !got.Access.Allows("U1", "") ||
				got.Access.Allows("U2", "") != (tc.in.Access != nil) || got.Log == nil || got.Clock == nil {
				t.Errorf("Complete = %+v, want scope %s, the given access or the config's, a logger and a clock", got, tc.wantScope)
			}
		})
	}
	c, err := adapters.Common{Log: log}.Complete("slack", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Log.Info("hello")
	if strings.Count(buf.String(), "platform=slack") != 1 {
		t.Errorf("log = %q, want the platform named once", buf.String())
	}
}
