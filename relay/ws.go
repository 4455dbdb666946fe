package relay

import (
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/relay/internal/wsframe"
	"github.com/purrfly/purrfly/wire"
)

// closeFrameTimeout bounds the write of the relay's close frame, as
// coder/websocket's 5 s did.
const closeFrameTimeout = 5 * time.Second

// flushTimeout bounds the writes of frames still queued when a connection
// is closed gracefully (the [4] of a failed auth, a kick, a shutdown).
const flushTimeout = 2 * time.Second

// closeGrace bounds a graceful close (kicked, host left, shutdown, ...)
// from the close to the end of the transport: the flush and the close
// handshake. A writer blocked on a peer that stopped reading (a full TCP
// window) would otherwise never return, and its connection, goroutines,
// socket and queue would stay forever; past the grace the transport is
// dropped (wsTransport.closed).
const closeGrace = 5 * time.Second

var errUpgradeRequired = &wire.Error{Code: "upgrade_required", Message: "this port only takes WebSocket upgrades",
	Status: http.StatusUpgradeRequired}

// isUpgrade reports whether r asks for a WebSocket.
func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// errBadHandshake answers an upgrade request coder/websocket would refuse
// in plain text.
var errBadHandshake = &wire.Error{Code: "bad_websocket_handshake", Status: http.StatusBadRequest,
	Message: "a WebSocket upgrade is a GET over HTTP/1.1 with Connection: Upgrade, Upgrade: websocket and a Sec-WebSocket-Key"}

// errWSVersion answers an upgrade of another WebSocket version.
var errWSVersion = &wire.Error{Code: "unsupported_websocket_version", Status: http.StatusUpgradeRequired,
	Message: "only WebSocket version 13 is served"}

// checkHandshake checks an upgrade request as coder/websocket's Accept
// does, so that a bad one gets a JSON answer instead of the library's
// plain text.
func checkHandshake(w http.ResponseWriter, r *http.Request) error {
	switch {
	case r.Method != http.MethodGet || !r.ProtoAtLeast(1, 1) || !headerHasToken(r.Header, "Connection", "upgrade") ||
		!headerHasToken(r.Header, "Upgrade", "websocket") || !validWSKey(r.Header):
		return errBadHandshake
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		w.Header().Set("Sec-WebSocket-Version", "13")
		return errWSVersion
	}
	return nil
}

// validWSKey reports whether the request carries exactly one
// Sec-WebSocket-Key, the base64 of 16 bytes once trimmed, as
// coder/websocket requires. Checking for 24 bytes let two keys, or 24
// characters that are not such base64, pass here and then be refused by
// the library in plain text; a padded key was refused here though the
// library takes it (FuzzCheckHandshake).
func validWSKey(h http.Header) bool {
	keys := h.Values("Sec-WebSocket-Key")
	if len(keys) != 1 {
		return false
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(keys[0]))
	return err == nil && len(k) == 16
}

// headerHasToken reports whether a comma-separated header holds token
// (case-insensitively).
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// wsHandler is the dedicated WebSocket listener's handler: any path.
func (s *Server) wsHandler() http.Handler {
	return wire.Common(wire.Handler(func(w http.ResponseWriter, r *http.Request) error {
		if !isUpgrade(r) {
			return errUpgradeRequired
		}
		return s.serveWS(w, r)
	}))
}

// serveWS routes, upgrades and runs one WebSocket connection from a
// client. The handler goroutine reads the authentication and then hands
// the reading to a goroutine of the connection's own (runWS).
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) error {
	return s.acceptWS(w, r, false, false)
}

// acceptWS upgrades and runs one WebSocket connection; it returns once
// the connection is authenticated (or over), the connection running on
// its own goroutines. A forwarded one (a link from another machine of the
// app, wire.PathForward) is neither routed before the upgrade nor
// forwarded after its authentication; one carrying a UDP peer (udp) speaks
// PurrNet's UDP framing.
func (s *Server) acceptWS(w http.ResponseWriter, r *http.Request, forwarded, udp bool) error {
	if !forwarded {
		sid, err := wire.ParseSessionHint(r.URL.Query().Get(wire.SessionQueryParam))
		if err != nil {
			return err
		}
		if s.retireReplay(w, r, sid) || s.replayed(w, r, sid, s.wsRouter()) {
			return nil
		}
	}
	if err := checkHandshake(w, r); err != nil {
		return err
	}
	if !forwarded {
		// Bounded from the upgrade to the authentication, which this
		// goroutine reads (runWS) before acceptWS returns.
		src := wire.ClientIP(r, s.opts.ClientIPHeader)
		if !s.pending.Acquire(src) {
			s.m.refusedUpgrades.Inc()
			w.Header().Set("Retry-After", "1")
			return wire.ErrTooManyConns
		}
		defer s.pending.Release(src)
	}
	if !s.admitSession() {
		return wire.ErrDraining
	}

	hw := &wsframe.Hijacker{ResponseWriter: w}
	ws, err := websocket.Accept(hw, r, &websocket.AcceptOptions{
		InsecureSkipVerify: true, // WebGL builds connect from any origin
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		s.sessions.Done()
		return nil // Accept has answered
	}
	raw, _ := r.Context().Value(rawConnKey{}).(net.Conn)
	fc := hw.Writer()
	if fc == nil { // cannot happen: Accept succeeded, so it hijacked (TestCoderHijacksThroughTheWriter)
		_ = ws.CloseNow()
		s.raw.forget(raw)
		s.sessions.Done()
		return nil
	}
	s.runWS(ws, fc, hw.Reader(wire.MaxMessageSize), forwarded, udp, func() {
		s.raw.forget(raw)
		s.sessions.Done()
	})
	return nil
}

// wsRouter is the Router consulted before an upgrade: the sticky router
// of a multi-machine relay, else Options.Router.
func (s *Server) wsRouter() Router {
	if s.mesh != nil {
		return s.mesh.route
	}
	return s.opts.Router
}

// wsTransport is a conn's WebSocket: its writer goroutine (wsWriter)
// drains the conn's queue; a graceful close is bounded by grace, after
// which drop ends the socket so that a writer blocked on a peer that does
// not read is released.
type wsTransport struct {
	core  *core.Core
	clock clock.Clock // static: the relay's clock, the close grace's
	ws    *websocket.Conn
	fc    *wsframe.Writer // the socket our data frames go through; nil: write through ws
	fr    *wsframe.Reader // set before the writer starts, then static: the relay's reader of ws's frames (nil: coder/websocket reads)
	drop  func()          // static: ends the transport at once
	grace time.Duration   // static: bound of a graceful close
	udp   bool            // static: the peer speaks PurrNet's UDP framing (a link carrying a UDP peer)
	wake_ chan struct{}   // static, cap 1: signalled when a frame is queued
	done  chan struct{}   // static, closed once when the conn is closed

	ended chan struct{} // static, closed once when the writer has returned

	// rest is the socket in transit from a sender's direct write that left
	// part of its frame to the writer (wsframe.Rest): set by that sender
	// before its claim ends (conn.write), taken by the writer once
	// takeWrite reports the hand-off. conn.mu orders the two.
	rest wsframe.Rest

	mu          sync.Mutex
	timer       clock.Timer // guarded by mu: the graceful close's bound, on core.clock
	writerEnded bool        // guarded by mu: the writer returned (no bound needed)
}

func newWSTransport(c *core.Core, clk clock.Clock, ws *websocket.Conn, fc *wsframe.Writer, drop func(), grace time.Duration) *wsTransport {
	return &wsTransport{core: c, clock: clk, ws: ws, fc: fc, drop: drop, grace: grace,
		wake_: make(chan struct{}, 1), done: make(chan struct{}), ended: make(chan struct{})}
}

// directWriter is the socket senders may write frames to themselves
// (conn.send): an accepted connection's or a link's, when it is a plain
// socket.
func (t *wsTransport) DirectWriter() core.DirectWriter {
	if t.fc == nil || !t.fc.Direct() {
		return nil
	}
	return t
}

// writeDirect writes one frame to the socket for a sender that claimed it
// (conn.send); a partly written frame leaves its rest, and the socket,
// for the writer.
func (t *wsTransport) WriteDirect(b *buf.Buf) core.DirectResult {
	res, rest := t.fc.WriteDirect(b)
	if rest.Held() {
		t.rest = rest
	}
	return directResults[res]
}

func (t *wsTransport) MaxDirect() int { return wsframe.MaxDirect }

// directResults are the core's names for wsframe's direct write results.
var directResults = [...]core.DirectResult{
	wsframe.DirectWhole:   core.DirectWhole,
	wsframe.DirectPartial: core.DirectPartial,
	wsframe.DirectAgain:   core.DirectAgain,
	wsframe.DirectFailed:  core.DirectFailed,
	wsframe.DirectClosing: core.DirectClosing,
}

// takeRest takes the socket a direct write handed to the writer
// (takeHandoff).
func (t *wsTransport) takeRest() wsframe.Rest {
	r := t.rest
	t.rest = wsframe.Rest{}
	return r
}

func (t *wsTransport) Wake() {
	select {
	case t.wake_ <- struct{}{}:
	default:
	}
}

// closed wakes the writer for its last round and, for an abrupt reason,
// drops the socket on a goroutine of its own (it may be called under a
// room lock); a graceful close arms the grace.
func (t *wsTransport) Closed(reason core.Reason) {
	close(t.done)
	if reason.Abrupt() {
		t.core.Go(t.drop)
		return
	}
	t.mu.Lock()
	if !t.writerEnded && t.timer == nil {
		t.timer = t.clock.NewTimer(t.grace)
		go t.dropAfterGrace(t.timer.C())
	}
	t.mu.Unlock()
}

// dropAfterGrace drops the socket once the close grace has passed, unless
// the writer returned first.
func (t *wsTransport) dropAfterGrace(expired <-chan time.Time) {
	select {
	case <-expired:
		t.drop()
	case <-t.ended:
	}
}

// endWriter records that the writer has returned: the transport is closed
// (or being dropped), so a pending close grace is disarmed. The writer
// calls it once.
func (t *wsTransport) endWriter() {
	t.mu.Lock()
	t.writerEnded = true
	if t.timer != nil {
		t.timer.Stop()
	}
	t.mu.Unlock()
	close(t.ended)
}

// runWS is the life of one WebSocket connection: a reader that routes
// what it reads (fr) and a second goroutine that writes (its data frames
// through fc); done runs once both have ended. A link from
// another machine carrying a UDP peer (udp) speaks PurrNet's UDP framing:
// the delivery method is taken out of each message it reads (unframeUDP)
// and put in front of each frame it writes.
//
// The calling goroutine, the HTTP handler, reads and routes the first
// message (the authentication) and then hands the reading to a fresh
// goroutine and returns. The authentication is the deepest work a reader
// does (JSON; on a multi-machine relay maybe dialling the holder), and a
// goroutine's stack keeps the size it once needed, so an idle connection
// keeps a reader that has only ever run the read loop. With the handler
// gone, net/http's request, response and 4 KiB buffers are garbage too.
func (s *Server) runWS(ws *websocket.Conn, fc *wsframe.Writer, fr *wsframe.Reader, forwarded, udp bool, done func()) {
	t := newWSTransport(s.core, s.clock, ws, fc, func() { _ = ws.CloseNow() }, s.closeGrace)
	t.fr = fr
	t.udp = udp
	if udp {
		fc.PrefixMethod()
	}
	c := s.core.NewConn(t)
	writerDone := make(chan struct{})
	go s.wsWriter(t, c, writerDone)
	// Closed before it leaves: a forwarded conn's leaving closes its link,
	// and the holder's answer (1000) must not overtake the reason the
	// peer is owed (1003 for a text frame, 1009 past the size limit).
	end := func(reason core.Reason) {
		c.Close(reason)
		s.core.Leave(c)
		<-writerDone
		done()
	}
	reason := s.wsAuth(t, c, forwarded)
	if reason == core.ReasonNone && !c.Closing() {
		go func() { end(s.wsReadLoop(t, c)) }()
		return
	}
	end(reason)
}

// wsAuth reads and routes a connection's first message, bounded by the
// authentication timeout, and returns why the connection ended
// (reasonNone: it goes on). On a multi-machine relay, a connection whose
// first message names a room held by another machine (and that is not
// itself forwarded) is carried to that machine instead (forward.go).
func (s *Server) wsAuth(t *wsTransport, c *core.Conn, forwarded bool) core.Reason {
	// Authenticated or not, the deadline only covers the first message
	// (and the control frames written while it is read).
	b, end := t.fr.NextBefore(time.Now().Add(s.opts.AuthTimeout)) // wall clock: the socket's own deadline bounds the authentication
	if end != wsframe.EndNone {
		return reasonOfEnd(end)
	}
	if s.mesh != nil && !forwarded && s.mesh.forward(c, b, false) {
		return core.ReasonNone
	}
	s.core.Handle(c, b)
	return core.ReasonNone
}

// wsReadLoop reads the messages after the first and hands them to the
// core until the connection ends; it returns why. A message after which
// nothing more is waiting to be read may be written to its receiver's
// socket by this goroutine (conn.direct).
func (s *Server) wsReadLoop(t *wsTransport, c *core.Conn) core.Reason {
	for {
		b, end, more := t.fr.Next()
		c.SetDirect(!more)
		if end != wsframe.EndNone {
			return reasonOfEnd(end)
		}
		if t.udp && !unframeUDP(s.core, c, b) {
			continue
		}
		s.core.Handle(c, b)
		if c.Closing() {
			return core.ReasonNone
		}
	}
}

// wsWriter is the connection's only writer: it drains the queue in batches
// and, once the conn is closed, flushes (when the reason allows), sends the
// close frame and returns. Each batch goes through t.fc in one system call
// (an accepted connection's socket, or a link's); without it (a link over
// TLS) it writes through coder/websocket, one message at a time.
//
// A sender may have claimed the socket for one frame (conn.send): the
// writer then waits for the claim to end, and finishes the frame's rest
// first when the direct write left one (takeHandoff).
func (s *Server) wsWriter(t *wsTransport, c *core.Conn, done chan<- struct{}) {
	defer close(done)
	defer t.endWriter()
	var batch []*buf.Buf
	for {
		select {
		case <-t.done:
			s.wsClose(t, c, batch)
			return
		default:
		}
		var st core.TakeState
		batch, st = c.TakeWrite(batch[:0])
		if st == core.TakeHandoff && t.takeRest().Finish(time.Time{}) != nil {
			buf.Release(batch)
			c.Close(core.ReasonWriteError)
			continue
		}
		if len(batch) == 0 {
			if st == core.TakeHandoff {
				continue // the write side is still the writer's: look again
			}
			if cap(batch) > core.ShrinkCap {
				batch = nil
			}
			select {
			case <-t.wake_:
			case <-t.done:
			}
			continue
		}
		s.m.batches.Inc()
		if !writeBatch(context.Background(), t.ws, t.fc, batch) {
			c.Close(core.ReasonWriteError)
		}
	}
}

// wsClose ends a closed conn's transport: it flushes what is still queued
// when the reason allows (bounded by flushTimeout), then sends the close
// frame, or drops the socket for abrupt reasons.
//
// A direct write still in flight ends first (it never blocks, and wakes
// the writer as it ends: the conn is closed); its rest is finished with
// the flush, or dropped.
func (s *Server) wsClose(t *wsTransport, c *core.Conn, batch []*buf.Buf) {
	reason, told := c.CloseStatus()
	flush, ok := reason.Flush(), true
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	deadline, _ := ctx.Deadline()
	for {
		var st core.TakeState
		batch, st = c.TakeWrite(batch[:0])
		if st == core.TakeClaimed {
			<-t.wake_
			continue
		}
		if st == core.TakeHandoff {
			// The rest of a frame already begun is finished for any
			// graceful close, even one that flushes nothing else (a text
			// frame's): without it no close frame could follow.
			if ok && !reason.Abrupt() {
				ok = t.takeRest().Finish(deadline) == nil
			} else {
				t.takeRest().Drop() // half a frame: no close frame can follow
				ok = false
			}
		}
		if len(batch) == 0 {
			if st == core.TakeHandoff {
				continue
			}
			break
		}
		if flush && ok {
			ok = writeBatch(ctx, t.ws, t.fc, batch)
		} else {
			buf.Release(batch)
		}
	}
	cancel()
	c.ReleaseQueue()
	// A flush that failed (timed out) may have left half a frame on the
	// wire: no close frame can follow it.
	if reason.Abrupt() || !ok {
		_ = t.ws.CloseNow()
		return
	}
	code, text := wsCode(told)
	if t.fr == nil {
		_ = t.ws.Close(code, text)
		return
	}
	// The close handshake: our close frame, then the peer's, read by the
	// connection's reader if it is still reading or else here (bounded by
	// the close grace, which drops the socket), then the socket closes.
	if err := t.fc.WriteClose(uint16(code), text, time.Now().Add(closeFrameTimeout)); err == nil { // wall clock: a real socket's write deadline
		t.fr.AwaitClose()
	}
	_ = t.ws.CloseNow()
}

// writeBatch writes every frame of batch in order and releases them; on the
// first error it releases the rest and reports false. With fc the whole
// batch goes out in one system call, bounded by ctx's deadline.
func writeBatch(ctx context.Context, ws *websocket.Conn, fc *wsframe.Writer, batch []*buf.Buf) bool {
	if fc != nil {
		deadline, _ := ctx.Deadline()
		return fc.WriteBatch(batch, deadline) == nil
	}
	ok := true
	for i, b := range batch {
		if ok && ws.Write(ctx, websocket.MessageBinary, b.Frame()) != nil {
			ok = false
		}
		buf.Put(b)
		batch[i] = nil
	}
	return ok
}

// wsCode is the WebSocket close code and text for a reason.
func wsCode(r core.Reason) (websocket.StatusCode, string) {
	switch r {
	case core.ReasonAuthFailed:
		return websocket.StatusPolicyViolation, "authentication failed"
	case core.ReasonUnsupported:
		return websocket.StatusUnsupportedData, "binary messages only"
	case core.ReasonTooBig:
		return wsframe.CloseTooBig, wsframe.TooBigText
	case core.ReasonKicked:
		return websocket.StatusNormalClosure, "kicked"
	case core.ReasonHostLeft:
		return websocket.StatusNormalClosure, "host left"
	case core.ReasonShutdown:
		return websocket.StatusServiceRestart, "relay restarting"
	case core.ReasonRoomGone:
		return websocket.StatusServiceRestart, "room moved"
	case core.ReasonMigrated:
		return websocket.StatusNormalClosure, "host migrated"
	case core.ReasonRejoin:
		return websocket.StatusServiceRestart, "host ready, reconnect"
	case core.ReasonRoomClosed:
		return websocket.StatusNormalClosure, "room closed"
	case core.ReasonSlowReceiver, core.ReasonQueueOverflow:
		return websocket.StatusPolicyViolation, "too slow"
	}
	return websocket.StatusNormalClosure, ""
}

// reasonOfClose maps a close frame from a holder machine (what wsCode
// wrote there) back to the core's reason, for the forwarded peer.
func reasonOfClose(code websocket.StatusCode, text string) core.Reason {
	for _, r := range [...]core.Reason{core.ReasonAuthFailed, core.ReasonUnsupported, core.ReasonTooBig, core.ReasonKicked,
		core.ReasonHostLeft, core.ReasonShutdown, core.ReasonRoomGone, core.ReasonSlowReceiver, core.ReasonMigrated, core.ReasonRejoin, core.ReasonRoomClosed} {
		if c, t := wsCode(r); c == code && t == text {
			return r
		}
	}
	if code == websocket.StatusServiceRestart {
		return core.ReasonShutdown
	}
	return core.ReasonClientLeft // a normal closure: 1000, no text
}

// reasonOfEnd is why a connection whose reader stopped ends.
func reasonOfEnd(end wsframe.End) core.Reason {
	switch end {
	case wsframe.EndUnsupported:
		return core.ReasonUnsupported
	case wsframe.EndTooBig:
		return core.ReasonTooBig
	case wsframe.EndTimeout:
		return core.ReasonAuthTimeout
	case wsframe.EndWriteFailed:
		return core.ReasonWriteError
	}
	return core.ReasonPeerClosed
}
