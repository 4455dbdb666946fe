package core

import (
	"encoding/binary"

	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/wire"
)

// Handle routes one message read from cn. It takes ownership of b, whose
// frame starts headroom bytes into its buffer, in PurrNet's WebSocket
// framing, and whose method is the delivery method it came with (a UDP
// transport takes it out of its own framing first, wire.UDPMethod; a
// forwarded peer's messages go to the holder as they came). Only cn's
// reader calls it.
func (c *Core) Handle(cn *Conn, b *buf.Buf) {
	if cn.closing.Load() {
		buf.Put(b)
		c.m.drop(DropSenderClosed)
		return
	}
	switch cn.role {
	case RoleNone:
		c.auth(cn, b)
	case RoleClient:
		c.fromClient(cn, b)
	case RoleHost:
		c.fromHost(cn, b)
	case RolePipe:
		c.fromPipe(cn, b)
	case RoleForwarded:
		cn.up.Send(b, DirMeshOut, cn.direct).Write()
	}
}

// maxClientPayload is the largest client payload forwarded to a host: its
// [2][sender:4][payload] frame must fit one 65,535-byte message, the most
// PurrNet's host socket (SimpleWebTransport) accepts.
const maxClientPayload = wire.MaxMessageSize - 5

// fromClient forwards a client's payload to its host as [2][sender][payload],
// writing the header into the buffer's headroom (no copy), with the
// client's delivery method. The enqueue happens under the room lock, so a
// client that the host kicked (or whose host left) can never slip a packet
// in after its disconnect notice.
//
// PurrLay drops a client packet of one byte or less as it was sent, its
// framing included (a UDP client's [method][x] carries one byte to the
// host).
func (c *Core) fromClient(cn *Conn, b *buf.Buf) {
	if b.Len()+b.Cut <= 1 {
		buf.Put(b)
		c.m.drop(DropSmallClient)
		return
	}
	if b.Len() > maxClientPayload {
		// Legal from the client, but the host's socket could not take the
		// framed packet: PurrLay's SendOne drops it too.
		buf.Put(b)
		c.m.drop(DropTooLargeForHost)
		return
	}
	b.Off -= 5
	b.B[b.Off] = wire.ToHostData
	binary.LittleEndian.PutUint32(b.B[b.Off+1:], uint32(cn.id))
	r := cn.room
	r.mu.Lock()
	h, gone := r.host, cn.closing.Load()
	if h != nil && !gone && !cn.isolated {
		w := h.Send(b, DirToHost, cn.direct)
		r.mu.Unlock()
		w.Write()
		return
	}
	isolated := cn.isolated
	r.mu.Unlock()
	buf.Put(b)
	switch {
	case gone:
		c.m.drop(DropSenderClosed)
	case isolated:
		c.m.drop(DropIsolated)
	default:
		c.m.drop(DropNoHost)
	}
}

// fromHost handles keepalive, SEND_ONE and KICK. Malformed packets are
// dropped and counted; the connection stays (PurrLay does the same).
func (c *Core) fromHost(cn *Conn, b *buf.Buf) {
	p, err := wire.ParseHostPacket(b.Frame())
	if err != nil {
		buf.Put(b)
		c.DropMalformed(err)
		return
	}
	switch {
	case p.Type == wire.HostKeepAlive:
		buf.Put(b)
		return
	case p.Type == wire.HostSendOne && len(p.Payload) == 0:
		buf.Put(b)
		c.m.drop(DropEmptyPayload)
		return
	}
	r := cn.room
	r.mu.Lock()
	if r.host != cn || cn.closing.Load() {
		// Read just before a claim fenced this host: nothing of it reaches
		// the new generation.
		r.mu.Unlock()
		buf.Put(b)
		c.m.drop(DropSenderClosed)
		return
	}
	t := r.clients[p.Target]
	if t == nil {
		r.mu.Unlock()
		buf.Put(b)
		c.m.drop(DropBadTarget)
		return
	}
	if p.Type == wire.HostSendOne {
		b.Off += 5
		w := t.Send(b, DirToClient, cn.direct)
		r.mu.Unlock()
		w.Write()
		return
	}
	// Kick: the client leaves the room now, as PurrLay does, so the host
	// hears of it at once rather than after the close handshake.
	buf.Put(b)
	c.removeClientLocked(r, t)
	t.Close(ReasonKicked)
	r.mu.Unlock()
}

// removeClientLocked takes cl out of r, tells the host and records the
// count change. The caller holds r.mu.
func (c *Core) removeClientLocked(r *Room, cl *Conn) {
	delete(r.clients, cl.id)
	if r.host != nil {
		f := buf.Get(5)
		f.End = len(wire.AppendDisconnected(f.B[:0], cl.id))
		r.host.Enqueue(f, DirControl)
	}
	r.changedLocked(c)
}

// fromPipe forwards [target][data] as [sender][data], rewriting the id in
// place, with the sender's delivery method.
func (c *Core) fromPipe(cn *Conn, b *buf.Buf) {
	target, data, err := wire.ParsePipe(b.Frame())
	if err != nil {
		buf.Put(b)
		c.m.drop(DropTruncated)
		return
	}
	if len(data) == 0 {
		buf.Put(b)
		c.m.drop(DropEmptyPayload)
		return
	}
	t := c.pipes.get(target)
	if t == nil {
		buf.Put(b)
		c.m.drop(DropBadTarget)
		return
	}
	binary.LittleEndian.PutUint32(b.B[b.Off:], uint32(cn.id))
	t.Send(b, DirPipe, cn.direct).Write()
}

// DropMalformed counts a packet a parser of wire refused, by its error.
func (c *Core) DropMalformed(err error) {
	switch err {
	case wire.ErrEmptyPacket:
		c.m.drop(DropEmpty)
	case wire.ErrTruncatedPacket:
		c.m.drop(DropTruncated)
	case wire.ErrEmptyPayload:
		c.m.drop(DropEmptyPayload)
	case wire.ErrBadMethod:
		c.m.drop(DropBadMethod)
	default:
		c.m.drop(DropUnknown)
	}
}
