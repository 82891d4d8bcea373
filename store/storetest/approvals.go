package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/internal/errs"
	"github.com/heraldgw/herald/outbox"
	"github.com/heraldgw/herald/sessions"
)

// runApprovals checks approvals.Store: an approval kept whole across a
// reopen, a second question under the same key expiring the first, one
// decision and a Conflict naming it for the next, the lists of pending
// and decided approvals in their orders, grants in their scopes, and bad
// input refused.
func runApprovals(t *testing.T, b Backend) {
	t.Run("create and read, across a reopen", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		a := f.ask("appr_1", "c1", "e1:call-1")
		f.reopen(false)
		got, err := f.st.Approvals().Approval(f.ctx, "appr_1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a, got, timeOpts); diff != "" {
			t.Errorf("Approval after a reopen (-created +read):\n%s", diff)
		}
		if !got.Pending() {
			t.Errorf("a new approval is not pending: %+v", got)
		}
		_, err = f.st.Approvals().Approval(f.ctx, "appr_none")
		wantCode(t, "Approval of an unknown id", err, errs.NotFound)
		again := a
		again.Key = "e2:call-1"
		wantCode(t, "CreateApproval of an id that exists", f.st.Approvals().CreateApproval(f.ctx, again), errs.Conflict)
		f.wantPending("after the refused create", "", "appr_1")
	})
	t.Run("a second question under the same key expires the first", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.ask("appr_1", "c1", "e1:call-1")
		f.ask("appr_2", "c1", "e1:call-2")
		f.ask("appr_3", "c2", "e1:call-1") // same key, another conversation
		again := f.ask("appr_4", "c1", "e1:call-1")
		got, err := f.st.Approvals().Approval(f.ctx, "appr_1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Decision != approvals.Expired || !got.DecidedAt.Equal(again.CreatedAt) {
			t.Errorf("the first question = %s at %v, want %s at %v (the second's ask)", got.Decision, got.DecidedAt, approvals.Expired, again.CreatedAt)
		}
		f.wantPending("conversation c1", "c1", "appr_2", "appr_4")
		f.wantPending("every conversation", "", "appr_2", "appr_3", "appr_4")
		f.wantDecided("conversation c1", "c1", 0, "appr_1")
		// A press on the expired question comes too late.
		got, err = f.st.Approvals().Decide(f.ctx, "appr_1", approvals.Once, "u-1", f.clk.Now(), "")
		wantCode(t, "Decide of an expired approval", err, errs.Conflict)
		if got.ID != "appr_1" || got.Decision != approvals.Expired {
			t.Errorf("Decide of an expired approval returned %s %s, want appr_1 %s", got.ID, got.Decision, approvals.Expired)
		}
	})
	t.Run("decided once, then Conflict naming the decision", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		a := f.ask("appr_1", "c1", "e1:call-1")
		f.ask("appr_2", "c1", "e1:call-2")
		at := f.clk.Now().Add(time.Second)
		got, err := f.st.Approvals().Decide(f.ctx, "appr_1", approvals.Session, "u-1", at, "m-77")
		if err != nil {
			t.Fatal(err)
		}
		want := a
		want.Decision, want.DecidedBy, want.DecidedAt, want.MessageID = approvals.Session, "u-1", at, "m-77"
		if diff := cmp.Diff(want, got, timeOpts); diff != "" {
			t.Errorf("Decide's approval (-want +got):\n%s", diff)
		}
		f.reopen(false)
		read, err := f.st.Approvals().Approval(f.ctx, "appr_1")
		if err != nil || !cmp.Equal(want, read, timeOpts) {
			t.Errorf("Approval after Decide = %+v (%v), want %+v", read, err, want)
		}
		late, err := f.st.Approvals().Decide(f.ctx, "appr_1", approvals.Deny, "u-2", at.Add(time.Second), "m-78")
		wantCode(t, "a second Decide", err, errs.Conflict)
		if diff := cmp.Diff(want, late, timeOpts); diff != "" {
			t.Errorf("a second Decide returned (-the first decision +got):\n%s", diff)
		}
		// An answer without a message leaves the message id alone.
		got, err = f.st.Approvals().Decide(f.ctx, "appr_2", approvals.Timeout, "", at, "")
		if err != nil || got.Decision != approvals.Timeout || got.MessageID != "" {
			t.Errorf("Decide(appr_2, timeout) = %s, message %q (%v)", got.Decision, got.MessageID, err)
		}
		_, err = f.st.Approvals().Decide(f.ctx, "appr_none", approvals.Once, "u-1", at, "")
		wantCode(t, "Decide of an unknown id", err, errs.NotFound)
		f.wantPending("after both were decided", "")
	})
	t.Run("the question's message, recorded once sent, is kept by its decision", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.ask("appr_1", "c1", "e1:call-1")
		if err := f.st.Approvals().SetMessage(f.ctx, "appr_1", "m-5"); err != nil {
			t.Fatal(err)
		}
		f.reopen(false)
		got, err := f.st.Approvals().Approval(f.ctx, "appr_1")
		if err != nil || got.MessageID != "m-5" || !got.Pending() {
			t.Errorf("Approval after SetMessage = message %q, pending %v (%v); want m-5, pending", got.MessageID, got.Pending(), err)
		}
		got, err = f.st.Approvals().Decide(f.ctx, "appr_1", approvals.Timeout, approvals.Herald, f.clk.Now(), "")
		if err != nil || got.MessageID != "m-5" {
			t.Errorf("Decide without a message = message %q (%v), want m-5 kept", got.MessageID, err)
		}
		wantCode(t, "SetMessage of an unknown id", f.st.Approvals().SetMessage(f.ctx, "appr_none", "m-6"), errs.NotFound)
		wantCode(t, "SetMessage without a message", f.st.Approvals().SetMessage(f.ctx, "appr_1", ""), errs.Invalid)
	})
	t.Run("of presses at once one decides", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		// A conversation key with the characters a backend's own syntax
		// may use.
		const conv = "slack:{C1}%7D:x"
		f.ask("appr_1", conv, "e1:call-1")
		const presses = 8
		type press struct {
			a   approvals.Approval
			err error
		}
		got := make(chan press, presses)
		for i := range presses {
			go func() {
				a, err := f.st.Approvals().Decide(f.ctx, "appr_1", approvals.Once, fmt.Sprintf("u-%d", i), f.clk.Now(), "")
				got <- press{a, err}
			}()
		}
		var won []string
		var losers []press
		for range presses {
			p := <-got
			switch {
			case p.err == nil:
				won = append(won, p.a.DecidedBy)
			case errs.Is(p.err, errs.Conflict):
				losers = append(losers, p)
			default:
				t.Errorf("a press: %v, want nil or Conflict", p.err)
			}
		}
		if len(won) != 1 {
			t.Fatalf("%d presses decided (%v), want 1", len(won), won)
		}
		for _, p := range losers {
			if p.a.DecidedBy != won[0] || p.a.Decision != approvals.Once {
				t.Errorf("a late press was told %s by %q, want once by %q", p.a.Decision, p.a.DecidedBy, won[0])
			}
		}
		f.wantPending("after the presses", conv)
		f.wantDecided("after the presses", conv, 0, "appr_1")

		// Questions asked at once under one key leave one pending.
		errc := make(chan error, presses)
		for i := range presses {
			go func() {
				a := approvals.Approval{ID: fmt.Sprintf("appr_again_%d", i), Conv: conv, Key: "e1:call-2", CreatedAt: f.clk.Now()}
				errc <- f.st.Approvals().CreateApproval(f.ctx, a)
			}()
		}
		for range presses {
			if err := <-errc; err != nil {
				t.Errorf("CreateApproval at once: %v", err)
			}
		}
		pending, err := f.st.Approvals().PendingApprovals(f.ctx, conv)
		if err != nil || len(pending) != 1 {
			t.Errorf("PendingApprovals after questions at once under one key = %v (%v), want one", approvalIDs(pending), err)
		}
		if decided, err := f.st.Approvals().Decided(f.ctx, "", 0); err != nil || len(decided) != presses {
			t.Errorf("Decided after questions at once = %v (%v), want the first and %d expired", approvalIDs(decided), err, presses-1)
		}
	})
	t.Run("pending oldest first, decided newest first", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		f.ask("appr_b", "c1", "e1:call-1")
		f.ask("appr_a", "c2", "e1:call-1")
		f.ask("appr_c", "c1", "e2:call-1")
		f.wantPending("conversation c1", "c1", "appr_b", "appr_c")
		f.wantPending("every conversation", "", "appr_b", "appr_a", "appr_c")
		f.wantPending("a conversation with none", "c-none")
		f.wantDecided("before any decision", "", 0)
		for _, id := range []string{"appr_c", "appr_a", "appr_b"} {
			f.clk.Advance(time.Second)
			if _, err := f.st.Approvals().Decide(f.ctx, id, approvals.Deny, "u-1", f.clk.Now(), ""); err != nil {
				t.Fatal(err)
			}
		}
		f.wantPending("after every decision", "")
		f.wantDecided("every conversation", "", 0, "appr_b", "appr_a", "appr_c")
		f.wantDecided("every conversation, two", "", 2, "appr_b", "appr_a")
		f.wantDecided("conversation c1", "c1", 0, "appr_b", "appr_c")
		f.wantDecided("conversation c1, one", "c1", 1, "appr_b")
		f.wantDecided("conversation c2", "c2", 0, "appr_a")
	})
	t.Run("grants in their scopes", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		at := f.clk.Now()
		grant := func(pattern, conv, session, by string) approvals.Grant {
			return approvals.Grant{Pattern: pattern, Conv: conv, Session: session, GrantedBy: by, Approval: "appr_" + by, At: at}
		}
		rm := grant("rm -rf", "c1", "s1", "u-1")
		gitPush := grant("git push", "c1", "s2", "u-1")
		curl := grant("curl", "c2", "s1", "u-2")
		sudo := grant("sudo", "", "", "u-1")
		docker := grant("docker", "", "", "u-3")
		for _, g := range []approvals.Grant{rm, gitPush, curl, sudo, docker, rm} {
			if err := f.st.Approvals().AddGrant(f.ctx, g); err != nil {
				t.Fatalf("AddGrant(%+v): %v", g, err)
			}
		}
		// The same pattern for the same scope again replaces it.
		sudo.GrantedBy, sudo.Approval = "u-2", "appr_later"
		if err := f.st.Approvals().AddGrant(f.ctx, sudo); err != nil {
			t.Fatal(err)
		}
		f.reopen(false)
		f.wantGrants("conversation c1, session s1", "c1", "s1", rm, docker, sudo)
		f.wantGrants("conversation c1, session s2", "c1", "s2", gitPush, docker, sudo)
		f.wantGrants("a session with none", "c1", "s-new", docker, sudo)
		f.wantGrants("the always grants", "", "", docker, sudo)

		gone, err := f.st.Approvals().Revoke(f.ctx, "sudo")
		if err != nil || !gone {
			t.Errorf("Revoke(sudo) = %v (%v), want true", gone, err)
		}
		gone, err = f.st.Approvals().Revoke(f.ctx, "sudo")
		if err != nil || gone {
			t.Errorf("Revoke(sudo) again = %v (%v), want false", gone, err)
		}
		// Revoke is of always grants: a session's stays.
		gone, err = f.st.Approvals().Revoke(f.ctx, "rm -rf")
		if err != nil || gone {
			t.Errorf("Revoke of a session's pattern = %v (%v), want false", gone, err)
		}
		f.wantGrants("after the revokes", "c1", "s1", rm, docker)
	})
	t.Run("bad input", func(t *testing.T) {
		f := newFixture(t, b, sessions.Limits{})
		as := f.st.Approvals()
		good := f.ask("appr_1", "c1", "e1:call-1")
		for _, bad := range []func(*approvals.Approval){
			func(a *approvals.Approval) { a.ID = "" },
			func(a *approvals.Approval) { a.Conv = "" },
			func(a *approvals.Approval) { a.Key = "" },
			func(a *approvals.Approval) { a.Decision = approvals.Once },
		} {
			a := good
			a.ID = "appr_bad"
			bad(&a)
			wantCode(t, "CreateApproval of "+a.ID+"/"+a.Conv+"/"+a.Key+"/"+string(a.Decision), as.CreateApproval(f.ctx, a), errs.Invalid)
		}
		f.wantPending("after the refused creates", "", "appr_1")
		_, err := as.Decide(f.ctx, "appr_1", "maybe", "u-1", f.clk.Now(), "")
		wantCode(t, "Decide with no decision of the six", err, errs.Invalid)
		_, err = as.Decide(f.ctx, "", approvals.Once, "u-1", f.clk.Now(), "")
		wantCode(t, "Decide without an id", err, errs.Invalid)
		f.wantPending("after the refused decisions", "", "appr_1")
		for _, g := range []approvals.Grant{
			{Pattern: "", GrantedBy: "u-1"},
			{Pattern: "sudo", Conv: "c1", GrantedBy: "u-1"},
			{Pattern: "sudo", Session: "s1", GrantedBy: "u-1"},
		} {
			wantCode(t, "AddGrant of "+g.Pattern+"/"+g.Conv+"/"+g.Session, as.AddGrant(f.ctx, g), errs.Invalid)
		}
		f.wantGrants("after the refused grants", "", "")
		_, err = as.Grants(f.ctx, "c1", "")
		wantCode(t, "Grants of a conversation without a session", err, errs.Invalid)
		_, err = as.Grants(f.ctx, "", "s1")
		wantCode(t, "Grants of a session without a conversation", err, errs.Invalid)
		_, err = as.Revoke(f.ctx, "")
		wantCode(t, "Revoke of no pattern", err, errs.Invalid)
	})
}

// ask creates a pending approval of conv under key, asked now, the
// clock moving a tick on after it, and returns it.
func (f *fixture) ask(id, conv, key string) approvals.Approval {
	f.t.Helper()
	now := f.clk.Now()
	a := approvals.Approval{
		ID: id, Conv: conv, Key: key, Session: "s1",
		Target: outbox.Target{Platform: "telegram", Chat: "42", Thread: "7"},
		Tool:   "terminal", Action: "rm -rf build/", Reason: "recursive delete", Pattern: "rm -rf",
		Asker: "u-1", CreatedAt: now, Deadline: now.Add(approvals.DefaultTimeout),
	}
	if err := f.st.Approvals().CreateApproval(f.ctx, a); err != nil {
		f.t.Fatalf("CreateApproval(%s): %v", id, err)
	}
	f.clk.Advance(tick)
	return a
}

// wantPending checks the ids PendingApprovals lists for conv, in order.
func (f *fixture) wantPending(when, conv string, ids ...string) {
	f.t.Helper()
	got, err := f.st.Approvals().PendingApprovals(f.ctx, conv)
	if err != nil {
		f.t.Fatalf("%s: PendingApprovals(%q): %v", when, conv, err)
	}
	for _, a := range got {
		if !a.Pending() {
			f.t.Errorf("%s: PendingApprovals(%q) lists %s decided %s", when, conv, a.ID, a.Decision)
		}
	}
	if diff := cmp.Diff(ids, approvalIDs(got), timeOpts); diff != "" {
		f.t.Errorf("%s: PendingApprovals(%q) (-want +got):\n%s", when, conv, diff)
	}
}

// wantDecided checks the ids Decided lists for conv, in order.
func (f *fixture) wantDecided(when, conv string, n int, ids ...string) {
	f.t.Helper()
	got, err := f.st.Approvals().Decided(f.ctx, conv, n)
	if err != nil {
		f.t.Fatalf("%s: Decided(%q, %d): %v", when, conv, n, err)
	}
	for _, a := range got {
		if a.Pending() {
			f.t.Errorf("%s: Decided(%q) lists %s pending", when, conv, a.ID)
		}
	}
	if diff := cmp.Diff(ids, approvalIDs(got), timeOpts); diff != "" {
		f.t.Errorf("%s: Decided(%q, %d) (-want +got):\n%s", when, conv, n, diff)
	}
}

func approvalIDs(as []approvals.Approval) []string {
	var ids []string
	for _, a := range as {
		ids = append(ids, a.ID)
	}
	return ids
}

// wantGrants checks what Grants lists for a scope: the session's grants,
// then the always grants, each by pattern.
func (f *fixture) wantGrants(when, conv, session string, want ...approvals.Grant) {
	f.t.Helper()
	got, err := f.st.Approvals().Grants(f.ctx, conv, session)
	if err != nil {
		f.t.Fatalf("%s: Grants(%q, %q): %v", when, conv, session, err)
	}
	if diff := cmp.Diff(want, got, timeOpts); diff != "" {
		f.t.Errorf("%s: Grants(%q, %q) (-want +got):\n%s", when, conv, session, diff)
	}
}
