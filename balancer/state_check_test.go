package balancer

import (
	"strings"
	"testing"
)

// TestConsistencyCheckFindsBrokenInvariants: the check that runs after
// every balancer test passes on a balancer the rules built, and names
// each broken invariant when the data is corrupted behind the rules'
// back (so the check after every test can fail).
func TestConsistencyCheckFindsBrokenInvariants(t *testing.T) {
	// Each corrupt breaks one invariant and returns what puts it back
	// (so the check after the test passes).
	for _, tc := range []struct {
		name    string
		corrupt func(st *state, rel *relayEntry, e *roomEntry) (restore func())
		want    string
	}{
		{"a room counted twice", func(st *state, rel *relayEntry, e *roomEntry) func() {
			rel.rooms.Add(1)
			return func() { rel.rooms.Add(-1) }
		}, "counts 2 rooms, its live routes are 1"},
		{"connections not counted", func(st *state, rel *relayEntry, e *roomEntry) func() {
			rel.conns.Add(-3)
			return func() { rel.conns.Add(3) }
		}, "counts 0 connections, its live routes hold 3"},
		{"a live incarnation tombstoned", func(st *state, rel *relayEntry, e *roomEntry) func() {
			epoch := e.live.Load().epoch
			st.tombs.fence(e.name, rel.info.BootID, epoch, st.clock.Now())
			return func() {
				t := st.tombs
				t.mu.Lock()
				delete(t.at, t.key(tombFence, e.name, rel.info.BootID, epoch))
				delete(t.at, t.key(tombRelease, e.name))
				t.mu.Unlock()
			}
		}, "its live incarnation e1 is tombstoned"},
		{"a boot filed twice", func(st *state, rel *relayEntry, e *roomEntry) func() {
			st.reg.byBoot["other"] = rel
			return func() { delete(st.reg.byBoot, "other") }
		}, "2 registrations by boot, 1 by endpoint"},
		{"more relays than the bound", func(st *state, rel *relayEntry, e *roomEntry) func() {
			max := st.reg.max
			st.reg.max = 1
			st.reg.byEndpoint["http://one-too-many"] = rel
			return func() { delete(st.reg.byEndpoint, "http://one-too-many"); st.reg.max = max }
		}, "2 relays registered, over the bound of 1"},
		{"an admin mark lost", func(st *state, rel *relayEntry, e *roomEntry) func() {
			rel.adminDraining = true
			return func() { rel.adminDraining = false }
		}, "admin draining true"},
		{"more tombstones than their bound", func(st *state, rel *relayEntry, e *roomEntry) func() {
			max := st.tombs.max
			st.tombs.fence("gone", "b", "e", st.clock.Now()) // two slots
			st.tombs.max = 1
			return func() { st.tombs.max = max }
		}, "over the bound of 1"},
		{"a pending allocation not counted", func(st *state, rel *relayEntry, e *roomEntry) func() {
			st.rooms.pendings.Add(1)
			return func() { st.rooms.pendings.Add(-1) }
		}, "1 pending allocations counted, 0 held"},
		{"a room missing from the room index", func(st *state, rel *relayEntry, e *roomEntry) func() {
			st.rooms.index.remove(e)
			return func() { st.rooms.index.add(e) }
		}, "the room index lists 0 entries, 1 hold a live route"},
		{"a room missing from its relay's index", func(st *state, rel *relayEntry, e *roomEntry) func() {
			rel.index.remove(e)
			return func() { rel.index.add(e) }
		}, "room index lists 0 rooms, its live routes are 1"},
		{"a waiting room counted", func(st *state, rel *relayEntry, e *roomEntry) func() {
			rel.waiting.Add(1)
			return func() { rel.waiting.Add(-1) }
		}, "counts 1 waiting and 0 vacant rooms"},
		{"a source counted without a room", func(st *state, rel *relayEntry, e *roomEntry) func() {
			st.rooms.sources.add("192.0.2.1", 1)
			return func() { st.rooms.sources.add("192.0.2.1", -1) }
		}, "rooms counted per source"},
		{"a current boot retired", func(st *state, rel *relayEntry, e *roomEntry) func() {
			st.reg.retired[rel.info.Endpoint] = []string{rel.info.BootID}
			return func() { delete(st.reg.retired, rel.info.Endpoint) }
		}, "is also retired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			r := newFakeRelay(t, "eu")
			r.register(h)
			wantStatuses(t, r.publish(h, pub("room", "e1", 1, 3)), "applied")
			if err := h.s.ConsistencyCheck(); err != nil {
				t.Fatalf("a balancer built by its rules: %v", err)
			}
			st := h.s.st
			rel := st.reg.current(r.info.Endpoint)
			e := st.rooms.get("room")
			st.reg.mu.Lock() // the room's lease is free: the test is the only writer
			restore := tc.corrupt(st, rel, e)
			st.reg.mu.Unlock()
			err := h.s.ConsistencyCheck()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("check after corrupting: %v, want it to say %q", err, tc.want)
			}
			st.reg.mu.Lock()
			restore()
			st.reg.mu.Unlock()
		})
	}
}
