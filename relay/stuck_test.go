package relay

import (
	"testing"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// TestKickedPeerThatNeverReadsIsReleased: a client stops reading while its
// host sends it megabytes, so the relay's writer blocks on a full TCP
// window. The host kicks it: a graceful close, whose flush and close
// handshake cannot complete. Within the close grace the socket is dropped,
// the connection leaves the relay's count and its goroutines end (goleak
// checks the last part at the end of the package's tests).
func TestKickedPeerThatNeverReadsIsReleased(t *testing.T) {
	s := startRelay(t, Options{}, func(s *Server) {
		s.core.slowTimeout = time.Hour // only the close grace may end it
		s.core.closeGrace = 300 * time.Millisecond
	})
	hs, cs := mustAllocate(t, s, "room")
	host := join(t, s, "room", hs)
	stuck := join(t, s, "room", cs) // reads its [3], then never again
	_ = stuck
	id := host.expectToHost(wire.ToHostConnected).IDs[0]

	// 100 frames of 65,535 bytes: far more than the loopback socket
	// buffers take, far less than the queue's hard bound.
	payload := make([]byte, wire.MaxMessageSize-5)
	for range 100 {
		host.send(wire.AppendSendOne(nil, id, payload))
	}
	waitFor(t, "the writer to block", func() bool {
		c := s.core.conns.get(id)
		if c == nil {
			return false
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.q) > 0
	})
	host.send(wire.AppendKick(nil, id))
	if pk := host.expectToHost(wire.ToHostDisconnected); pk.IDs[0] != id {
		t.Fatalf("disconnect notice for %v, want %d", pk.IDs, id)
	}
	start := time.Now()
	waitFor(t, "the kicked connection to be released", func() bool { return s.Stats().Connections == 1 })
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("released after %v, want about the close grace", d)
	}
	// The host is unaffected.
	host.send([]byte{wire.HostKeepAlive})
}
