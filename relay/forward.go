package relay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// linkGrace bounds how long a forwarded connection waits for its link's
// close handshake with the holder before dropping the link outright.
const linkGrace = flushTimeout + time.Second

// forward decides, from a connection's first (authentication) message,
// whether it belongs to a room another machine holds, and if so carries
// the connection there: it opens a link to the holder (wire.PathForward),
// makes the conn a forwarded one (roleForwarded: its frames go to the link)
// and queues first on the link. It reports false when the connection is
// to be served here: a pipe, a malformed message, a local room, a room the
// balancer does not know, a holder that cannot be reached (the core then
// answers as usual, [4] for an unknown room). It runs on the connection's
// reader (a UDP peer's authentication goroutine) before any frame of it is
// routed: room lookups (at most 2 s each), a handover (about 5 s at most,
// handover.go) and link dials (ForwardTimeout) bound it. udp says the
// peer speaks PurrNet's UDP framing, which the link then carries.
func (m *mesh) forward(c *core.Conn, first *buf.Buf, udp bool) bool {
	up := m.openLink(first.Frame(), udp)
	if up == nil {
		return false
	}
	m.runLink(c, up, first, udp)
	return true
}

// openLink finds the holder of the room first names and opens a link to
// it, or returns nil (see forward).
func (m *mesh) openLink(first []byte, udp bool) *uplink {
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
			m.log.Warn("failed to locate a room held elsewhere", "room", a.RoomName, "err", err)
			return nil
		case !found:
			m.m.forwards.WithLabelValues("not_found").Inc()
			return nil
		case loc.BootID == m.bootID || loc.Endpoint == "" || loc.Endpoint == strings.TrimRight(m.self.endpoint, "/"):
			m.m.forwards.WithLabelValues("self").Inc()
			return nil
		case attempt == 0 && m.claim(loc, a):
			// The room follows its host (handover.go): served here.
			return nil
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(m.forwardTimeout) // wall clock: it is the dial context's deadline
		}
		ctx, cancel := context.WithDeadline(m.ctx, deadline)
		up, err := m.dialLink(ctx, loc, udp) // the context only bounds the handshake
		cancel()
		if err == nil {
			m.m.forwards.WithLabelValues("ok").Inc()
			return up
		}
		m.loc.forget(a.RoomName)
		m.log.Warn("failed to open a link to the machine holding a room", "room", a.RoomName,
			"holder", loc.MachineID, "endpoint", loc.Endpoint, "attempt", attempt+1, "err", err)
		if attempt > 0 || !time.Now().Before(deadline) { // wall clock: the deadline above
			m.m.forwards.WithLabelValues("unreachable").Inc()
			return nil
		}
	}
}

// dialLink opens the link to the holder at loc (wire.PathForward), for a
// connection in PurrNet's UDP framing when udp.
func (m *mesh) dialLink(ctx context.Context, loc wire.RoomLocation, udp bool) (*uplink, error) {
	target := linkURL(loc.Endpoint)
	if target == "" {
		return nil, fmt.Errorf("holder endpoint %q is not an http(s) URL", loc.Endpoint)
	}
	h := http.Header{}
	wire.SetInternal(h, m.secret)
	h.Set(wire.HeaderForwardedBy, m.bootID)
	if udp {
		h.Set(wire.HeaderLinkFraming, wire.LinkFramingUDP)
	}
	start := m.clock.Now()
	up, err := dialUplink(ctx, m.dial, target, h)
	if err != nil {
		return nil, fmt.Errorf("failed to dial the holder: %w", err)
	}
	m.m.dialSeconds.Observe(m.clock.Now().Sub(start).Seconds())
	up.ws.SetReadLimit(wire.MaxMessageSize + buf.Headroom)
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

// runLink carries connection c (of any transport) over link up to the
// machine holding its room, starting with the authentication message
// first. It is the forwarding path, DERP-mesh style: nothing is written
// inline by a reader.
//
//	c's reader --core.handle (roleForwarded)--> link queue --> link writer --> holder
//	holder --> link reader --enqueue--> c's queue --> c's writer --> peer
//
// Both queues are ordinary conn queues with their bounds and slow-receiver
// rules. The holder serves the link as an ordinary connection, so the
// peer sees the holder's own frames, notices and close status: a close
// frame from the holder is passed on with its reason after the frames
// queued before it (kicked, host left, [4] then authentication failed,
// shutdown); a link that drops without a close frame (the holder died)
// drops the peer at once, as a direct connection to a dead machine would
// drop. A peer that leaves closes the link normally (core.leave), so the
// holder sees it leave; a holder that does not answer that close within
// linkGrace has its link's socket closed by the edge (uplink.drop),
// whatever coder/websocket's own timers say. A UDP peer's link speaks
// PurrNet's UDP framing (wire.HeaderLinkFraming): the holder prefixes each
// frame with its delivery method, which the link reader strips.
//
// Goroutines: the link's writer and reader; the writer, once it ends,
// drops the socket and waits for the reader. The session counts until
// then.
func (m *mesh) runLink(c *core.Conn, up *uplink, first *buf.Buf, udp bool) {
	t := newWSTransport(m.core, m.clock, up.ws, up.lc, up.drop, linkGrace)
	link := m.core.NewLink(t)
	c.ForwardTo(link)
	m.m.active.Inc()
	m.sessions.Add(1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		m.linkReader(up.ws, c, link, udp)
	}()
	go func() {
		writerDone := make(chan struct{})
		m.writer(t, link, writerDone)
		<-writerDone
		up.drop() // the close handshake is over or given up: the reader ends at once
		<-readerDone
		m.m.active.Dec()
		m.sessions.Done()
	}()
	link.Enqueue(first, core.DirMeshOut)
}

// linkReader reads the holder's frames into c's queue until the link
// ends, then closes c the way the holder closed the link, and stops the
// link's writer. On a link in UDP framing each frame comes behind its
// delivery method, which it is sent to the peer with.
func (m *mesh) linkReader(up *websocket.Conn, c *core.Conn, link *core.Conn, udp bool) {
	defer link.Close(core.ReasonPeerClosed)
	for {
		typ, rd, err := up.Reader(context.Background())
		if err == nil && typ != websocket.MessageBinary {
			err = errors.New("the holder sent a text message")
		}
		var b *buf.Buf
		if err == nil {
			b, err = buf.ReadInto(rd, 0, wire.MaxMessageSize+buf.Headroom+1)
		}
		if err == nil && udp {
			if b.Len() < 1 || !wire.Delivery(b.B[b.Off]).Valid() {
				err = errors.New("the holder sent a frame without a delivery method")
				buf.Put(b)
			} else {
				b.Method = wire.Delivery(b.B[b.Off])
				b.Off++
			}
		}
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				c.CloseUpstream(reasonOfClose(ce.Code, ce.Reason))
			} else {
				c.Close(core.ReasonUpstreamLost)
			}
			return
		}
		c.Enqueue(b, core.DirMeshIn)
	}
}

// handleForward is wire.PathForward on the HTTP port: a link from another
// machine of the app, carrying one client connection of a room held here.
// It is served as an ordinary connection that is never routed or
// forwarded again.
func (s *Server) handleForward(w http.ResponseWriter, r *http.Request) error {
	if !isUpgrade(r) {
		return errUpgradeRequired
	}
	if s.mesh != nil {
		s.mesh.m.accepted.Inc()
	}
	return s.acceptWS(w, r, true, r.Header.Get(wire.HeaderLinkFraming) == wire.LinkFramingUDP)
}
