package wstransport

import (
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/internal/testutil"
	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/wire"
)

// stuckSocketBuffer is what the stuck peer's socket buffers are capped at
// (each side's; the kernel doubles it): with both capped, what the kernel
// takes off the relay's writer is known, instead of whatever Linux's
// autotuning made of it (megabytes on loopback).
const stuckSocketBuffer = 64 << 10

// TestKickedPeerThatNeverReadsIsReleased: a client stops reading while its
// host sends it megabytes, so the relay's writer blocks on a full TCP
// window. The host kicks it: a graceful close, whose flush and close
// handshake cannot complete. Once the close grace passes (on the relay's
// clock), and not before, the socket is dropped, the connection leaves the
// relay's count and its goroutines end (goleak checks the last part at the
// end of the package's tests).
func TestKickedPeerThatNeverReadsIsReleased(t *testing.T) {
	if !canCapSocketBuffers {
		t.Skip("needs capped socket buffers")
	}
	const grace = 300 * time.Millisecond
	fake := clock.NewFake(time.Unix(2_000_000, 0))
	s := newRig(t, rigConfig{clock: fake, slow: time.Hour, closeGrace: grace}) // only the close grace may end it
	hs, cs := s.allocate("room")
	host := s.join("room", hs)
	stuck := dialSmallWindow(t, s.url()) // reads its [3], then never again
	if got := stuck.Auth("room", cs); got != wire.Authenticated {
		t.Fatalf("auth: reply %d", got)
	}
	id := host.ExpectToHost(wire.ToHostConnected).IDs[0]
	c := s.core.Conn(id)
	tr := c.Transport().(*conn)
	sc, err := tr.fc.Conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := capSocketBuffer(sc, soSndBuf, stuckSocketBuffer); err != nil {
		t.Fatalf("cap the relay's send buffer: %v", err)
	}

	// 100 frames of 65,535 bytes (6.5 MB): more than the capped sockets
	// (4 x 64 KiB) and one batch in the writer's hands (maxBatch frames)
	// take together, less than the queue's hard bound. Once the relay has
	// routed them all, frames are queued for good.
	payload := make([]byte, wire.MaxMessageSize-5)
	for range 100 {
		host.Send(wire.AppendSendOne(nil, id, payload))
	}
	testutil.Eventually(t, time.Minute, "the writer to block", func() bool {
		return c.Queued()
	})
	host.Send(wire.AppendKick(nil, id))
	if pk := host.ExpectToHost(wire.ToHostDisconnected); pk.IDs[0] != id {
		t.Fatalf("disconnect notice for %v, want %d", pk.IDs, id)
	}
	testutil.Eventually(t, time.Minute, "the close grace to be armed", func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.timer != nil
	})
	// The writer is blocked and the peer sends nothing: only the grace
	// can let the connection go.
	if n := s.core.NumConns(); n != 2 {
		t.Fatalf("%d connections before the close grace passed, want the kicked one still held", n)
	}
	fake.Advance(grace)
	testutil.Eventually(t, time.Minute, "the kicked connection to be released", func() bool { return s.core.NumConns() == 1 })
	// The host is unaffected.
	host.Send([]byte{wire.HostKeepAlive})
}

// dialSmallWindow dials a test peer whose socket's receive buffer is
// capped (before the connection, so the window it advertises is small).
func dialSmallWindow(tb testing.TB, url string) *wstest.Peer {
	tb.Helper()
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return capSocketBuffer(c, soRcvBuf, stuckSocketBuffer)
	}}
	tr := &http.Transport{DialContext: d.DialContext}
	tb.Cleanup(tr.CloseIdleConnections)
	ws := wstest.DialConnWith(tb, url, 30*time.Second, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	return &wstest.Peer{TB: tb, WS: ws}
}
