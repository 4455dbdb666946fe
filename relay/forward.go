package relay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/wire"
)

// linkGrace bounds how long a forwarded connection waits for its link's
// close handshake with the holder before dropping the link outright.
const linkGrace = flushTimeout + time.Second

// openLink decides, from a connection's first (authentication) message,
// whether it belongs to a room another machine holds, and if so opens a
// link to that machine (wire.PathForward). It returns nil when the
// connection is to be served here: a pipe, a malformed message, a local
// room, or a room the balancer does not know (the core then answers as
// usual, [4] for an unknown room). It runs on the connection's reader
// before any frame of it is routed: room lookups (at most 2 s each), a
// handover (about 5 s at most, handover.go) and link dials
// (ForwardTimeout) bound it.
func (m *mesh) openLink(first []byte) *uplink {
	a, err := wire.ParseAuth(first)
	if err != nil || a.Pipe || m.local(a.RoomName) {
		return nil
	}
	// One ForwardTimeout bounds the links' dials (the lookups and the
	// handover have budgets of their own). A holder that cannot be dialed
	// may be a stale cached answer (it died, the name moved): its location
	// is forgotten and looked up once more before giving up.
	var deadline time.Time
	for attempt := 0; ; attempt++ {
		loc, found, err := m.loc.locate(a.RoomName)
		switch {
		case err != nil:
			m.m.forwards.WithLabelValues("unreachable").Inc()
			m.s.log.Warn("failed to locate a room held elsewhere", "room", a.RoomName, "err", err)
			return nil
		case !found:
			m.m.forwards.WithLabelValues("not_found").Inc()
			return nil
		case loc.BootID == m.s.opts.BootID || loc.Endpoint == "" || loc.Endpoint == strings.TrimRight(m.s.opts.Endpoint, "/"):
			m.m.forwards.WithLabelValues("self").Inc()
			return nil
		case attempt == 0 && m.claim(loc, a):
			// The room follows its host (handover.go): served here.
			return nil
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(m.s.opts.ForwardTimeout)
		}
		ctx, cancel := context.WithDeadline(m.s.ctx, deadline)
		up, err := m.dialLink(ctx, loc) // the context only bounds the handshake
		cancel()
		if err == nil {
			m.m.forwards.WithLabelValues("ok").Inc()
			return up
		}
		m.loc.forget(a.RoomName)
		m.s.log.Warn("failed to open a link to the machine holding a room", "room", a.RoomName,
			"holder", loc.MachineID, "endpoint", loc.Endpoint, "attempt", attempt+1, "err", err)
		if attempt > 0 || !time.Now().Before(deadline) {
			m.m.forwards.WithLabelValues("unreachable").Inc()
			return nil
		}
	}
}

// dialLink opens the link to the holder at loc (wire.PathForward).
func (m *mesh) dialLink(ctx context.Context, loc wire.RoomLocation) (*uplink, error) {
	target := linkURL(loc.Endpoint)
	if target == "" {
		return nil, fmt.Errorf("holder endpoint %q is not an http(s) URL", loc.Endpoint)
	}
	h := http.Header{}
	wire.SetInternal(h, m.s.opts.Secret)
	h.Set(wire.HeaderForwardedBy, m.s.opts.BootID)
	start := time.Now()
	up, err := dialUplink(ctx, m.dial, target, h)
	if err != nil {
		return nil, fmt.Errorf("failed to dial the holder: %w", err)
	}
	m.m.dialSeconds.Observe(time.Since(start).Seconds())
	up.ws.SetReadLimit(wire.MaxMessageSize + headroom)
	return up, nil
}

// linkURL is the PathForward WebSocket URL of a holder's endpoint.
func linkURL(endpoint string) string {
	switch {
	case strings.HasPrefix(endpoint, "http://"):
		return "ws://" + strings.TrimPrefix(endpoint, "http://") + wire.PathForward
	case strings.HasPrefix(endpoint, "https://"):
		return "wss://" + strings.TrimPrefix(endpoint, "https://") + wire.PathForward
	}
	return ""
}

// runForwarded carries client connection c (its WebSocket ws) over link
// up to the machine holding its room, starting with the authentication
// message first, and returns why the client side ended. It is the
// forwarding path, DERP-mesh style: nothing is written inline by a
// reader.
//
//	client reader (this goroutine) --enqueue--> link queue --> link writer --> holder
//	holder --> link reader --enqueue--> c's queue --> c's writer --> client
//
// Both queues are ordinary conn queues with their bounds and slow-receiver
// rules. The holder serves the link as an ordinary connection, so the
// client sees the holder's own frames, notices and close status: a close
// frame from the holder is passed on with its code and text after the
// frames queued before it (1000 kicked or host left, 1008 [4] then
// authentication failed, 1012 shutdown); a link that drops without a close
// frame (the holder died) drops the client at once, as a direct
// connection to a dead machine would drop. A client that leaves closes the
// link normally, so the holder sees it leave; a holder that does not
// answer that close within linkGrace has its link's socket closed by the
// edge (uplink.drop), whatever coder/websocket's own timers say.
func (m *mesh) runForwarded(ws *websocket.Conn, c *conn, up *uplink, first *buf) closeReason {
	link := m.s.core.newLink(up.drop)
	m.m.active.Inc()
	defer m.m.active.Dec()
	writerDone := make(chan struct{})
	var readerWG sync.WaitGroup
	go m.s.wsWriter(up.ws, up.lc, link, writerDone)
	readerWG.Go(func() { m.linkReader(up.ws, c, link) })
	link.enqueue(first, dirMeshOut)

	reason := m.pumpClient(ws, c, link)
	c.close(reason) // no-op when the holder's close came first
	link.close(reasonClientLeft)
	t := time.NewTimer(linkGrace)
	select {
	case <-writerDone:
	case <-t.C:
		up.drop()
		<-writerDone
	}
	t.Stop()
	up.drop() // the handshake is over or given up: the reader ends at once
	readerWG.Wait()
	return reason
}

// pumpClient reads the forwarded client's messages, exactly as the direct
// reader does (same limits, same reasons), and queues them on the link.
func (m *mesh) pumpClient(ws *websocket.Conn, c *conn, link *conn) closeReason {
	ctx := context.Background()
	for {
		typ, rd, err := ws.Reader(ctx)
		if err != nil {
			return readFailure(err, ctx)
		}
		if typ != websocket.MessageBinary {
			return reasonTextFrame
		}
		b, err := readMessage(rd)
		if err != nil {
			return readFailure(err, ctx)
		}
		if c.closing.Load() {
			putBuf(b)
			m.s.core.m.drop(dropSenderClosed)
			return reasonNone
		}
		link.enqueue(b, dirMeshOut)
	}
}

// linkReader reads the holder's frames into c's queue until the link
// ends, then closes c the way the holder closed the link, and stops the
// link's writer.
func (m *mesh) linkReader(up *websocket.Conn, c *conn, link *conn) {
	defer link.close(reasonPeerClosed)
	for {
		typ, rd, err := up.Reader(context.Background())
		if err == nil && typ != websocket.MessageBinary {
			err = errors.New("the holder sent a text message")
		}
		var b *buf
		if err == nil {
			b, err = readInto(rd, 0, wire.MaxMessageSize+headroom)
		}
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				c.closeUpstream(ce.Code, ce.Reason)
			} else {
				c.close(reasonUpstreamLost)
			}
			return
		}
		c.enqueue(b, dirMeshIn)
	}
}

// handleForward is wire.PathForward on the HTTP port: a link from another
// machine of the app, carrying one client connection of a room held here.
// It is served as an ordinary connection that is never routed or
// forwarded again.
func (s *Server) handleForward(w http.ResponseWriter, r *http.Request) error {
	if err := wire.CheckInternal(r, s.opts.Secret); err != nil {
		return err
	}
	if !isUpgrade(r) {
		return errUpgradeRequired
	}
	if s.mesh != nil {
		s.mesh.m.accepted.Inc()
	}
	return s.acceptWS(w, r, true)
}
