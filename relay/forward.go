package relay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/relay/internal/wstransport"
	"github.com/purrfly/purrfly/wire"
)

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
func (m *mesh) forward(ctx context.Context, c *core.Conn, first *buf.Buf, udp bool) bool {
	l := m.openLink(ctx, first.Frame(), udp)
	if l == nil {
		return false
	}
	m.m.active.Inc()
	m.sessions.Add(1)
	m.ws.RunLink(c, l, first, udp, func() {
		m.m.active.Dec()
		m.sessions.Done()
	})
	return true
}

// Lookups that find no balancer answering (it restarts, or its standby
// and its primary are switching: a few seconds) are tried again,
// locateRetryGap apart, for at most locateRetryFor in all (half the
// connection's authentication timeout): refusing the player would fail a
// connect PurrNet does not retry.
const (
	locateRetryFor = 5 * time.Second
	locateRetryGap = 500 * time.Millisecond
)

// locateRetrying is m.loc.locate, tried again while the balancer does not
// answer (not when it refuses the credential: asking again would fail
// again).
func (m *mesh) locateRetrying(ctx context.Context, room string) (wire.RoomLocation, bool, error) {
	give := time.Now().Add(locateRetryFor) // wall clock, as the link dials' deadline
	for {
		loc, found, err := m.loc.locate(ctx, room)
		if err == nil || errors.Is(err, errLocateBusy) || errors.Is(err, errLocateRefused) || !errors.Is(err, errLocateUnavailable) || time.Now().Add(locateRetryGap).After(give) {
			return loc, found, err
		}
		t := time.NewTimer(locateRetryGap)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return loc, found, err
		}
	}
}

// openLink finds the holder of the room first names and opens a link to
// it, or returns nil (see forward).
func (m *mesh) openLink(ctx context.Context, first []byte, udp bool) *wstransport.Link {
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
		loc, found, err := m.locateRetrying(ctx, a.RoomName)
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
		case attempt == 0 && m.claim(ctx, loc, a):
			// The room follows its host (handover.go): served here.
			return nil
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(m.forwardTimeout) // wall clock: it is the dial context's deadline
		}
		dctx, cancel := context.WithDeadline(ctx, deadline)
		up, err := m.dialLink(dctx, loc, udp) // the context only bounds the handshake
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
func (m *mesh) dialLink(ctx context.Context, loc wire.RoomLocation, udp bool) (*wstransport.Link, error) {
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
	l, err := wstransport.DialLink(ctx, m.dial, target, h)
	if err != nil {
		return nil, fmt.Errorf("failed to dial the holder: %w", err)
	}
	m.m.dialSeconds.Observe(m.clock.Now().Sub(start).Seconds())
	return l, nil
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

// handleForward is wire.PathForward on the HTTP port: a link from another
// machine of the app, carrying one client connection of a room held here.
// It is served as an ordinary connection that is never routed or
// forwarded again.
func (s *Server) handleForward(w http.ResponseWriter, r *http.Request) error {
	if !wstransport.IsUpgrade(r) {
		return wstransport.ErrUpgradeRequired
	}
	if s.mesh != nil {
		s.mesh.m.accepted.Inc()
	}
	return s.ws.Accept(w, r, wstransport.Peer{Forwarded: true,
		UDP: r.Header.Get(wire.HeaderLinkFraming) == wire.LinkFramingUDP, Ended: s.wsEnded(r)})
}
