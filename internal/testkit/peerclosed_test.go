package testkit

import (
	"net"
	"testing"
)

func TestPeerClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()

	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if peerClosed(server) {
		t.Error("an open connection with unread data told as closed")
	}
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	// The unread byte is still there to read: the peek left it.
	var b [2]byte
	if n, _ := server.Read(b[:1]); n != 1 || b[0] != 'x' {
		t.Fatalf("read %q after the peek, want %q", b[:n], "x")
	}
	// A close on loopback has reached the socket when Close returns.
	if !peerClosed(server) {
		t.Error("a connection its peer closed told as open")
	}
	if n := stillOpen([]net.Conn{server}); n != 0 {
		t.Errorf("stillOpen = %d, want 0", n)
	}
}
