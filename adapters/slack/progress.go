package slack

// progress is how far a message split into parts got: its retry resumes
// at parts[sent] instead of posting the first parts again. It is kept
// in an adapters.SendProgress between attempts.
type progress struct {
	parts []string
	plain bool   // Slack refused the formatting; parts go with markup off
	sent  int    // parts Slack accepted
	first string // the ts of the first part
}
