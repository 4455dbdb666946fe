package wstest

import (
	"net"
	"testing"
	"time"
)

// TCPPair returns both ends of a loopback TCP connection (dialled and
// accepted within 5 s each), closed when the test ends.
func TCPPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			c = nil
		}
		accepted <- c
	}()
	client, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	select {
	case server = <-accepted:
	case <-time.After(5 * time.Second):
	}
	if server == nil {
		client.Close()
		t.Fatal("Accept failed")
	}
	t.Cleanup(func() {
		client.Close()
		server.Close()
	})
	return client, server
}
