package core

import (
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/wire"
)

type Role uint8

const (
	RoleNone   Role = iota // not authenticated yet
	RoleClient             // an ordinary client of a room
	RoleHost               // the room's host
	RolePipe               // a pipe peer (no room)
	// RoleForwarded: the peer's room is on another machine of the app; its
	// frames go to the link toward that machine (conn.up) and the holder
	// sees it as an ordinary connection.
	RoleForwarded
)

// closeReason says why a connection ended; it picks the close code, whether
// queued frames are flushed first, and the metric label.
type Reason uint8

const (
	ReasonNone          Reason = iota
	ReasonPeerClosed           // the peer closed or the read failed
	ReasonAuthFailed           // [4] was sent
	ReasonAuthTimeout          // no auth message in time
	ReasonUnsupported          // the peer sent a kind of message the relay does not carry (a WebSocket text message)
	ReasonTooBig               // a message over 65,535 bytes
	ReasonKicked               // the host kicked this client
	ReasonHostLeft             // the room's host left
	ReasonSlowReceiver         // the send queue stayed full past the deadline
	ReasonQueueOverflow        // the send queue hit its hard bound
	ReasonWriteError           // a write failed
	ReasonShutdown             // the relay is going away (1012)
	ReasonUpstream             // forwarded: the holder closed the link; conn.upstream says how
	ReasonUpstreamLost         // forwarded: the link to the holder dropped without a close frame
	ReasonClientLeft           // a link: the forwarded client's connection ended (close 1000 to the holder)
	ReasonRoomGone             // the room ended here: the balancer gave its name to another incarnation (1012)
	ReasonPeerTimeout          // the transport heard nothing from the peer within its timeout
	ReasonMigrated             // a claim moved the room to a new generation: every old socket goes
	ReasonRejoin               // isolated during a migration lease: the host activated, reconnect to it
	ReasonRoomClosed           // an operator closed the room (DELETE /v1/rooms/{name}): 1000 "room closed"
	numReasons
)

var reasonNames = [numReasons]string{"", "peer_closed", "auth_failed", "auth_timeout", "unsupported_message",
	"message_too_big", "kicked", "host_left", "slow_receiver", "queue_overflow", "write_error", "shutdown",
	"upstream_closed", "upstream_lost", "client_left", "room_gone", "peer_timeout", "migrated", "rejoin", "room_closed"}

func (r Reason) String() string { return reasonNames[r] }

// Abrupt reasons close the transport at once, without a close handshake:
// the peer is gone or not reading, so nothing could be delivered anyway.
func (r Reason) Abrupt() bool {
	switch r {
	case ReasonPeerClosed, ReasonAuthTimeout, ReasonSlowReceiver, ReasonQueueOverflow, ReasonWriteError, ReasonTooBig,
		ReasonUpstreamLost, ReasonPeerTimeout:
		return true
	}
	return false
}

// Flush reports whether frames queued before the close are still written
// (the [4] of a failed auth, a host's last packets before a kick, ...). A
// peer that sent what the relay does not carry is told why, and nothing
// more.
func (r Reason) Flush() bool { return !r.Abrupt() && r != ReasonUnsupported }

// Transport is what the routing core needs of a connection's transport
// (package wstransport: a WebSocket, or a link toward a holder machine;
// package udptransport: a LiteNetLib peer). Both calls must be quick and
// never block: they run on readers, possibly under a room lock.
type Transport interface {
	// Wake says frames were queued: the transport's writer takes them
	// (Conn.TakeWrite, Conn.TakeBatch).
	Wake()
	// Closed says the connection was closed (once) for reason: a graceful
	// reason (Reason.Flush) delivers what is queued first, an abrupt one
	// drops the transport at once; the transport then ends and its reader
	// calls Core.Leave.
	Closed(reason Reason)
}

// nopTransport is the transport of a conn without one (core tests).
type nopTransport struct{}

func (nopTransport) Wake() {}

func (nopTransport) Closed(Reason) {}

// Conn is one peer connection as the routing core sees it, whatever its
// transport. The transport delivers messages to Core.Handle from one
// reader at a time (a WebSocket's reader goroutine; the UDP socket reader
// serialised per peer), calls Core.Leave once at the end, and drains the
// queue from its writer.
type Conn struct {
	id   wire.ConnID // static
	core *Core       // static
	t    Transport   // static

	// role and room are written once by the reader at authentication, under
	// room.mu (rooms) or before the conn enters the pipe table (pipes). The
	// reader reads them freely; anyone else reads them under room.mu. up is
	// written with role (roleForwarded): the link toward the holder
	// machine that the conn's frames are queued on.
	role Role
	room *Room
	up   *Conn
	// nat is written once by the reader at authentication: the peer asked
	// for NAT introduction ({"nat":true}); read under room.mu.
	nat bool
	// isolated is guarded by room.mu: a client that joined during a
	// migration lease, not exposed to the provisional host (migration.go).
	isolated bool

	// link is static: true for the upstream side of a forwarded connection
	// (NewLink), a queue and writer toward the holder machine that is no
	// connection of this relay (not in the tables, not in the metrics).
	link bool

	// closing mirrors reason != reasonNone for lock-free checks on the hot path.
	closing atomic.Bool

	// dw and dwMax are static: the transport's direct write (a WebSocket
	// on a plain socket) and the longest frame it takes, or nil: every
	// frame goes through the queue.
	dw    DirectWriter
	dwMax int
	// direct is owned by the reader: set while it routes a message after
	// which its input has nothing more buffered, so that the frame it
	// routes may be written by the reader itself (send). A reader with
	// more to read queues instead and moves on: its receivers' writers
	// write in parallel and batch.
	direct bool

	mu        lockrank.Mutex
	wr        writeState // guarded by mu: who owns the socket's data frames (dw only)
	batching  bool       // guarded by mu: frames to c come in bursts: leave them to the writer (see send)
	q         []*buf.Buf // guarded by mu: frames waiting for the writer, FIFO
	qBytes    int        // guarded by mu: the queued buffers' capacity (buf.weight), what the queue pins
	fullSince time.Time  // guarded by mu: first refusal since the writer last drained; zero if none
	reason    Reason     // guarded by mu: set once by close
	// upstream is, for reasonUpstream, why the holder closed the link (its
	// close status in the core's terms), which the transport tells the
	// forwarded peer; guarded by mu, set with reason.
	upstream Reason
}

// Close marks c closed for reason (the first reason wins) and tells its
// transport, which flushes and ends gracefully or drops at once. It never
// blocks. It reports whether this call closed c.
func (c *Conn) Close(reason Reason) bool {
	return c.closeWith(reason, ReasonNone)
}

// CloseUpstream closes a forwarded peer the way its holder closed the
// link (upstream: the holder's close status in the core's terms), so the
// peer sees what a direct connection would have seen.
func (c *Conn) CloseUpstream(upstream Reason) bool {
	return c.closeWith(ReasonUpstream, upstream)
}

func (c *Conn) closeWith(reason, upstream Reason) bool {
	if reason == ReasonNone {
		reason = ReasonPeerClosed
	}
	c.mu.Lock()
	if c.reason != ReasonNone {
		c.mu.Unlock()
		return false
	}
	c.reason, c.upstream = reason, upstream
	c.closing.Store(true)
	c.mu.Unlock()
	if !c.link {
		c.core.m.disconnect[reason].Inc()
	}
	c.t.Closed(reason)
	return true
}

// CloseReason returns why c was closed (reasonNone while open).
func (c *Conn) CloseReason() Reason {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// CloseStatus returns why c was closed and the reason its transport tells
// the peer: the holder's own for a forwarded peer (reasonUpstream).
func (c *Conn) CloseStatus() (reason, told Reason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reason == ReasonUpstream {
		return c.reason, c.upstream
	}
	return c.reason, c.reason
}
