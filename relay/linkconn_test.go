package relay

import (
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/wstest"
	"github.com/purrfly/purrfly/relay/internal/wstransport"
	"github.com/purrfly/purrfly/wire"
)

// silentHolderEvent is what a silent holder saw on a link.
type silentHolderEvent struct {
	frames []wstest.RawFrame
	closed time.Time // when the close frame arrived
	eof    time.Time // when the socket ended (zero if it did not)
	err    error
}

// silentHolder answers a link's upgrade by hand and then only reads raw
// frames: it never writes again, so it never answers the close handshake.
// It reports what it saw once the socket ends (or after 15 s).
func silentHolder(events chan<- silentHolderEvent) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != wire.PathForward || r.Header.Get(wire.HeaderInternalSecret) != testSecret {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		nc, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			events <- silentHolderEvent{err: err}
			return
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(15 * time.Second)) // wall clock: a real socket's deadline
		sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Accept: %s\r\n\r\n", base64.StdEncoding.EncodeToString(sum[:]))
		if err := brw.Flush(); err != nil {
			events <- silentHolderEvent{err: err}
			return
		}
		var ev silentHolderEvent
		for {
			f, err := wstest.ReadRawFrame(brw.Reader)
			if err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || wstest.IsReset(err) {
					ev.eof = time.Now() // wall clock: when the real socket ended
				} else {
					ev.err = err
				}
				events <- ev
				return
			}
			ev.frames = append(ev.frames, f)
			if f.Op == 0x8 {
				ev.closed = time.Now() // wall clock: when the close frame arrived on the real socket
			}
		}
	})
}

// TestLinkDroppedWithinGraceWhenHolderIgnoresClose: a forwarded client
// leaves; its link's close handshake goes to a holder that never answers
// it. The edge closes the link's socket itself once wstransport.LinkGrace has passed,
// instead of waiting for coder/websocket's own timers, and the client's
// connection is gone from the edge. The holder also sees that the edge's
// frames are masked client frames.
func TestLinkDroppedWithinGraceWhenHolderIgnoresClose(t *testing.T) {
	b := newMeshBalancer(t)
	edge := startMachine(t, b, "edge")
	events := make(chan silentHolderEvent, 1)
	holder := httptest.NewServer(silentHolder(events))
	defer holder.Close()
	b.mu.Lock()
	b.rooms["room"] = wire.RoomLocation{Name: "room", BootID: "silent-boot", MachineID: "silent",
		Endpoint: holder.URL, Host: "elsewhere.test", Port: 443, Region: "ams"}
	b.mu.Unlock()

	p := wstest.Dial(t, edge.WSURL())
	auth := wire.Auth{RoomName: "room", ClientSecret: "whatever"}.Marshal()
	p.Send(auth)
	waitFor(t, "the link to open", func() bool { return counterValue(edge.mesh.m.active) == 1 })
	_ = p.WS.CloseNow()

	var ev silentHolderEvent
	select {
	case ev = <-events:
	case <-time.After(15 * time.Second):
		t.Fatal("the silent holder saw no end of the link in 15 s")
	}
	if ev.err != nil {
		t.Fatalf("silent holder: %v", ev.err)
	}
	if len(ev.frames) != 2 {
		t.Fatalf("the holder got %d frames, want the authentication message and a close frame", len(ev.frames))
	}
	for i, f := range ev.frames {
		if !f.Fin || !f.Masked {
			t.Fatalf("frame %d: fin %v masked %v, want a final masked client frame", i, f.Fin, f.Masked)
		}
	}
	if f := ev.frames[0]; f.Op != 0x2 || string(f.Payload) != string(auth) {
		t.Fatalf("first frame: opcode %d %q, want the authentication message", f.Op, f.Payload)
	}
	if f := ev.frames[1]; f.Op != 0x8 || len(f.Payload) < 2 ||
		websocket.StatusCode(binary.BigEndian.Uint16(f.Payload)) != websocket.StatusNormalClosure {
		t.Fatalf("second frame: opcode %d %x, want close 1000", f.Op, f.Payload)
	}
	if ev.eof.IsZero() {
		t.Fatal("the link's socket was not closed")
	}
	d := ev.eof.Sub(ev.closed)
	if d > wstransport.LinkGrace+time.Second {
		t.Fatalf("the link was dropped %v after its close frame, want within wstransport.LinkGrace (%v)", d, wstransport.LinkGrace)
	}
	t.Logf("the link was dropped %v after its close frame", d)
	waitFor(t, "the edge to let go of the link", func() bool {
		return edge.Stats().Connections == 0 && counterValue(edge.mesh.m.active) == 0
	})
}
