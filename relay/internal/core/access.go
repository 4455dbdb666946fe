package core

import (
	"slices"
	"sort"
	"strings"

	"github.com/purrfly/purrfly/relay/internal/core/phase"
	"github.com/purrfly/purrfly/wire"
)

// What the server, the transports, the mesh and the registrar ask of the
// core and its connections and rooms, besides routing.

// ID is the connection's id (static).
func (c *Conn) ID() wire.ConnID { return c.id }

// Role is the connection's role. Its reader reads it freely (it writes it,
// at authentication); nobody else calls it.
func (c *Conn) Role() Role { return c.role }

// Closing reports whether the connection was closed (lock-free).
func (c *Conn) Closing() bool { return c.closing.Load() }

// SetDirect says whether the message the reader routes next is the last
// it has read (nothing more buffered), so that the frame it routes may be
// written by the reader itself (Conn.Send). Only the reader calls it.
func (c *Conn) SetDirect(direct bool) { c.direct = direct }

// Transport is the connection's transport (static).
func (c *Conn) Transport() Transport { return c.t }

// ForwardTo makes c a forwarded connection whose frames go to link, the
// queue toward the machine holding its room (NewLink). The reader calls
// it once, in place of routing c's first message.
func (c *Conn) ForwardTo(link *Conn) { c.role, c.up = RoleForwarded, link }

// WriteIdle reports whether nobody owns c's write side and nothing is
// queued (tests: the writer is parked, as between two game ticks).
func (c *Conn) WriteIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wr == wrIdle && len(c.q) == 0
}

// Room is the live room of that name here, or nil.
func (c *Core) Room(name string) *Room {
	r := c.rooms.get(name)
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.liveLocked() {
		return nil
	}
	return r
}

// Local reports whether this relay holds a live room of that name.
func (c *Core) Local(name string) bool { return c.Room(name) != nil }

// Conn is the open connection with id, or nil.
func (c *Core) Conn(id wire.ConnID) *Conn { return c.conns.get(id) }

// NumRooms and NumConns count the rooms held and the connections open.
func (c *Core) NumRooms() int { return int(c.rooms.n.Load()) }

// UnhostedReleased counts the rooms released because their host never
// connected within the host window, since this relay started.
func (c *Core) UnhostedReleased() uint64 { return c.unhosted.Load() }

// NumConns counts the connections open.
func (c *Core) NumConns() int { return int(c.conns.n.Load()) }

// Idle is signalled (capacity 1) when the last connection leaves.
func (c *Core) Idle() <-chan struct{} { return c.idle }

// SetDraining stops new rooms: an allocation replays but creates nothing.
func (c *Core) SetDraining() { c.draining.Store(true) }

// Draining reports whether SetDraining was called.
func (c *Core) Draining() bool { return c.draining.Load() }

// SetRetiring stops new rooms for the rest of the process (a deploy
// retired the relay): as draining, but the relay serves on.
func (c *Core) SetRetiring() { c.retiring.Store(true) }

// Retiring reports whether SetRetiring was called.
func (c *Core) Retiring() bool { return c.retiring.Load() }

// TakesNoRooms reports whether the relay creates no room: it drains or
// retires.
func (c *Core) TakesNoRooms() bool { return c.takesNoRooms() }

// Capacity is the bounds past which a new room is relay_full.
func (c *Core) Capacity() wire.Capacity {
	return wire.Capacity{MaxRooms: c.maxRooms, MaxConnections: c.maxConns}
}

// Wait waits for the goroutines transports started through Go.
func (c *Core) Wait() { c.aborts.Wait() }

// SetNotifier makes n the notifier of room changes. Call it once, before
// any room exists.
func (c *Core) SetNotifier(n Notifier) { c.notify = n }

// SetNAT makes n the transport that introduces peers for NAT
// punch-through. Call it before any connection exists.
func (c *Core) SetNAT(n NAT) { c.nat = n }

// Drop counts one packet dropped for reason (a drop* label).
func (c *Core) Drop(reason string) { c.m.drop(reason) }

// EndIncarnation ends room name if it is still incarnation epoch, as
// EndRoom does, and reports whether it did.
func (c *Core) EndIncarnation(name, epoch string, reason Reason) bool {
	r := c.rooms.get(name)
	if r == nil {
		return false
	}
	return c.endRoomIf(r, reason, func() bool { return r.epoch == epoch })
}

// Publication is the room as the balancer sees it, and whether it is
// live.
func (r *Room) Publication() (wire.Publication, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.publicationLocked(), r.liveLocked()
}

// Publications are the live rooms' publications, by name; nil rooms
// means every room.
func (c *Core) Publications(rooms []*Room) []wire.Publication {
	if rooms == nil {
		rooms = c.rooms.all()
	}
	pubs := make([]wire.Publication, 0, len(rooms))
	for _, r := range rooms {
		if p, live := r.Publication(); live {
			pubs = append(pubs, p)
		}
	}
	slices.SortFunc(pubs, func(a, b wire.Publication) int { return strings.Compare(a.Name, b.Name) })
	return pubs
}

// RoomsView is this relay's own view of its rooms (wire.PathRelayRooms),
// by name, at most wire.MaxRelayRoomsListed of them. Each room's lock is
// taken only to copy its fields.
func (c *Core) RoomsView() (rooms []wire.RelayRoom, truncated bool) {
	all := c.rooms.all()
	rooms = make([]wire.RelayRoom, 0, min(len(all), wire.MaxRelayRoomsListed))
	for _, rm := range all {
		if len(rooms) == wire.MaxRelayRoomsListed {
			truncated = true
			break
		}
		rm.mu.Lock()
		ph := rm.phaseLocked()
		rooms = append(rooms, wire.RelayRoom{Name: rm.name, Epoch: rm.epoch, Phase: ph.String(),
			Hosted: rm.host != nil && ph == phase.Hosted, Connections: rm.countLocked()})
		rm.mu.Unlock()
	}
	sort.Slice(rooms, func(i, j int) bool { return rooms[i].Name < rooms[j].Name })
	return rooms, truncated
}

// Rooms are the rooms in the table (a snapshot).
func (c *Core) Rooms() []*Room { return c.rooms.all() }

// Name is the room's name (static).
func (r *Room) Name() string { return r.name }

// Incarnation is the room incarnation's game session id (static).
func (r *Room) Incarnation() string { return r.incarnation }

// Epoch is the incarnation's route epoch.
func (r *Room) Epoch() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epoch
}

// Revision is the incarnation's revision, bumped by every count change.
func (r *Room) Revision() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.revision
}

// ClientSecret is the room's client credential.
func (r *Room) ClientSecret() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clientSecret
}

// Count is the room's connection count (host included, as PurrLay counts
// it).
func (r *Room) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.countLocked()
}

// WriteState is who owns c's write side: "idle", "writer", "direct" (a
// sender's claim) or "handoff" (a direct write's rest, for the writer).
// For tests and debugging.
func (c *Conn) WriteState() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return writeStateNames[c.wr]
}

var writeStateNames = [...]string{wrIdle: "idle", wrWriter: "writer", wrDirect: "direct", wrHandoff: "handoff"}

// Claimed reports whether the frame was claimed (Write writes it) rather
// than queued or dropped.
func (cl Claim) Claimed() bool { return cl.c != nil }

// Host is the room's host connection (provisional included), or nil.
func (r *Room) Host() *Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.host
}
