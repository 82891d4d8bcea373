package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldgw/herald/approvals"
	"github.com/heraldgw/herald/outbox"
)

// TestApprovalsCommands lists, on a SQLite file another handle of the
// store wrote, the pending approvals, the decisions and the allowlist, as
// text and as JSON, and revokes an always grant, then one that is not
// there.
func TestApprovalsCommands(t *testing.T) {
	env := map[string]string{"HERALD_HOME": t.TempDir()}
	ctx := context.Background()
	seedApprovals(t, env)

	h := newHerald(env)
	if code := h.run(ctx, "approvals", "list"); code != 0 {
		t.Fatalf("approvals list: exit %d, stderr %q", code, h.stderr)
	}
	out := h.stdout.String()
	for _, want := range []string{"DEADLINE", "appr_p1", "telegram:100", "terminal", "rm -rf build/", "2031-03-04T05:06:07Z", "2031-03-04T05:11:07Z", "appr_p2"} {
		if !strings.Contains(out, want) {
			t.Errorf("approvals list printed %q, want %q in it", out, want)
		}
	}
	if strings.Contains(out, "appr_d1") {
		t.Errorf("approvals list printed the decided appr_d1: %q", out)
	}

	h = newHerald(env)
	if code := h.run(ctx, "approvals", "list", "--json", "--conv", "slack:C1"); code != 0 {
		t.Fatalf("approvals list --json: exit %d, stderr %q", code, h.stderr)
	}
	if got := approvalIDsOf(t, h.stdout.String()); !slices.Equal(got, []string{"appr_p2"}) {
		t.Errorf("approvals list --json --conv slack:C1 = %v, want [appr_p2]", got)
	}

	h = newHerald(env)
	if code := h.run(ctx, "approvals", "list", "--decided"); code != 0 {
		t.Fatalf("approvals list --decided: exit %d, stderr %q", code, h.stderr)
	}
	out = h.stdout.String()
	for _, want := range []string{"DECISION", "appr_d1", "always", "u-7", "2031-03-04T05:07:07Z"} {
		if !strings.Contains(out, want) {
			t.Errorf("approvals list --decided printed %q, want %q in it", out, want)
		}
	}

	h = newHerald(env)
	if code := h.run(ctx, "approvals", "list", "--decided", "--json", "--conv", "discord:9"); code != 0 || strings.TrimSpace(h.stdout.String()) != "[]" {
		t.Errorf("approvals list --decided --json of a conversation with none: exit %d, printed %q; want []", code, h.stdout)
	}

	h = newHerald(env)
	if code := h.run(ctx, "approvals", "allowlist"); code != 0 {
		t.Fatalf("approvals allowlist: exit %d, stderr %q", code, h.stderr)
	}
	out = h.stdout.String()
	for _, want := range []string{"GRANTED BY", "sudo", "u-7", "appr_d1", "2031-03-04T05:07:07Z"} {
		if !strings.Contains(out, want) {
			t.Errorf("approvals allowlist printed %q, want %q in it", out, want)
		}
	}
	if strings.Contains(out, "git push") {
		t.Errorf("approvals allowlist printed a session's grant: %q", out)
	}

	h = newHerald(env)
	if code := h.run(ctx, "approvals", "allowlist", "--json"); code != 0 {
		t.Fatalf("approvals allowlist --json: exit %d, stderr %q", code, h.stderr)
	}
	var grants []approvals.Grant
	if err := json.Unmarshal([]byte(h.stdout.String()), &grants); err != nil || len(grants) != 1 || grants[0].Pattern != "sudo" || grants[0].Approval != "appr_d1" {
		t.Errorf("approvals allowlist --json = %+v (%v), want the sudo grant", grants, err)
	}

	h = newHerald(env)
	if code := h.run(ctx, "approvals", "revoke", "sudo"); code != 0 || !strings.Contains(h.stdout.String(), "off the allowlist") {
		t.Fatalf("approvals revoke sudo: exit %d, printed %q, stderr %q", code, h.stdout, h.stderr)
	}
	h = newHerald(env)
	if code := h.run(ctx, "approvals", "allowlist"); code != 0 || !strings.Contains(h.stdout.String(), "no always-allowed patterns") {
		t.Errorf("approvals allowlist after the revoke: exit %d, printed %q", code, h.stdout)
	}
	h = newHerald(env)
	if code := h.run(ctx, "approvals", "revoke", "sudo"); code != 1 || !strings.Contains(h.stderr.String(), `sudo is not on the allowlist`) {
		t.Errorf("a second revoke: exit %d, stderr %q; want 1 saying sudo is not on the allowlist", code, h.stderr)
	}
	// A session's grant is not the allowlist's to revoke.
	h = newHerald(env)
	if code := h.run(ctx, "approvals", "revoke", "git push"); code != 1 {
		t.Errorf("revoking a session's pattern: exit %d, stderr %q; want 1", code, h.stderr)
	}
}

func TestApprovalsUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"approvals", "revoke"},
		{"approvals", "revoke", "a", "b"},
		{"approvals", "revoke", " "},
		{"approvals", "list", "extra"},
		{"approvals", "list", "--decided", "--limit", "-1"},
		{"approvals", "allowlist", "extra"},
		{"approvals", "grant"},
	} {
		h := newHerald(map[string]string{"HERALD_HOME": t.TempDir()})
		if code := h.run(context.Background(), args...); code != exitUsage {
			t.Errorf("herald %v: exit %d, stderr %q; want %d", args, code, h.stderr, exitUsage)
		}
	}
}

// seedApprovals writes, in the store env names, two pending approvals,
// one decided "Always allow" with the grant it left, and a session's
// grant.
func seedApprovals(t *testing.T, env map[string]string) {
	t.Helper()
	ctx := context.Background()
	s := openTestStore(t, env).Approvals()
	at := time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC)
	ask := func(id, conv, key, action string) {
		t.Helper()
		a := approvals.Approval{ID: id, Conv: conv, Key: key, Session: "s1", Target: outbox.Target{Platform: "telegram", Chat: "100"},
			Tool: "terminal", Action: action, Pattern: "rm -rf", CreatedAt: at, Deadline: at.Add(approvals.DefaultTimeout)}
		if err := s.CreateApproval(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	ask("appr_d1", "telegram:100", "e1:call-0", "sudo systemctl restart nginx")
	ask("appr_p1", "telegram:100", "e2:call-1", "rm -rf build/")
	ask("appr_p2", "slack:C1", "e1:call-1", "rm -rf /tmp/x")
	decidedAt := at.Add(time.Minute)
	if _, err := s.Decide(ctx, "appr_d1", approvals.Always, "u-7", decidedAt, "m-1"); err != nil {
		t.Fatal(err)
	}
	for _, g := range []approvals.Grant{
		{Pattern: "sudo", GrantedBy: "u-7", Approval: "appr_d1", At: decidedAt},
		{Pattern: "git push", Conv: "telegram:100", Session: "s1", GrantedBy: "u-7", At: decidedAt},
	} {
		if err := s.AddGrant(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
}

func approvalIDsOf(t *testing.T, out string) []string {
	t.Helper()
	var as []approvals.Approval
	if err := json.Unmarshal([]byte(out), &as); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	var ids []string
	for _, a := range as {
		ids = append(ids, a.ID)
	}
	return ids
}
