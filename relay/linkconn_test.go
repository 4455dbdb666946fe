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

	"github.com/purrfly/purrfly/relay/internal/wstransport"
	"github.com/purrfly/purrfly/wire"
)

// rawFrame is one WebSocket frame as read off the wire by a test peer.
type rawFrame struct {
	fin     bool
	op      byte
	masked  bool
	payload []byte // unmasked
}

// readRawFrame reads one frame from r and unmasks its payload byte by byte
// (the RFC's definition, independent of the relay's masking code).
func readRawFrame(r io.Reader) (rawFrame, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return rawFrame{}, err
	}
	f := rawFrame{fin: h[0]&0x80 != 0, op: h[0] & 0x0f, masked: h[1]&0x80 != 0}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return f, err
		}
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err := io.ReadFull(r, ext[:]); err != nil {
			return f, err
		}
		n = binary.BigEndian.Uint64(ext[:])
	}
	if n > 1<<20 {
		return f, fmt.Errorf("frame of %d bytes", n)
	}
	var key [4]byte
	if f.masked {
		if _, err := io.ReadFull(r, key[:]); err != nil {
			return f, err
		}
	}
	f.payload = make([]byte, n)
	if _, err := io.ReadFull(r, f.payload); err != nil {
		return f, err
	}
	for i := range f.payload {
		f.payload[i] ^= key[i%4]
	}
	return f, nil
}

// silentHolderEvent is what a silent holder saw on a link.
type silentHolderEvent struct {
	frames []rawFrame
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
			f, err := readRawFrame(brw.Reader)
			if err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
					ev.eof = time.Now() // wall clock: when the real socket ended
				} else {
					ev.err = err
				}
				events <- ev
				return
			}
			ev.frames = append(ev.frames, f)
			if f.op == 0x8 {
				ev.closed = time.Now() // wall clock: when the close frame arrived on the real socket
			}
		}
	})
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
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

	p := dial(t, edge.WSURL())
	auth := wire.Auth{RoomName: "room", ClientSecret: "whatever"}.Marshal()
	p.send(auth)
	waitFor(t, "the link to open", func() bool { return counterValue(edge.mesh.m.active) == 1 })
	_ = p.ws.CloseNow()

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
		if !f.fin || !f.masked {
			t.Fatalf("frame %d: fin %v masked %v, want a final masked client frame", i, f.fin, f.masked)
		}
	}
	if f := ev.frames[0]; f.op != 0x2 || string(f.payload) != string(auth) {
		t.Fatalf("first frame: opcode %d %q, want the authentication message", f.op, f.payload)
	}
	if f := ev.frames[1]; f.op != 0x8 || len(f.payload) < 2 ||
		websocket.StatusCode(binary.BigEndian.Uint16(f.payload)) != websocket.StatusNormalClosure {
		t.Fatalf("second frame: opcode %d %x, want close 1000", f.op, f.payload)
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
