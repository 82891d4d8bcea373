package testkit

import (
	"testing"
	"time"
)

// eventuallyTimeout bounds how long Eventually polls: long enough that a
// loaded machine does not fail a test that only runs slowly.
const eventuallyTimeout = 20 * time.Second

// maxPause bounds the pause between two polls; the pause starts at a
// millisecond and doubles, so a quick condition is seen quickly and a
// slow one is not asked about a thousand times a second.
const maxPause = 20 * time.Millisecond

// Eventually polls cond until it holds and fails t, naming what it waited
// for, if it does not within 20 s: how a test waits on work another
// goroutine does. The condition is the synchronisation, never the pause
// between polls.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if _, ok := poll(eventuallyTimeout, func() (bool, string) { return cond(), "" }); !ok {
		t.Fatalf("waited %s for %s", eventuallyTimeout, what)
	}
}

// EventuallyWithin is Eventually for a wait whose bound is part of what
// the test says, with cond telling what is still missing: the failure
// carries cond's last word.
func EventuallyWithin(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	if missing, ok := poll(timeout, cond); !ok {
		t.Fatalf("after %s: %s", timeout, missing)
	}
}

// poll calls cond until it holds or timeout passed, and returns cond's
// last word on what is missing.
func poll(timeout time.Duration, cond func() (bool, string)) (string, bool) {
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for {
		ok, missing := cond()
		if ok {
			return "", true
		}
		if time.Now().After(deadline) {
			return missing, false
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPause)
	}
}
