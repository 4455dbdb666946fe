package balancer

import (
	"maps"
	"slices"
	"strings"

	"github.com/purrfly/purrfly/wire"
)

// fleetView is the relays' semantic state as the event stream diffs it
// (no heartbeat timestamps: a quiet fleet makes no events). Rooms are not
// in it: their events come from the hub's log of route changes.
type fleetView struct {
	at        string                   // when it was taken, RFC 3339 UTC
	instances map[string]wire.Instance // by boot id, LastHeartbeat cleared
	current   map[*relayEntry]bool     // the registrations current then: whose routes a consumer sees
	stats     wire.Stats
}

// diffInstances lists the instance events that lead from a to b: leave,
// then join, drain, retire, undrain, stale, update, each group in boot id
// order.
func diffInstances(a, b fleetView) []wire.Event {
	var out []wire.Event
	add := func(typ string, in *wire.Instance) {
		out = append(out, wire.Event{Type: typ, At: b.at, Instance: in})
	}
	for _, id := range slices.Sorted(maps.Keys(a.instances)) {
		if _, ok := b.instances[id]; !ok {
			in := a.instances[id]
			add(wire.EventInstanceLeave, &in)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(b.instances)) {
		in := b.instances[id]
		old, ok := a.instances[id]
		switch {
		case !ok:
			add(wire.EventInstanceJoin, &in)
		case old.Status != in.Status && in.Status == wire.InstanceDraining:
			add(wire.EventInstanceDrain, &in)
		case old.Status != in.Status && in.Status == wire.InstanceRetiring:
			add(wire.EventInstanceRetire, &in)
		case old.Status != in.Status:
			add(wire.EventInstanceUndrain, &in)
		case !old.Stale && in.Stale:
			add(wire.EventInstanceStale, &in)
		case old.Stale && !in.Stale:
			add(wire.EventInstanceUpdate, &in)
		}
	}
	return out
}

// roomChange is one room's route over a sync's window: before its first
// change (old) and after its last (cur); nil for none.
type roomChange struct{ old, cur *roomRecord }

// diffRooms lists the room events that lead from view a to view b: closes,
// then creates and updates, each in name order. changes are the routes
// that changed since a; left are the registrations current in a but not in
// b, whose unchanged routes a consumer saw and no longer does. A route is
// seen in a view when its registration is current in it.
func diffRooms(a, b fleetView, changes map[string]roomChange, left []*relayEntry) []wire.Event {
	var closes, opens []wire.Event
	add := func(l *[]wire.Event, typ, name string, rec *roomRecord) {
		rm := roomOf(name, rec)
		*l = append(*l, wire.Event{Type: typ, At: b.at, Room: &rm})
	}
	for _, name := range slices.Sorted(maps.Keys(changes)) {
		c := changes[name]
		was := c.old != nil && a.current[c.old.relay]
		is := c.cur != nil && b.current[c.cur.relay]
		switch {
		case was && !is:
			add(&closes, wire.EventRoomClose, name, c.old)
		case !was && is:
			add(&opens, wire.EventRoomCreate, name, c.cur)
		case was && is && roomOf(name, c.old) != roomOf(name, c.cur):
			add(&opens, wire.EventRoomUpdate, name, c.cur)
		}
	}
	var buf []*roomEntry
	for _, rel := range left {
		after := ""
		for {
			buf = rel.index.after(after, 256, buf[:0])
			if len(buf) == 0 {
				break
			}
			for _, e := range buf {
				if _, changed := changes[e.name]; changed {
					continue
				}
				if rec := e.live.Load(); rec != nil && rec.relay == rel {
					add(&closes, wire.EventRoomClose, e.name, rec)
				}
			}
			after = buf[len(buf)-1].name
		}
	}
	if len(left) > 0 {
		slices.SortFunc(closes, func(x, y wire.Event) int { return strings.Compare(x.Room.Name, y.Room.Name) })
	}
	return append(closes, opens...)
}

func statsEqual(a, b wire.Stats) bool {
	return a.Relays == b.Relays && a.Draining == b.Draining && a.Retiring == b.Retiring && a.Rooms == b.Rooms && a.Players == b.Players &&
		slices.Equal(a.Regions, b.Regions)
}
