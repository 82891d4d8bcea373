package storetest

import (
	"slices"
	"testing"
)

// RunAll runs every group of the suite against b, each as a subtest named
// for the group. A group of a domain b lacks skips, saying so. Each case
// opens its stores on a fresh place from b.New, so cases never see each
// other's data.
func RunAll(t *testing.T, b Backend) {
	group := func(name string, d Domain, run func(*testing.T, Backend)) {
		t.Run(name, func(t *testing.T) {
			if slices.Contains(b.Lacks, d) {
				t.Skipf("%s lacks %s", b.Name, d)
			}
			run(t, b)
		})
	}
	group("Queue", Sessions, runQueue)
	group("Dedupe", Sessions, runDedupe)
	group("AppendMeta", Sessions, runAppendMeta)
	group("TurnMark", Sessions, runTurnMark)
	group("AppendClaim", Sessions, runAppendClaim)
	group("Lease", Sessions, runLease)
	group("Fencing", Sessions, runFencing)
	group("Ready", Sessions, runReady)
	group("Finish", Sessions, runFinish)
	group("Absorbed", Sessions, runAbsorbed)
	group("FinishAndClaim", Sessions, runFinishAndClaim)
	group("Handoff", Sessions, runHandoff)
	group("Usage", Sessions, runUsage)
	group("History", Sessions, runHistory)
	group("QueueDepth", Sessions, runQueueDepth)
	group("Timeline", Sessions, runTimeline)
	group("Conversations", Sessions, runConversations)
	group("Signals", Sessions, runSignals)
	group("Notes", Sessions, runNotes)
	group("Outbox", Outbox, runOutbox)
	group("OutboxOrder", Outbox, runOutboxOrder)
	group("OutboxFair", Outbox, runOutboxFair)
	group("Durability", Sessions, runDurability)
	group("BadInput", Sessions, runBadInput)
	group("Load", Sessions, runLoad)
	group("Ownership", Leases, runOwnership)
	group("Delegations", Delegations, runDelegations)
	group("Cron", Cron, runCron)
	group("Once", Once, runOnce)
	group("CronFires", Cron, runCronFires)
	group("Pools", Pools, runPools)
	group("Kanban", Kanban, runKanban)
	group("Controllers", Controllers, runControllers)
	group("Cursors", Cursors, runCursors)
	group("Files", Files, runFiles)
	group("Approvals", Approvals, runApprovals)
	group("Instances", Instances, runInstances)
}
