package dashboard

import (
	"net"
	"sync"
	"time"
)

// The sign-in limit: a client address that failed LoginFailures times
// within LoginWindow is refused until the first of those failures is a
// LoginWindow old, even with the right key, so the key cannot be
// guessed at speed. Each gateway process counts its own.
const (
	LoginFailures = 5
	LoginWindow   = 10 * time.Minute
	// maxClients bounds how many addresses the limit remembers; past it,
	// those whose failures all left the window are forgotten, then any.
	maxClients = 4096
)

// loginLimit counts failed sign-ins by client address.
type loginLimit struct {
	mu       sync.Mutex
	failures map[string][]time.Time // oldest first, at most LoginFailures
}

func newLoginLimit() *loginLimit {
	return &loginLimit{failures: map[string][]time.Time{}}
}

// clientAddr is the address a request came from: its connection's host.
// A header naming another is not believed, as anyone can send one.
func clientAddr(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

// wait is how long addr must wait before it may sign in again at now; 0
// when it may now.
func (l *loginLimit) wait(addr string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	fs := recent(l.failures[addr], now)
	if len(fs) < LoginFailures {
		return 0
	}
	return fs[0].Add(LoginWindow).Sub(now)
}

// failed counts a failed sign-in of addr at now.
func (l *loginLimit) failed(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fs := append(recent(l.failures[addr], now), now)
	if len(fs) > LoginFailures {
		fs = fs[len(fs)-LoginFailures:]
	}
	if _, known := l.failures[addr]; !known && len(l.failures) >= maxClients {
		l.forget(now)
	}
	l.failures[addr] = fs
}

// succeeded forgets addr's failures.
func (l *loginLimit) succeeded(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.failures, addr)
}

// forget drops the addresses whose failures all left the window, and,
// when none did, one address.
func (l *loginLimit) forget(now time.Time) {
	for addr, fs := range l.failures {
		if len(recent(fs, now)) == 0 {
			delete(l.failures, addr)
		}
	}
	if len(l.failures) < maxClients {
		return
	}
	for addr := range l.failures {
		delete(l.failures, addr)
		return
	}
}

// recent is the failures of fs within LoginWindow before now.
func recent(fs []time.Time, now time.Time) []time.Time {
	for len(fs) > 0 && !fs[0].Add(LoginWindow).After(now) {
		fs = fs[1:]
	}
	return fs
}
