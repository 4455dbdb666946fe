package balancer

import "github.com/purrfly/purrfly/wire"

// count adds (d = 1) or takes away (d = -1) rec, one of r's live routes,
// from r's aggregates. The caller holds rec's room lease.
func (r *relayEntry) count(rec *roomRecord, d int64) {
	r.rooms.Add(d)
	r.conns.Add(d * int64(rec.connections))
	switch phaseOf(rec) {
	case wire.RoomWaiting:
		r.waiting.Add(d)
	case wire.RoomVacant:
		r.vacant.Add(d)
	}
}

// phaseOf is a route's phase as the admin API shows it: vacant once its
// host left, waiting while nobody is connected, else active.
func phaseOf(rec *roomRecord) string {
	switch {
	case rec.vacant:
		return wire.RoomVacant
	case rec.connections == 0:
		return wire.RoomWaiting
	}
	return wire.RoomActive
}

// phaseRooms is how many of r's live routes are in phase ("" for all).
func (r *relayEntry) phaseRooms(phase string) int64 {
	switch phase {
	case wire.RoomWaiting:
		return r.waiting.Load()
	case wire.RoomVacant:
		return r.vacant.Load()
	case wire.RoomActive:
		return r.rooms.Load() - r.waiting.Load() - r.vacant.Load()
	}
	return r.rooms.Load()
}
