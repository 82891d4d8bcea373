package redis

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/cronjobs"
	"github.com/heraldgw/herald/internal/clock"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/internal/testkit"
	"github.com/heraldgw/herald/lease"
	"github.com/heraldgw/herald/sessions"
)

// TestShardedCronPlacement: a job's fires are claimed in its shard, a
// fire named after another job is refused rather than claimed in a slot
// the job is not in, a turn's new job is one write whose home is the
// job's shard, and the due jobs of every shard come back merged by due
// time up to the limit.
func TestShardedCronPlacement(t *testing.T) {
	ctx := context.Background()
	db, clk := openSharded(t)
	t0 := clk.Now()
	a, b := convsInShards(t, db) // two names of two shards, as job ids
	for _, job := range []string{a, b} {
		fire := "cron:" + job + ":1767225600"
		if db.onceShard(fire) != db.shards.of(job) {
			t.Errorf("fire %s is in shard %d, its job in %d", fire, db.onceShard(fire), db.shards.of(job))
		}
	}
	_, err := db.Cron().StartFire(ctx, cronjobs.FireStart{Fire: "cron:" + b + ":1", Owner: "gw-a", TTL: time.Minute,
		Run: cronjobs.Run{ID: "run_1", Job: a}})
	if !errs.Is(err, errs.Invalid) {
		t.Errorf("StartFire of a fire named after another job: %v, want Invalid", err)
	}

	ops, err := db.createJobOps("test", cronjobs.Job{ID: b, Name: "n", Prompt: "p",
		Schedule: cronjobs.Schedule{Kind: cronjobs.KindInterval, Expr: "every 1h", Every: time.Hour}, Enabled: true, NextRunAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].cmd != "CRONNEW" || ops[0].home != db.pfxOf(b) {
		t.Errorf("createJobOps = %+v, want one CRONNEW at home %q", ops, db.pfxOf(b))
	}

	var want []string
	for n := range 8 {
		id := fmt.Sprint("job_", n)
		due := t0.Add(time.Duration(8-n) * time.Minute) // the last made is due first
		_, err := db.Cron().CreateJob(ctx, cronjobs.Job{ID: id, Name: "n", Prompt: "p",
			Schedule: cronjobs.Schedule{Kind: cronjobs.KindInterval, Expr: "every 1h", Every: time.Hour}, Enabled: true, NextRunAt: due})
		if err != nil {
			t.Fatal(err)
		}
		want = append([]string{id}, want...)
	}
	due, err := db.Cron().DueJobs(ctx, t0.Add(time.Hour), 5)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range due {
		got = append(got, j.ID)
	}
	if diff := cmp.Diff(want[:5], got); diff != "" {
		t.Errorf("DueJobs over four shards (-want +got):\n%s", diff)
	}
	if next, ok, err := db.Cron().NextDue(ctx); err != nil || !ok || !next.Equal(t0.Add(time.Minute)) {
		t.Errorf("NextDue = %v, %v, %v; want %v", next, ok, err, t0.Add(time.Minute))
	}
}

// TestShardedOnceStale: fires of several shards whose claims ran out
// come back oldest claim first, up to the limit.
func TestShardedOnceStale(t *testing.T) {
	ctx := context.Background()
	db, clk := openSharded(t)
	var want []string
	for n := range 6 {
		id := fmt.Sprint("cron:job_", n, ":1")
		if _, st, err := db.Once().ClaimOnce(ctx, id, "gw-a", time.Minute); err != nil || st != lease.OnceClaimed {
			t.Fatalf("ClaimOnce(%s) = %s, %v", id, st, err)
		}
		want = append(want, id)
		clk.Advance(time.Second)
	}
	clk.Advance(time.Hour)
	got, err := db.Once().StaleOnce(ctx, "cron:", 4)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[:4], got); diff != "" {
		t.Errorf("StaleOnce over four shards (-want +got):\n%s", diff)
	}
}

// TestShardedApprovalIDs: an approval's id is found in its
// conversation's shard by another store on the same server, and taken
// there, it is a Conflict for a conversation of another shard too.
func TestShardedApprovalIDs(t *testing.T) {
	ctx := context.Background()
	t0 := epoch
	p := shardedPlace{place{testkit.StartRedis(t)}}
	db := p.Open(t, clock.NewFake(t0), sessions.Limits{}).(*DB)
	c1, c2 := convsInShards(t, db)
	a := approvals.Approval{ID: "ap_1", Conv: c1, Key: "e1", CreatedAt: t0, Deadline: t0.Add(time.Hour)}
	if err := db.Approvals().CreateApproval(ctx, a); err != nil {
		t.Fatal(err)
	}
	other := p.Open(t, clock.NewFake(t0), sessions.Limits{}).(*DB) // remembers nothing
	if got, err := other.Approvals().Approval(ctx, "ap_1"); err != nil || got.Conv != c1 {
		t.Errorf("Approval from another store = %+v, %v", got, err)
	}
	again := a
	again.Conv = c2
	if err := other.Approvals().CreateApproval(ctx, again); !errs.Is(err, errs.Conflict) {
		t.Errorf("CreateApproval of a taken id in another shard: %v, want Conflict", err)
	}
	if _, err := other.Approvals().Decide(ctx, "ap_none", approvals.Deny, "u", t0, ""); !errs.Is(err, errs.NotFound) {
		t.Errorf("Decide of an unknown id: %v, want NotFound", err)
	}
}

// TestMergeOrdered: lists merged keep each list's order, the lower
// list's first on a tie.
func TestMergeOrdered(t *testing.T) {
	type item struct {
		key  int
		list string
	}
	lists := [][]item{{{1, "a"}, {3, "a"}, {3, "a"}}, nil, {{0, "c"}, {3, "c"}, {9, "c"}}}
	got := mergeOrdered(lists, func(x, y item) bool { return x.key < y.key })
	want := []item{{0, "c"}, {1, "a"}, {3, "a"}, {3, "a"}, {3, "c"}, {9, "c"}}
	if !slices.Equal(got, want) {
		t.Errorf("mergeOrdered = %v, want %v", got, want)
	}
	if got := mergeOrdered([][]item{nil}, func(x, y item) bool { return false }); got == nil || len(got) != 0 {
		t.Errorf("mergeOrdered of one empty list = %#v, want empty, not nil", got)
	}
}

// TestAnsweringShards: a shard that is unavailable is left out of a
// loop's read, unless every shard is; any other error fails the read.
func TestAnsweringShards(t *testing.T) {
	db := &DB{shards: newLayout("p:", 4)}
	read := func(fail map[int]errs.Code) func(context.Context, int) (int, error) {
		return func(_ context.Context, i int) (int, error) {
			if c, ok := fail[i]; ok {
				return 0, errs.E("test", c, "shard %d", i)
			}
			return i + 1, nil
		}
	}
	ctx := context.Background()
	if got, err := answeringShards(ctx, db, read(map[int]errs.Code{2: errs.Unavailable})); err != nil || !slices.Equal(got, []int{1, 2, 0, 4}) {
		t.Errorf("with shard 2 unavailable = %v, %v; want [1 2 0 4]", got, err)
	}
	if _, err := answeringShards(ctx, db, read(map[int]errs.Code{0: errs.Unavailable, 1: errs.Unavailable, 2: errs.Unavailable, 3: errs.Unavailable})); !errs.Is(err, errs.Unavailable) {
		t.Errorf("with every shard unavailable: %v, want Unavailable", err)
	}
	if _, err := answeringShards(ctx, db, read(map[int]errs.Code{1: errs.Internal})); !errs.Is(err, errs.Internal) {
		t.Errorf("with shard 1 failing Internal: %v, want Internal", err)
	}
	if _, err := everyShard(ctx, db, read(map[int]errs.Code{2: errs.Unavailable})); !errs.Is(err, errs.Unavailable) {
		t.Errorf("everyShard with shard 2 unavailable: %v, want Unavailable", err)
	}
}
