package core

import (
	"errors"
	"fmt"

	"github.com/purrfly/purrfly/relay/internal/core/phase"
)

// ConsistencyCheck verifies the invariants that tie rooms and connections
// together. It is meant for tests and debugging: it takes every room lock
// in turn, so call it on a quiet relay for an exact answer.
//
//   - every room in the table is not removed and is filed under its name;
//   - a room's host and clients point back at the room with the right role,
//     are open connections, and the host is not also a client;
//   - its phase agrees with its host (hosted has one; only hosted, pending
//     and expired may), isolated clients exist only during a lease, and
//     the lane is one of the clients;
//   - every pipe peer is an open connection with the pipe role;
//   - the room and connection counters match the tables;
//   - no room phase transition was ever refused (phase.go).
func (c *Core) ConsistencyCheck() error {
	var errs []error
	rooms := c.rooms.all()
	if int64(len(rooms)) != c.rooms.n.Load() {
		errs = append(errs, fmt.Errorf("room counter %d, table holds %d", c.rooms.n.Load(), len(rooms)))
	}
	for _, r := range rooms {
		if got := c.rooms.get(r.name); got != r {
			errs = append(errs, fmt.Errorf("room %q is not filed under its name", r.name))
		}
		r.mu.Lock()
		if !r.liveLocked() {
			errs = append(errs, fmt.Errorf("room %q is removed but still in the table", r.name))
		}
		ph := r.phaseLocked()
		switch {
		case ph == phase.Hosted && r.host == nil,
			r.host != nil && ph != phase.Hosted && ph != phase.Pending && ph != phase.Expired:
			errs = append(errs, fmt.Errorf("room %q is %v with host %v", r.name, ph, r.host != nil))
		case len(r.mig.isolated) > 0 && !r.isolatingLocked():
			errs = append(errs, fmt.Errorf("room %q is %v with isolated clients", r.name, ph))
		case r.mig.lane != nil && r.clients[r.mig.lane.id] != r.mig.lane:
			errs = append(errs, fmt.Errorf("room %q: its lane client is not one of its clients", r.name))
		}
		for id, cl := range r.mig.isolated {
			if cl.id != id || cl.room != r || cl.role != RoleClient || !cl.isolated || c.conns.get(id) != cl {
				errs = append(errs, fmt.Errorf("room %q: isolated client %d does not point back", r.name, id))
			}
		}
		if h := r.host; h != nil {
			if h.room != r || h.role != RoleHost {
				errs = append(errs, fmt.Errorf("room %q: host %d does not point back (role %d)", r.name, h.id, h.role))
			}
			if c.conns.get(h.id) != h {
				errs = append(errs, fmt.Errorf("room %q: host %d is not an open connection", r.name, h.id))
			}
			if r.clients[h.id] != nil {
				errs = append(errs, fmt.Errorf("room %q: host %d is also a client", r.name, h.id))
			}
		}
		for id, cl := range r.clients {
			if cl.id != id || cl.room != r || cl.role != RoleClient {
				errs = append(errs, fmt.Errorf("room %q: client %d does not point back", r.name, id))
			}
			if c.conns.get(id) != cl {
				errs = append(errs, fmt.Errorf("room %q: client %d is not an open connection", r.name, id))
			}
		}
		if r.countLocked() == 0 && r.emptySince.IsZero() {
			errs = append(errs, fmt.Errorf("room %q is empty without an empty-since time", r.name))
		}
		r.mu.Unlock()
	}
	for _, p := range c.pipes.all() {
		if p.role != RolePipe || c.conns.get(p.id) != p {
			errs = append(errs, fmt.Errorf("pipe %d is not an open pipe connection", p.id))
		}
	}
	if n := len(c.conns.all()); int64(n) != c.conns.n.Load() {
		errs = append(errs, fmt.Errorf("connection counter %d, table holds %d", c.conns.n.Load(), n))
	}
	if n, last := c.refusedPhases(); n > 0 {
		errs = append(errs, fmt.Errorf("%d room phase transitions refused, the last: %w", n, last))
	}
	return errors.Join(errs...)
}
