package balancer

import (
	"slices"
	"strings"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// The views the API reads: snapshots of the registry and the room table,
// taken without any lease (package doc: Leases and gates). A route counts
// only while its registration is current.

func (st *state) instanceOf(sn relaySnap, now time.Time) wire.Instance {
	i := sn.entry.info
	in := wire.Instance{
		BootID:        i.BootID,
		MachineID:     i.MachineID,
		Region:        i.Region,
		Endpoint:      i.Endpoint,
		Host:          i.Host,
		Status:        sn.status(),
		Stale:         now.Sub(sn.lastHeartbeat) > staleAfter(st.opts.RelayExpiry, sn.expiry) || sn.failures > 0,
		Rooms:         sn.entry.rooms.Load(),
		Connections:   sn.entry.conns.Load(),
		LastHeartbeat: sn.lastHeartbeat.UTC().Format(time.RFC3339Nano),
		Image:         i.ImageRef,
		Labels:        i.Labels,
		Capacity:      i.Capacity,
	}
	if sn.retiring && !sn.retireBy.IsZero() {
		in.RetireBy = sn.retireBy.UTC().Format(time.RFC3339)
	}
	return in
}

// status is the relay's status as the admin API tells it: retiring, then
// draining, then starting (not yet reachable), else live.
func (sn relaySnap) status() string {
	switch {
	case sn.retiring:
		return wire.InstanceRetiring
	case sn.draining:
		return wire.InstanceDraining
	case sn.unreachable:
		return wire.InstanceStarting
	}
	return wire.InstanceLive
}

// instances lists the registered relays, ordered by endpoint.
func (st *state) instances() []wire.Instance {
	snaps := st.reg.snapshot()
	now := st.clock.Now()
	out := make([]wire.Instance, 0, len(snaps))
	for _, sn := range snaps {
		out = append(out, st.instanceOf(sn, now))
	}
	return out
}

// stats sums the registered relays by region (ordered by region, compared
// case-insensitively as placement does, named as the first relay spells it).
func stats(snaps []relaySnap) wire.Stats {
	sum := wire.Stats{Regions: []wire.RegionStats{}}
	byRegion := make(map[string]int, 8) // lower-case region -> index in sum.Regions
	for _, sn := range snaps {
		i := sn.entry.info
		k := strings.ToLower(i.Region)
		idx, ok := byRegion[k]
		if !ok {
			idx = len(sum.Regions)
			byRegion[k] = idx
			sum.Regions = append(sum.Regions, wire.RegionStats{Region: i.Region})
		}
		rs := &sum.Regions[idx]
		rooms, conns := sn.entry.rooms.Load(), sn.entry.conns.Load()
		rs.Relays++
		rs.Rooms += rooms
		rs.Players += conns
		sum.Relays++
		sum.Rooms += rooms
		sum.Players += conns
		switch {
		case sn.retiring:
			rs.Retiring++
			sum.Retiring++
		case sn.draining:
			rs.Draining++
			sum.Draining++
		}
	}
	slices.SortFunc(sum.Regions, func(a, b wire.RegionStats) int {
		return strings.Compare(strings.ToLower(a.Region), strings.ToLower(b.Region))
	})
	return sum
}

// minBootPrefix is the shortest boot ID prefix a rooms filter matches:
// the dashboard and purrctl fleet show 12 characters of a boot ID, and an
// operator pastes what they see.
const minBootPrefix = 8

// isInstance reports whether id names the relay i: its boot ID, its
// machine ID, or a prefix of its boot ID of at least minBootPrefix
// characters (which may name several relays: a filter then shows all).
func isInstance(i *wire.RelayInfo, id string) bool {
	return i.BootID == id || i.MachineID != "" && i.MachineID == id ||
		len(id) >= minBootPrefix && strings.HasPrefix(i.BootID, id)
}

// fleetView takes the relays' current state (the event hub's view).
func (st *state) fleetView() fleetView {
	now := st.clock.Now()
	snaps := st.reg.snapshot()
	v := fleetView{at: now.UTC().Format(time.RFC3339Nano), instances: make(map[string]wire.Instance, len(snaps)),
		current: make(map[*relayEntry]bool, len(snaps)), stats: stats(snaps)}
	for _, sn := range snaps {
		in := st.instanceOf(sn, now)
		in.LastHeartbeat = ""
		v.instances[in.BootID] = in
		v.current[sn.entry] = true
	}
	return v
}

// servers is GET /servers' list: one entry per public endpoint and region
// (the machines of a multi-machine relay app share a public endpoint, and
// a client pings the app, whose proxy picks a machine); a draining relay
// is left out when its region has a relay that is not draining.
func (st *state) servers() []wire.ServerInfo {
	snaps := st.reg.snapshot()
	out := make([]wire.ServerInfo, 0, len(snaps))
	type key struct{ endpoint, region string }
	seen := make(map[key]bool, len(snaps))
	served := make(map[string]bool, len(snaps)) // lower-case regions with a relay that takes rooms
	for _, sn := range snaps {
		if sn.status() == wire.InstanceLive {
			served[strings.ToLower(sn.entry.info.Region)] = true
		}
	}
	for _, sn := range snaps {
		i := sn.entry.info
		k := key{publicEndpoint(i), strings.ToLower(i.Region)}
		if seen[k] || (sn.status() != wire.InstanceLive && served[k.region]) {
			continue
		}
		seen[k] = true
		out = append(out, wire.ServerInfo{
			APIEndpoint:    k.endpoint,
			Host:           i.Host,
			RestPort:       sn.entry.restPort,
			UDPPort:        i.UDPPort,
			UDPPortV2:      i.UDPPortV2,
			WebSocketsPort: i.Port,
			Region:         i.Region,
		})
	}
	return out
}

// totals are the registered relays and the rooms and connections of
// their live routes.
func (st *state) totals() (relays int, rooms, conns int64) {
	snaps := st.reg.snapshot()
	for _, sn := range snaps {
		rooms += sn.entry.rooms.Load()
		conns += sn.entry.conns.Load()
	}
	return len(snaps), rooms, conns
}

// stats is the fleet's sums by region (stats of the current snapshot).
func (st *state) stats() wire.Stats { return stats(st.reg.snapshot()) }
