package wstransport

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"time"

	"github.com/coder/websocket"

	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/relay/internal/udpframe"
	"github.com/purrfly/purrfly/relay/internal/wsframe"
	"github.com/purrfly/purrfly/wire"
)

// A link is the edge's client WebSocket to the machine holding a
// forwarded connection's room (wire.PathForward). coder/websocket dials
// and reads it; its socket is a masked wsframe.Writer (wsframe.DialContext)
// where the link's writer writes its frames, one system call per batch.

// LinkGrace bounds how long a forwarded connection waits for its link's
// close handshake with the holder before dropping the link outright.
const LinkGrace = flushTimeout + time.Second

// Keepalive of a link: a holder that vanishes without closing its sockets
// (a host failure rather than a process exit) is found out after about
// linkKeepIdle + linkKeepCount*linkKeepInterval.
const (
	linkKeepIdle     = 5 * time.Second
	linkKeepInterval = 2 * time.Second
	linkKeepCount    = 3
)

// LinkClient is the http.Client links are dialed through: TCP dials
// bounded by dialTimeout, with keepalive and (on Linux) a bound on
// unacknowledged data in flight, each connection a masked wsframe.Writer.
// Links are hijacked by the WebSocket library: the transport never pools
// them, so it needs no idle limits.
func LinkClient(dialTimeout time.Duration) *http.Client {
	d := &net.Dialer{
		Timeout: dialTimeout,
		Control: linkSocketControl,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: linkKeepIdle, Interval: linkKeepInterval, Count: linkKeepCount,
		},
	}
	return &http.Client{Transport: &http.Transport{DialContext: wsframe.DialContext(d), ForceAttemptHTTP2: false}}
}

// Link is the edge's side of a link to a holder machine.
type Link struct {
	ws *websocket.Conn // static
	// lc is the socket ws runs on, where the link's data frames are
	// written and which the edge closes itself. nil when the link does not
	// run on a plain socket (a wss:// endpoint: TLS sits in between); such
	// a link writes through ws one message at a time and is closed by
	// coder/websocket.
	lc *wsframe.Writer // static
}

// DialLink opens a link to url (a holder's PathForward) through client
// (LinkClient), with headers h; ctx bounds the handshake.
func DialLink(ctx context.Context, client *http.Client, url string, h http.Header) (*Link, error) {
	// GotConn runs on this goroutine, inside websocket.Dial, with the
	// connection the upgrade request was sent on (the last one, if the
	// transport retried).
	var nc net.Conn
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { nc = info.Conn },
	})
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPClient:      client,
		HTTPHeader:      h,
		CompressionMode: websocket.CompressionDisabled,
	})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(wire.MaxMessageSize + buf.Headroom)
	return &Link{ws: ws, lc: wsframe.Upgraded(nc)}, nil
}

// drop ends the link at once: it closes the socket itself, which fails a
// blocked write and ends a close handshake in progress (coder/websocket's
// CloseNow does not close a socket whose close handshake is under way),
// then releases coder/websocket's side.
func (l *Link) drop() {
	if l.lc != nil {
		_ = l.lc.Close()
	}
	_ = l.ws.CloseNow()
}

// RunLink carries connection c (of any transport) over link l to the
// machine holding its room, starting with its authentication message,
// first. It is the forwarding path, DERP-mesh style: nothing is written
// inline by a reader.
//
//	c's reader --core.Handle (forwarded)--> link queue --> link writer --> holder
//	holder --> link reader --Enqueue--> c's queue --> c's writer --> peer
//
// Both queues are ordinary connection queues with their bounds and
// slow-receiver rules. The holder serves the link as an ordinary
// connection, so the peer sees the holder's own frames, notices and close
// status: a close frame from the holder is passed on with its reason
// after the frames queued before it (kicked, host left, [4] then
// authentication failed, shutdown); a link that drops without a close
// frame (the holder died) drops the peer at once, as a direct connection
// to a dead machine would drop. A peer that leaves closes the link
// normally (core.Leave), so the holder sees it leave; a holder that does
// not answer that close within LinkGrace has its link's socket closed by
// the edge, whatever coder/websocket's own timers say. A UDP peer's link
// speaks PurrNet's UDP framing (udp): the holder prefixes each frame with
// its delivery method, which the link reader takes off.
//
// Goroutines: the link's writer and reader; the writer, once it ends,
// drops the socket and waits for the reader; then ended runs.
func (t *Transport) RunLink(c *core.Conn, l *Link, first *buf.Buf, udp bool, ended func()) {
	tc := newConn(t.cfg.Core, t.cfg.Clock, l.ws, l.lc, l.drop, LinkGrace)
	link := t.cfg.Core.NewLink(tc)
	c.ForwardTo(link)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		linkReader(l.ws, c, link, udp)
	}()
	go func() {
		writerDone := make(chan struct{})
		t.writer(tc, link, writerDone)
		<-writerDone
		l.drop() // the close handshake is over or given up: the reader ends at once
		<-readerDone
		ended()
	}()
	link.Enqueue(first, core.DirMeshOut)
}

// linkReader reads the holder's frames into c's queue until the link
// ends, then closes c the way the holder closed the link, and stops the
// link's writer. On a link in UDP framing each frame comes behind its
// delivery method, which it is sent to the peer with.
func linkReader(ws *websocket.Conn, c *core.Conn, link *core.Conn, udp bool) {
	defer link.Close(core.ReasonPeerClosed)
	for {
		typ, rd, err := ws.Reader(context.Background())
		if err == nil && typ != websocket.MessageBinary {
			err = errors.New("the holder sent a text message")
		}
		var b *buf.Buf
		if err == nil {
			b, err = buf.ReadInto(rd, 0, wire.MaxMessageSize+buf.Headroom+1)
		}
		if err == nil && udp && !udpframe.Prefixed(b) {
			err = errors.New("the holder sent a frame without a delivery method")
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
