package balancer

import (
	"maps"
	"slices"

	"github.com/purrfly/purrfly/wire"
)

// fleetView is the fleet's semantic state as the event stream diffs it
// (no heartbeat timestamps: a quiet fleet makes no events).
type fleetView struct {
	at        string                   // when it was taken, RFC 3339 UTC
	instances map[string]wire.Instance // by boot id, LastHeartbeat cleared
	rooms     map[string]wire.Room     // by name
	stats     wire.Stats
}

// diffFleet lists the events that lead from a to b: instances first
// (leave, join, drain, retire, undrain, stale, update), then rooms (close,
// create, update), each group in key order, then stats if they changed.
func diffFleet(a, b fleetView) []wire.Event {
	var out []wire.Event
	add := func(typ string, in *wire.Instance, rm *wire.Room) {
		out = append(out, wire.Event{Type: typ, At: b.at, Instance: in, Room: rm})
	}
	for _, id := range slices.Sorted(maps.Keys(a.instances)) {
		if _, ok := b.instances[id]; !ok {
			in := a.instances[id]
			add(wire.EventInstanceLeave, &in, nil)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(b.instances)) {
		in := b.instances[id]
		old, ok := a.instances[id]
		switch {
		case !ok:
			add(wire.EventInstanceJoin, &in, nil)
		case old.Status != in.Status && in.Status == wire.InstanceDraining:
			add(wire.EventInstanceDrain, &in, nil)
		case old.Status != in.Status && in.Status == wire.InstanceRetiring:
			add(wire.EventInstanceRetire, &in, nil)
		case old.Status != in.Status:
			add(wire.EventInstanceUndrain, &in, nil)
		case !old.Stale && in.Stale:
			add(wire.EventInstanceStale, &in, nil)
		case old.Stale && !in.Stale:
			add(wire.EventInstanceUpdate, &in, nil)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(a.rooms)) {
		if _, ok := b.rooms[n]; !ok {
			rm := a.rooms[n]
			add(wire.EventRoomClose, nil, &rm)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(b.rooms)) {
		rm := b.rooms[n]
		old, ok := a.rooms[n]
		switch {
		case !ok:
			add(wire.EventRoomCreate, nil, &rm)
		case old != rm:
			add(wire.EventRoomUpdate, nil, &rm)
		}
	}
	if !statsEqual(a.stats, b.stats) {
		st := b.stats
		out = append(out, wire.Event{Type: wire.EventStats, At: b.at, Stats: &st})
	}
	return out
}

func statsEqual(a, b wire.Stats) bool {
	return a.Relays == b.Relays && a.Draining == b.Draining && a.Retiring == b.Retiring && a.Rooms == b.Rooms && a.Players == b.Players &&
		slices.Equal(a.Regions, b.Regions)
}
