package approvals

import "github.com/heraldgw/herald/internal/errs"

// CheckApproval refuses, with Invalid, an approval no store may create
// (Store.CreateApproval): one without an id, a conversation or a key, or
// one already decided.
func CheckApproval(op string, a Approval) error {
	switch {
	case a.ID == "":
		return errs.E(op, errs.Invalid, "approval without an id")
	case a.Conv == "":
		return errs.E(op, errs.Invalid, "approval %q without a conversation", a.ID)
	case a.Key == "":
		return errs.E(op, errs.Invalid, "approval %q without a key", a.ID)
	case !a.Pending():
		return errs.E(op, errs.Invalid, "approval %q is created decided (%s)", a.ID, a.Decision)
	}
	return nil
}

// CheckDecide refuses, with Invalid, what no store may decide
// (Store.Decide): no id, or a decision that is none of the six.
func CheckDecide(op, id string, d Decision) error {
	switch d {
	case Once, Session, Always, Deny, Timeout, Expired:
	default:
		return errs.E(op, errs.Invalid, "%q is no decision", d)
	}
	if id == "" {
		return errs.E(op, errs.Invalid, "no approval id")
	}
	return nil
}

// CheckScope refuses, with Invalid, a grant's scope that is neither a
// conversation's session (both set) nor always (both empty).
func CheckScope(op, conv, session string) error {
	if (conv == "") != (session == "") {
		return errs.E(op, errs.Invalid, "a grant is for a conversation and its session, or for neither (always): not conversation %q, session %q", conv, session)
	}
	return nil
}

// CheckGrant refuses, with Invalid, a grant no store may add
// (Store.AddGrant): one without a pattern, or with half a scope.
func CheckGrant(op string, g Grant) error {
	if g.Pattern == "" {
		return errs.E(op, errs.Invalid, "grant without a pattern")
	}
	return CheckScope(op, g.Conv, g.Session)
}

// CheckPattern refuses, with Invalid, an empty pattern (Store.Revoke).
func CheckPattern(op, pattern string) error {
	if pattern == "" {
		return errs.E(op, errs.Invalid, "no pattern")
	}
	return nil
}

// CheckMessage refuses, with Invalid, what no store may record as a
// question's message (Store.SetMessage): no id or no message id.
func CheckMessage(op, id, message string) error {
	if id == "" || message == "" {
		return errs.E(op, errs.Invalid, "an approval id and a message id are both needed")
	}
	return nil
}
