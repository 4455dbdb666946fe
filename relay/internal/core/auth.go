package core

import (
	"fmt"
	"slices"

	"github.com/purrfly/purrfly/relay/internal/buf"
	"github.com/purrfly/purrfly/relay/internal/core/phase"
	"github.com/purrfly/purrfly/wire"
)

// maxRoomClients bounds a room's clients so that the host's "clients
// connected" packet, which lists them all, fits one 65,535-byte message.
const maxRoomClients = (wire.MaxMessageSize - 1) / 4

// auth handles the first message of cn.
func (c *Core) auth(cn *Conn, b *buf.Buf) {
	a, err := wire.ParseAuth(b.Frame())
	buf.Put(b)
	if err != nil {
		c.authFail(cn)
		return
	}
	if a.Pipe {
		c.authPipe(cn)
		return
	}
	r := c.rooms.get(a.RoomName)
	if r == nil {
		c.authFail(cn)
		return
	}
	r.mu.Lock()
	if !r.liveLocked() || len(r.clients)+len(r.mig.isolated) >= maxRoomClients {
		r.mu.Unlock()
		c.authFail(cn)
		return
	}
	cn.nat = a.NAT
	switch {
	case wire.SecretEqual(a.ClientSecret, r.clientSecret):
		c.joinClientLocked(r, cn, a)
	case wire.SecretEqual(a.ClientSecret, r.hostSecret) && r.hostMayConnectLocked():
		c.joinHostLocked(r, cn)
	default:
		// Wrong secret, a second host for the room, or a host credential
		// already spent (or expired with its lease).
		r.mu.Unlock()
		c.authFail(cn)
		return
	}
	r.changedLocked(c)
	r.mu.Unlock()
	c.m.authOK.Inc()
}

// authPipe makes cn a pipe peer and answers [5][id].
func (c *Core) authPipe(cn *Conn) {
	cn.role = RolePipe
	c.pipes.add(cn.id, cn)
	c.m.authOK.Inc()
	f := buf.Get(5)
	f.End = len(wire.AppendPipeAuthenticated(f.B[:0], cn.id))
	cn.Enqueue(f, DirControl)
}

// joinClientLocked makes cn a client of r (the client credential) and
// answers [3]; the host hears of it, unless a migration lease isolates
// cn. The caller holds r.mu.
func (c *Core) joinClientLocked(r *Room, cn *Conn, a wire.Auth) {
	cn.role, cn.room = RoleClient, r
	if r.isolatingLocked() {
		// A migration lease: only the promoted player's listen-client
		// reaches the provisional host (migration.go).
		if !r.laneLocked(a) {
			r.isolateLocked(cn)
			cn.Enqueue(buf.Of(wire.Authenticated), DirControl)
			return
		}
		r.mig.lane = cn
	}
	r.clients[cn.id] = cn
	if r.host != nil {
		// NAT introduction first on both sides (PurrLay's order): the
		// host learns a punch is pending before the client's notice,
		// the client before [3], after which it reads only game data.
		c.introduceLocked(r, cn)
		f := buf.Get(5)
		f.End = len(wire.AppendConnected(f.B[:0], cn.id))
		r.host.Enqueue(f, DirControl)
	}
	cn.Enqueue(buf.Of(wire.Authenticated), DirControl)
}

// joinHostLocked makes cn r's host (the host credential, spent by this
// socket: it is single-activation) and answers [3], then, when clients
// are in already, every id in one packet. The caller holds r.mu.
func (c *Core) joinHostLocked(r *Room, cn *Conn) {
	cn.role, cn.room = RoleHost, r
	r.hostArrivedLocked(cn)
	cn.Enqueue(buf.Of(wire.Authenticated), DirControl)
	if len(r.clients) > 0 {
		ids := make([]wire.ConnID, 0, len(r.clients))
		for id := range r.clients {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		f := buf.Get(1 + 4*len(ids))
		f.End = len(wire.AppendConnected(f.B[:0], ids...))
		cn.Enqueue(f, DirControl)
	}
}

func (c *Core) authFail(cn *Conn) {
	c.m.authFailed.Inc()
	cn.Enqueue(buf.Of(wire.AuthFailed), DirControl)
	cn.Close(ReasonAuthFailed)
}

// Leave removes cn from its room or the pipe table. The transport calls it
// exactly once, from cn's reader, when the connection ends.
func (c *Core) Leave(cn *Conn) {
	switch cn.role {
	case RolePipe:
		c.pipes.remove(cn.id, cn)
	case RoleClient:
		r := cn.room
		r.mu.Lock()
		switch {
		case r.clients[cn.id] == cn:
			if r.mig.lane == cn {
				r.mig.lane = nil
			}
			c.removeClientLocked(r, cn)
		case r.mig.isolated[cn.id] == cn:
			delete(r.mig.isolated, cn.id)
			cn.isolated = false
			r.changedLocked(c)
		}
		r.mu.Unlock()
	case RoleHost:
		c.hostLeft(cn)
	case RoleForwarded:
		// The holder sees the peer leave: the link closes normally.
		cn.up.Close(ReasonClientLeft)
	}
	if c.conns.remove(cn.id, cn) && c.conns.n.Load() == 0 {
		select {
		case c.idle <- struct{}{}:
		default:
		}
	}
}

// hostLeft disconnects every client of the host's room (the provisional
// host's too). A room that had clients stays, count 0 and vacant, so that
// one of them can claim it (host migration), and so does one whose
// provisional host left (its players, closed by the claim, come back to
// claim again); an active host leaving an otherwise empty room ends it.
func (c *Core) hostLeft(cn *Conn) {
	r := cn.room
	r.mu.Lock()
	if r.host != cn {
		r.mu.Unlock()
		return
	}
	kicked := r.takeClientsLocked(nil)
	var rem wire.Removal
	removed := len(kicked) == 0 && r.phaseLocked() == phase.Hosted
	if removed {
		r.host = nil
		rem = r.removeLocked()
	} else {
		r.hostGoneLocked() // vacant: published with the count change below
		r.changedLocked(c)
	}
	reason := ReasonHostLeft
	if c.stopping.Load() {
		reason = ReasonShutdown
	}
	// Closed under the lock: none of them can forward another packet.
	for _, cl := range kicked {
		cl.Close(reason)
	}
	r.mu.Unlock()
	if removed {
		c.dropRoom(r, rem)
	}
}

// introduceLocked starts a NAT introduction between r's host and a client
// that just joined when both asked for it ({"nat":true}) and the transport
// of both can introduce them (UDP peers of this machine): the same [6][token] to the host, then the client
// (docs/UDP.md, NAT punch flow). The token ends with the client's id (the
// host maps the direct peer to it) and carries 128 random bits (it is the
// host's accept key for the direct connection, so it must not be
// guessable). The peers stay relayed either way. The caller holds r.mu.
func (c *Core) introduceLocked(r *Room, cl *Conn) {
	h := r.host
	if c.nat == nil || !cl.nat || !h.nat || !c.nat.CanPunch(h.t) || !c.nat.CanPunch(cl.t) {
		return
	}
	token := fmt.Sprintf("%.8s_%s_%d", r.epoch, randomHex(16), cl.id)
	c.nat.Expect(token, h.t, cl.t)
	for _, to := range [...]*Conn{h, cl} {
		f := buf.Get(1 + len(token))
		f.End = copy(f.B[1:], token) + 1
		f.B[0] = wire.ToHostNATIntroduce
		to.Enqueue(f, DirControl)
	}
}
