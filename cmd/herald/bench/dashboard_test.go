package bench

import (
	"context"
	"testing"
)

// A short run in a real Chromium loads /ui/ to its counts and sees every
// card on the open board. Without Chromium it fails: scripts/test
// installs it.
func TestDashboardMeasuresLoadsAndChanges(t *testing.T) {
	res, err := Dashboard(context.Background(), DashboardOptions{Store: "sqlite", Loads: 2, Changes: 3, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Browser == "" || res.Loads != 2 {
		t.Errorf("result = %+v", res)
	}
	// The page, its script and its style, and the reads behind the counts.
	if l := res.Load; l.Requests < 4 || l.BodyBytes <= 0 || l.Bytes <= l.BodyBytes || l.P50Ms <= 0 || l.MaxMs < l.P50Ms {
		t.Errorf("/ui/'s first load = %+v", l)
	}
	if r := res.RefLoad; r.Requests != 1 || r.BodyBytes != int64(len(refPage)) || r.Bytes <= r.BodyBytes || r.P50Ms <= 0 {
		t.Errorf("the reference's first load = %+v", r)
	}
	if res.Load.Bytes <= res.RefLoad.Bytes {
		t.Errorf("/ui/ carried %d bytes, no more than the reference's %d", res.Load.Bytes, res.RefLoad.Bytes)
	}
	c, rc := res.Change, res.RefChange
	if c.Changes != 3 || rc.Changes != 3 {
		t.Errorf("changes seen: %d in the browser, %d on the stream, want 3", c.Changes, rc.Changes)
	}
	// The stream reads the board's log every streamPoll: a card's event
	// comes within two reads, even on a busy machine.
	if c.P50Ms <= 0 || c.P99Ms < c.P50Ms || rc.P99Ms < rc.P50Ms || rc.P99Ms > 2*streamPoll.Seconds()*1000 {
		t.Errorf("change figures: browser %+v, stream %+v", c, rc)
	}
}

func TestDashboardOptions(t *testing.T) {
	for _, opt := range []DashboardOptions{{Store: "mysql"}, {Store: "sqlite", Loads: -1}, {Store: "sqlite", Changes: -1}} {
		if _, err := Dashboard(context.Background(), opt); err == nil {
			t.Errorf("Dashboard(%+v) = nil error", opt)
		}
	}
}
