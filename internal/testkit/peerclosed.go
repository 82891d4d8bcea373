package testkit

import (
	"errors"
	"net"
	"syscall"
)

// connKey is the request context's key of the server connection a model
// request came on.
type connKey struct{}

// stillOpen counts the connections whose peer has not closed them.
func stillOpen(conns []net.Conn) int {
	n := 0
	for _, c := range conns {
		if !peerClosed(c) {
			n++
		}
	}
	return n
}

// peerClosed reports whether the other end of c has closed it, without
// reading from it: the socket is peeked, so the server's own reader still
// finds what is there. The kernel knows of a close as soon as it arrives,
// where the server learns of it only when its reader runs next.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = (n == 0 && err == nil) || errors.Is(err, syscall.ECONNRESET)
	})
	return closed
}
