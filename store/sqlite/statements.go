package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// statements are the write connection's prepared statements. Preparing
// once at Open keeps SQL parsing off every operation.
type statements struct {
	begin, commit, rollback                  *sql.Stmt
	spOpen, spUndo, spDone                   *sql.Stmt
	all                                      []*sql.Stmt
	dedupeGet, dedupePut, dedupePrune        *sql.Stmt
	entryInsert, entryDelete                 *sql.Stmt
	entryAbsorb                              *sql.Stmt
	convReady, convHeld                      *sql.Stmt
	claimPick, claimGrant, claimSkip         *sql.Stmt
	appendGrant                              *sql.Stmt
	nextPick, nextMark                       *sql.Stmt
	renew, leaseRelease                      *sql.Stmt
	finishRelease, finishKeep                *sql.Stmt
	leaseHeld                                *sql.Stmt
	historyInsert, historyClear              *sql.Stmt
	historyDrop                              *sql.Stmt
	metaSet, metaDelete                      *sql.Stmt
	outboxKeyGet, outboxKeyPut               *sql.Stmt
	outboxKeyPrune                           *sql.Stmt
	outboxInsert, outboxDue                  *sql.Stmt
	outboxInsertClaimed                      *sql.Stmt
	outboxClaim, outboxAck                   *sql.Stmt
	outboxRelease, outboxPostpone            *sql.Stmt
	outboxDead, outboxRequeue                *sql.Stmt
	outboxExists                             *sql.Stmt
	outboxBlocker, outboxWait                *sql.Stmt
	outboxHeld, outboxParts                  *sql.Stmt
	outboxStale, outboxEndClaims             *sql.Stmt
	outboxForget, outboxBeat                 *sql.Stmt
	outboxRebeat                             *sql.Stmt
	outboxWaiting, outboxAfter               *sql.Stmt
	outboxPark, outboxUnpark                 *sql.Stmt
	timelineInsert, timelineCursor           *sql.Stmt
	timelineTrim                             *sql.Stmt
	signalInsert, signalPrune                *sql.Stmt
	noteInsert, noteDelete                   *sql.Stmt
	expireLeases, expireClaims               *sql.Stmt
	expireOwnership                          *sql.Stmt
	kbCardInsert, kbCardUpdate               *sql.Stmt
	kbCardUpdateKept                         *sql.Stmt
	kbCardVersion, kbRunPut, kbEvent         *sql.Stmt
	ctlInsert, ctlUpdate                     *sql.Stmt
	usageAdd                                 *sql.Stmt
	poolUse, poolCount, poolStick, poolPrune *sql.Stmt
	cronUpdate, cronUpdateBody, cronExists   *sql.Stmt
	cronRunGet, cronRunPut, cronRunTrim      *sql.Stmt
	cronRunStart, cronRunEnd                 *sql.Stmt
	onceGet, onceToken, onceClaim            *sql.Stmt
	onceRenew, onceDone, oncePrune           *sql.Stmt
}

func prepareStatements(ctx context.Context, conn *sql.Conn) (*statements, error) {
	st := &statements{}
	list := []struct {
		dst   **sql.Stmt
		query string
	}{
		{&st.begin, `BEGIN IMMEDIATE`},
		{&st.commit, `COMMIT`},
		{&st.rollback, `ROLLBACK`},
		{&st.spOpen, `SAVEPOINT op`},
		{&st.spUndo, `ROLLBACK TO op`},
		{&st.spDone, `RELEASE op`},

		{&st.dedupeGet, sqlDedupeGet},
		{&st.dedupePut, sqlDedupePut},
		{&st.dedupePrune, sqlDedupePrune},
		{&st.entryInsert, sqlEntryInsert},
		{&st.entryDelete, sqlEntryDelete},
		{&st.entryAbsorb, sqlEntryAbsorb},
		{&st.convReady, sqlConvReady},
		{&st.convHeld, sqlConvHeld},
		{&st.claimPick, sqlClaimPick},
		{&st.claimGrant, sqlClaimGrant},
		{&st.claimSkip, sqlClaimSkip},
		{&st.appendGrant, sqlAppendGrant},
		{&st.nextPick, sqlNextPick},
		{&st.nextMark, sqlNextMark},
		{&st.renew, sqlRenew},
		{&st.leaseRelease, sqlRelease},
		{&st.finishRelease, sqlFinishRelease},
		{&st.finishKeep, sqlFinishKeep},
		{&st.leaseHeld, sqlLeaseHeld},
		{&st.historyInsert, sqlHistoryInsert},
		{&st.historyClear, sqlHistoryClear},
		{&st.historyDrop, sqlHistoryDrop},
		{&st.expireLeases, sqlExpireLeases},
		{&st.expireClaims, sqlExpireClaims},
		{&st.expireOwnership, sqlExpireOwnership},
		{&st.metaSet, sqlMetaSet},
		{&st.metaDelete, sqlMetaDelete},

		{&st.outboxKeyGet, sqlOutboxKeyGet},
		{&st.outboxKeyPut, sqlOutboxKeyPut},
		{&st.outboxKeyPrune, sqlOutboxKeyPrune},
		{&st.outboxInsert, sqlOutboxInsert},
		{&st.outboxInsertClaimed, sqlOutboxInsertClaimed},
		{&st.outboxDue, sqlOutboxDue},
		{&st.outboxClaim, sqlOutboxClaim},
		{&st.outboxAck, sqlOutboxAck},
		{&st.outboxRelease, sqlOutboxRelease},
		{&st.outboxPostpone, sqlOutboxPostpone},
		{&st.outboxDead, sqlOutboxDead},
		{&st.outboxRequeue, sqlOutboxRequeue},
		{&st.outboxExists, sqlOutboxExists},
		{&st.outboxBlocker, sqlOutboxBlocker},
		{&st.outboxWait, sqlOutboxWait},
		{&st.outboxHeld, sqlOutboxHeld},
		{&st.outboxParts, sqlOutboxParts},
		{&st.outboxStale, sqlOutboxStale},
		{&st.outboxEndClaims, sqlOutboxEndClaims},
		{&st.outboxForget, sqlOutboxForget},
		{&st.outboxBeat, sqlOutboxBeat},
		{&st.outboxRebeat, sqlOutboxRebeat},
		{&st.outboxWaiting, sqlOutboxWaiting},
		{&st.outboxAfter, sqlOutboxAfter},
		{&st.outboxPark, sqlOutboxPark},
		{&st.outboxUnpark, sqlOutboxUnpark},

		{&st.timelineInsert, sqlTimelineInsert},
		{&st.timelineCursor, sqlTimelineCursor},
		{&st.timelineTrim, sqlTimelineTrim},
		{&st.signalInsert, sqlSignalInsert},
		{&st.signalPrune, sqlSignalPrune},
		{&st.noteInsert, sqlNoteInsert},
		{&st.noteDelete, sqlNoteDelete},

		// Every card's create, claim and end writes these.
		{&st.kbCardInsert, sqlKbCardInsert},
		{&st.kbCardUpdate, sqlKbCardUpdate},
		{&st.kbCardUpdateKept, sqlKbCardUpdateKept},
		{&st.kbCardVersion, sqlKbCardVersion},
		{&st.kbRunPut, sqlKbRunPut},
		{&st.kbEvent, sqlKbEvent},

		// A goal's state is written after every turn of its conversation.
		{&st.ctlInsert, sqlCtlInsert},
		{&st.ctlUpdate, sqlCtlUpdate},

		// Every turn that used tokens adds them to its conversation's.
		{&st.usageAdd, sqlUsageAdd},

		// Every model request counts a use of the key it chose.
		{&st.poolUse, sqlPoolUse},
		{&st.poolCount, sqlPoolCount},
		{&st.poolStick, sqlPoolStick},
		{&st.poolPrune, sqlPoolPrune},

		// Every cron fire claims, writes its job and run, and marks done.
		{&st.cronUpdate, sqlCronUpdate},
		{&st.cronUpdateBody, sqlCronUpdateBody},
		{&st.cronRunStart, sqlCronRunStart},
		{&st.cronRunEnd, sqlCronRunEnd},
		{&st.cronExists, sqlCronExists},
		{&st.cronRunGet, sqlCronRunGet},
		{&st.cronRunPut, sqlCronRunPut},
		{&st.cronRunTrim, sqlCronRunTrim},
		{&st.onceGet, sqlOnceGet},
		{&st.onceToken, sqlOnceToken},
		{&st.onceClaim, sqlOnceClaim},
		{&st.onceRenew, sqlOnceRenew},
		{&st.onceDone, sqlOnceDone},
		{&st.oncePrune, sqlOncePrune},
	}
	for _, s := range list {
		stmt, err := conn.PrepareContext(ctx, s.query)
		if err != nil {
			_ = st.close()
			return nil, fmt.Errorf("preparing %q: %w", s.query, err)
		}
		*s.dst = stmt
		st.all = append(st.all, stmt)
	}
	return st, nil
}

func (st *statements) close() error {
	var errList []error
	for _, s := range st.all {
		errList = append(errList, s.Close())
	}
	st.all = nil
	return errors.Join(errList...)
}

// readStatements run on the read pool.
type readStatements struct {
	all                          []*sql.Stmt
	readyAny                     *sql.Stmt
	historyList, metaList        *sql.Stmt
	turnRunning                  *sql.Stmt
	turnHistory                  *sql.Stmt
	outboxDueAny, outboxStaleAny *sql.Stmt
	outboxPending, outboxDeadAll *sql.Stmt
	outboxUnsent                 *sql.Stmt
	outboxWaitingAny             *sql.Stmt
	timelineRead, timelineEnd    *sql.Stmt
	signalsEnd, signalsRead      *sql.Stmt
	notesList                    *sql.Stmt
	queueDepth                   *sql.Stmt
	kbCardGet                    *sql.Stmt
	kbParents, kbChildren        *sql.Stmt
	ctlGet                       *sql.Stmt
	convList, convListBefore     *sql.Stmt
	convOne                      *sql.Stmt
	historyTail, historyCount    *sql.Stmt

	cronGet, cronDue, cronNext *sql.Stmt
	cronRunGet, onceGet        *sql.Stmt
	onceStale                  *sql.Stmt
}

func prepareReads(ctx context.Context, db *sql.DB) (*readStatements, error) {
	rs := &readStatements{}
	list := []struct {
		dst   **sql.Stmt
		query string
	}{
		{&rs.readyAny, sqlReadyAny},
		{&rs.historyList, sqlHistoryList},
		{&rs.turnHistory, sqlTurnHistory},
		{&rs.metaList, sqlMetaList},
		{&rs.turnRunning, sqlTurnRunning},
		{&rs.outboxDueAny, sqlOutboxDueAny},
		{&rs.outboxStaleAny, sqlOutboxStaleAny},
		{&rs.outboxPending, sqlOutboxPending},
		{&rs.outboxDeadAll, sqlOutboxDeadList},
		{&rs.outboxUnsent, sqlOutboxUnsent},
		{&rs.outboxWaitingAny, sqlOutboxWaitingAny},
		{&rs.timelineRead, sqlTimelineRead},
		{&rs.timelineEnd, sqlTimelineEnd},
		{&rs.signalsEnd, sqlSignalsEnd},
		{&rs.signalsRead, sqlSignalsRead},
		{&rs.notesList, sqlNotesList},
		{&rs.queueDepth, sqlQueueDepth},
		{&rs.kbCardGet, sqlKbCardGet},
		{&rs.kbParents, sqlKbParents},
		{&rs.kbChildren, sqlKbChildren},
		{&rs.ctlGet, sqlCtlGet},
		{&rs.convList, sqlConvList},
		{&rs.convListBefore, sqlConvListBefore},
		{&rs.convOne, sqlConvOne},
		{&rs.historyTail, sqlHistoryTail},
		{&rs.historyCount, sqlHistoryCount},

		{&rs.cronGet, sqlCronGet},
		{&rs.cronDue, sqlCronDue},
		{&rs.cronNext, sqlCronNext},
		{&rs.cronRunGet, sqlCronRunGet},
		{&rs.onceGet, sqlOnceGet},
		{&rs.onceStale, sqlOnceStale},
	}
	for _, s := range list {
		stmt, err := db.PrepareContext(ctx, s.query)
		if err != nil {
			_ = rs.close()
			return nil, fmt.Errorf("preparing %q: %w", s.query, err)
		}
		*s.dst = stmt
		rs.all = append(rs.all, stmt)
	}
	return rs, nil
}

func (rs *readStatements) close() error {
	var errList []error
	for _, s := range rs.all {
		errList = append(errList, s.Close())
	}
	rs.all = nil
	return errors.Join(errList...)
}
