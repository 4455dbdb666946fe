// Package udpframe reads PurrNet's UDP framing where it enters the relay:
// a UDP peer's messages (the UDP transport), and a link carrying a UDP
// peer between two machines of an app (the WebSocket transport). Over
// UDP a packet carries the delivery method it is to be sent with, at a
// place that depends on who sent it (wire/udp.go); the routing core takes
// messages in PurrNet's WebSocket form with their method beside them, so
// the method is taken out here, before the core sees the message.
//
// On a link carrying a UDP peer the holder puts each frame's method in
// front of it (wsframe.Writer.PrefixMethod), and the edge takes it off
// (Prefixed) before queuing the frame for the peer.
package udpframe

import (
	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core"
	"github.com/purrfly/purrfly/wire"
)

// Unframe takes the delivery method out of b, a message of cn in
// PurrNet's UDP framing (wire.UDPMethod: where it is depends on who sent
// it), leaving the message in its WebSocket form with the method in
// b.Method. It reports whether b is still to be routed: a packet without
// a valid method is dropped and counted. The authentication carries no
// method, nor does anything of a closing connection (the core drops it as
// the sender's) or of a peer forwarded to its room's holder, which reads
// the framing itself. Only cn's reader calls it.
func Unframe(c *core.Core, cn *core.Conn, b *buf.Buf) bool {
	var from wire.Sender
	switch {
	case cn.Closing():
		return true
	case cn.Role() == core.RoleClient:
		from = wire.FromClient
	case cn.Role() == core.RoleHost:
		from = wire.FromHost
	case cn.Role() == core.RolePipe:
		from = wire.FromPipe
	default:
		return true
	}
	d, at, err := wire.UDPMethod(from, b.Frame())
	if err != nil {
		buf.Put(b)
		c.DropMalformed(err)
		return false
	}
	if at >= 0 {
		b.Method = d
		b.CutAt(at)
	}
	return true
}

// Prefixed takes the delivery method off the front of b, a frame a holder
// sent on a link carrying a UDP peer, into b.Method. It reports false
// (and releases b) when b has none.
func Prefixed(b *buf.Buf) bool {
	if b.Len() < 1 || !wire.Delivery(b.B[b.Off]).Valid() {
		buf.Put(b)
		return false
	}
	b.Method = wire.Delivery(b.B[b.Off])
	b.Off++
	return true
}
