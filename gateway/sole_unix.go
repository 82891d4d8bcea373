//go:build unix

package gateway

import (
	"errors"
	"os"
	"syscall"
)

// lockGateways opens the lock file beside a SQLite store and reports
// whether it got it exclusively: then no other gateway process of this
// machine has the store open, since each holds the file shared for as
// long as it runs, and the kernel lets go of a dead process's lock. The
// caller turns it shared with shareLock once done with what only a sole
// process may do.
func lockGateways(path string) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, err
	}
	err = flock(f, syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		return f, true, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return f, false, nil
	}
	f.Close()
	return nil, false, err
}

// shareLock holds f shared, waiting while another process starting holds
// it exclusively.
func shareLock(f *os.File) error { return flock(f, syscall.LOCK_SH) }

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
