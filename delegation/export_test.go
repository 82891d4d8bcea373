package delegation

// ClaimPasses reports how many passes the claim loop has made.
func (r *Runner) ClaimPasses() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.passes
}
