package redis

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"strings"
)

//go:embed lua/*.lua
var luaFS embed.FS

// The scripts run as the functions of one Lua library, loaded with
// FUNCTION LOAD and called with FCALL. The library holds the helpers
// (lua/lib.lua, then the lua/lib_*.lua files) once and each script's file
// as the body of a function whose parameters are named KEYS and ARGV, as
// an EVAL script's globals are. Loaded once, the helpers are made once,
// not on every call as they would be in front of an EVAL script, and a
// call skips EVAL's own setup, which together is a good part of what a
// short script costs.
//
// The library and its functions are named after a hash of the sources,
// herald_<hash> and herald_<hash>_<script>, so that processes of two
// herald versions sharing a server, as in a rolling upgrade, each call
// their own code. A server keeps the libraries of earlier versions until
// someone deletes them (FUNCTION DELETE); they take little room.
var (
	scriptQAppend       = newScript("q_append")
	scriptQClaim        = newScript("q_claim")
	scriptQNext         = newScript("q_next")
	scriptQRenew        = newScript("q_renew")
	scriptQRelease      = newScript("q_release")
	scriptQFinish       = newScript("q_finish")
	scriptQHistory      = newScript("q_history")
	scriptQClearHistory = newScript("q_clear_history")
	scriptQMeta         = newScript("q_meta")
	scriptFwdApply      = newScript("fwd_apply")
	scriptFwdDue        = newScript("fwd_due")

	scriptTlAppend  = newScript("tl_append")
	scriptSigAppend = newScript("sig_append")
	scriptNoteAdd   = newScript("note_add")
	scriptNoteDel   = newScript("note_del")

	scriptObEnqueue = newScript("ob_enqueue")
	scriptObClaim   = newScript("ob_claim")
	scriptObAck     = newScript("ob_ack")
	scriptObRelease = newScript("ob_release")
	scriptObDead    = newScript("ob_dead")
	scriptObRequeue = newScript("ob_requeue")
	scriptObList    = newScript("ob_list")
	scriptObParts   = newScript("ob_parts")
	scriptObBeat    = newScript("ob_beat")
	scriptObPeek    = newScript("ob_peek")

	scriptQDepth   = newScript("q_depth")
	scriptConvList = newScript("conv_list")

	scriptDlgCreate      = newScript("dlg_create")
	scriptDlgStart       = newScript("dlg_start")
	scriptDlgClaim       = newScript("dlg_claim")
	scriptDlgRenew       = newScript("dlg_renew")
	scriptDlgEnd         = newScript("dlg_end")
	scriptDlgStop        = newScript("dlg_stop")
	scriptDlgSteer       = newScript("dlg_steer")
	scriptDlgExpired     = newScript("dlg_expired")
	scriptDlgCmpClaim    = newScript("dlg_cmp_claim")
	scriptDlgCmpAck      = newScript("dlg_cmp_ack")
	scriptDlgCmpRetry    = newScript("dlg_cmp_retry")
	scriptDlgRead        = newScript("dlg_read")
	scriptDlgCompletions = newScript("dlg_completions")
	scriptDlgPending     = newScript("dlg_pending")

	scriptCronPut    = newScript("cron_put")
	scriptCronRemove = newScript("cron_remove")
	scriptCronRead   = newScript("cron_read")
	scriptCronRunPut = newScript("cron_run_put")
	scriptCronRuns   = newScript("cron_runs")

	scriptCronFireStart = newScript("cron_fire_start")
	scriptCronFireEnd   = newScript("cron_fire_end")

	scriptOnceClaim = newScript("once_claim")
	scriptOnceRenew = newScript("once_renew")
	scriptOnceDone  = newScript("once_done")
	scriptOnceStale = newScript("once_stale")

	scriptKbApply   = newScript("kb_apply")
	scriptKbRead    = newScript("kb_read")
	scriptKbEvents  = newScript("kb_events")
	scriptKbSubPut  = newScript("kb_sub_put")
	scriptKbSubRead = newScript("kb_sub_read")

	scriptKbLaneRead = newScript("kb_lane_read")

	scriptCtlPut    = newScript("ctl_put")
	scriptCtlDelete = newScript("ctl_delete")
	scriptCtlRead   = newScript("ctl_read")

	scriptPoolRead  = newScript("pool_read")
	scriptPoolUse   = newScript("pool_use")
	scriptPoolCount = newScript("pool_count")
	scriptPoolMark  = newScript("pool_mark")

	scriptApprCreate = newScript("appr_create")
	scriptApprDecide = newScript("appr_decide")
	scriptApprRead   = newScript("appr_read")

	scriptInstBeat = newScript("inst_beat")
	scriptInstList = newScript("inst_list")
)

// helperFiles are put in this order at the head of the library: a helper
// calls only those defined before it.
var helperFiles = []string{"lib", "lib_queue", "lib_claim", "lib_outbox", "lib_delegation", "lib_cron", "lib_once", "lib_kanban", "lib_controllers", "lib_notes"}

// scriptFiles are the library's functions.
var scriptFiles = []string{
	"q_append", "q_claim", "q_next", "q_renew", "q_release", "q_finish", "q_history", "q_clear_history", "q_meta",
	"fwd_apply", "fwd_due",
	"tl_append", "sig_append", "note_add", "note_del",
	"ob_enqueue", "ob_claim", "ob_ack", "ob_release", "ob_dead", "ob_requeue", "ob_list", "ob_parts", "ob_beat", "ob_peek",
	"q_depth", "conv_list",
	"dlg_create", "dlg_start", "dlg_claim", "dlg_renew", "dlg_end", "dlg_stop", "dlg_steer", "dlg_expired",
	"dlg_cmp_claim", "dlg_cmp_ack", "dlg_cmp_retry", "dlg_read", "dlg_completions", "dlg_pending",
	"cron_put", "cron_remove", "cron_read", "cron_run_put", "cron_runs", "cron_fire_start", "cron_fire_end",
	"once_claim", "once_renew", "once_done", "once_stale",
	"kb_apply", "kb_read", "kb_events", "kb_sub_put", "kb_sub_read", "kb_lane_read",
	"ctl_put", "ctl_delete", "ctl_read",
	"pool_read", "pool_use", "pool_count", "pool_mark",
	"appr_create", "appr_decide", "appr_read",
	"inst_beat", "inst_list",
}

// flags are the functions registered with flags, each with its flag.
//
// no-writes: the functions that only read, which the server then runs
// when it refuses writes (out of memory under maxmemory-policy
// noeviction, or short of the replicas min-replicas-to-write asks for),
// so an operator's views (the dashboard, herald outbox, kanban, cron,
// delegations, approvals) still answer. A write command in one of them
// fails the call.
//
// allow-oom: ob_ack, which takes sent messages out (it frees what it
// touches, but for the next message of a target made due), runs out of
// memory too, so that a message a platform took is not sent again once
// its claim runs out.
var flags = func() map[string]string {
	m := map[string]string{"ob_ack": "allow-oom"}
	for _, f := range []string{
		"q_meta", "q_depth", "conv_list", "fwd_due", "ob_list",
		"dlg_read", "dlg_completions", "dlg_expired", "cron_read", "cron_runs", "once_stale",
		"kb_read", "kb_events", "kb_sub_read", "kb_lane_read",
		"ctl_read", "pool_read", "appr_read", "inst_list",
	} {
		m[f] = "no-writes"
	}
	return m
}()

// script names one function of the library.
type script struct{ fn string }

func newScript(name string) script { return script{fn: libraryName + "_" + name} }

// libraryName is herald_ and a hash of every source file.
var libraryName = "herald_" + sourcesHash()

// library is the code FUNCTION LOAD is given.
var library = buildLibrary()

func source(name string) string {
	b, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return string(b)
}

func sourcesHash() string {
	h := sha1.New()
	for _, f := range append(append([]string(nil), helperFiles...), scriptFiles...) {
		h.Write([]byte(f + "\n" + source(f) + "\n"))
		if fl := flags[f]; fl != "" {
			// A flag changes the server's handling, so it names another library.
			h.Write([]byte(fl + "\n"))
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func buildLibrary() string {
	var b strings.Builder
	b.WriteString("#!lua name=" + libraryName + "\n")
	for _, f := range helperFiles {
		b.WriteString(source(f))
		b.WriteString("\n")
	}
	for _, f := range scriptFiles {
		b.WriteString("redis.register_function{function_name = '" + libraryName + "_" + f + "', callback = function(KEYS, ARGV)\n")
		b.WriteString(source(f))
		b.WriteString("\nend")
		if fl := flags[f]; fl != "" {
			b.WriteString(", flags = {'" + fl + "'}")
		}
		b.WriteString("}\n")
	}
	return b.String()
}
