package lease

import "time"

// Claim is one process's fenced hold on a thing that runs for a while
// in that process (a child agent, a kanban card's worker), as opposed to
// an ownership lease (Store), which guards a platform connection. The
// domain that owns the thing keeps the claim in the thing's own record:
// Token grows with every grant of it, Expires is by the store's clock,
// and every write the holder makes about the thing checks the token in
// the same atomic step, so a holder that stalled past Expires and lost
// the thing writes nothing. A live holder renews its claims (Renewer); a
// dead one stops, and the domain finds its claims run out by the store's
// clock.
type Claim struct {
	Name    string    `json:"name"`  // what is held: the thing's id
	Owner   string    `json:"owner"` // the holding process
	Token   int64     `json:"token"`
	Expires time.Time `json:"expires"`
}
