package storetest

import "testing"

// Run runs every conformance case against b. Each case opens its stores on
// a fresh place from b.New, so cases never see each other's data.
func Run(t *testing.T, b Backend) {
	t.Run("Queue", func(t *testing.T) { runQueue(t, b) })
	t.Run("Dedupe", func(t *testing.T) { runDedupe(t, b) })
	t.Run("AppendMeta", func(t *testing.T) { runAppendMeta(t, b) })
	t.Run("AppendClaim", func(t *testing.T) { runAppendClaim(t, b) })
	t.Run("Lease", func(t *testing.T) { runLease(t, b) })
	t.Run("Fencing", func(t *testing.T) { runFencing(t, b) })
	t.Run("Ready", func(t *testing.T) { runReady(t, b) })
	t.Run("Finish", func(t *testing.T) { runFinish(t, b) })
	t.Run("Absorbed", func(t *testing.T) { runAbsorbed(t, b) })
	t.Run("FinishAndClaim", func(t *testing.T) { runFinishAndClaim(t, b) })
	t.Run("Handoff", func(t *testing.T) { runHandoff(t, b) })
	t.Run("Usage", func(t *testing.T) { runUsage(t, b) })
	t.Run("History", func(t *testing.T) { runHistory(t, b) })
	t.Run("QueueDepth", func(t *testing.T) { runQueueDepth(t, b) })
	t.Run("Timeline", func(t *testing.T) { runTimeline(t, b) })
	t.Run("Signals", func(t *testing.T) { runSignals(t, b) })
	t.Run("Notes", func(t *testing.T) { runNotes(t, b) })
	t.Run("Outbox", func(t *testing.T) { runOutbox(t, b) })
	t.Run("OutboxOrder", func(t *testing.T) { runOutboxOrder(t, b) })
	t.Run("OutboxFair", func(t *testing.T) { runOutboxFair(t, b) })
	t.Run("Durability", func(t *testing.T) { runDurability(t, b) })
	t.Run("BadInput", func(t *testing.T) { runBadInput(t, b) })
	t.Run("Load", func(t *testing.T) { runLoad(t, b) })
	t.Run("Ownership", func(t *testing.T) { runOwnership(t, b) })
}
