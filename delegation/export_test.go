package delegation

import "time"

// ClaimPasses reports how many passes the claim loop has made.
func (r *Runner) ClaimPasses() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.passes
}

// StatusKey is the metadata key of a delegation's status line.
func StatusKey(id string) string { return statusKey(id) }

// Worker is the log of worker id of the orchestrator tr logs.
func (tr *Transcript) Worker(at time.Time, id, goal string) *Transcript {
	return tr.worker(at, id, goal)
}
