package balancer

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// roomShards is the number of shards of the room table (a power of two).
const roomShards = 64

// roomRecord is one live room route. It is immutable: a change stores a new
// record in roomEntry.live, so readers (join, list) never take the lease.
type roomRecord struct {
	relay        *relayEntry // the registration that published it; the route is valid while it is current
	epoch        string
	revision     uint64
	connections  int
	clientSecret string
	allocationID string
	vacant       bool   // its host left (wire.Publication.Vacant): another allocation id may take it over at the relay
	source       string // the address whose allocation made this incarnation ("": none, not counted; sourceRooms)
}

// pendingAlloc remembers an allocation whose outcome the relay did not tell
// us (timeout, lost answer): the name stays pinned to that relay, so the
// exact retry reaches the relay that may already hold the room and replays.
type pendingAlloc struct {
	allocationID string
	endpoint     string
	since        time.Time
}

// roomEntry is everything the balancer knows about one room name.
type roomEntry struct {
	name string // static
	// table is the table that filed it, whose indexes, source counts and
	// event log setLive keeps in step with live (static; nil in tests that
	// make entries).
	table *roomTable

	// lease is the room's route lease (a one-slot channel, so waiting for it
	// honours a context). Every change below happens while holding it.
	lease chan struct{}

	// live is the current route, nil when the name is released or unknown.
	// Written under lease, read by anyone.
	live atomic.Pointer[roomRecord]

	// Guarded by lease:
	dead    bool // removed from the table; acquirers retry
	pending *pendingAlloc
}

// empty reports whether the entry holds nothing worth keeping (a released
// name's tombstones live in the state's tombstones, not here). Lease held.
func (e *roomEntry) empty() bool {
	return e.live.Load() == nil && e.pending == nil
}

// setLive replaces the live route and keeps in step what counts or lists
// routes: the per-relay aggregates (rooms, connections, phases) and room
// index, the table's room index, the per-source counts, and the event
// hub's log of changes (only while a stream is open). Lease held.
func (e *roomEntry) setLive(rec *roomRecord) {
	old := e.live.Swap(rec)
	if old != nil {
		old.relay.count(old, -1)
	}
	if rec != nil {
		rec.relay.count(rec, 1)
	}
	t := e.table
	if t == nil {
		return
	}
	switch {
	case old == nil && rec != nil:
		t.index.add(e)
		rec.relay.index.add(e)
	case old != nil && rec == nil:
		t.index.remove(e)
		old.relay.index.remove(e)
	case old != nil && old.relay != rec.relay:
		old.relay.index.remove(e)
		rec.relay.index.add(e)
	}
	if oldSrc, newSrc := sourceOf(old), sourceOf(rec); oldSrc != newSrc {
		t.sources.add(oldSrc, -1)
		t.sources.add(newSrc, 1)
	}
	t.changed.roomChanged(e.name, old, rec)
}

func sourceOf(rec *roomRecord) string {
	if rec == nil {
		return ""
	}
	return rec.source
}

// roomTable maps room names to entries, sharded so that lookups of
// different names rarely meet on a lock. Shard locks are held only for map
// operations, never across anything else.
type roomTable struct {
	seed   maphash.Seed
	shards [roomShards]roomShard
	// index lists the entries that hold a live route (of any registration,
	// current or not: readers skip the others), by name.
	index nameIndex
	// sources counts live rooms per source address (static pointer).
	sources *sourceRooms
	// changed is told of every change of a live route (roomEntry.setLive);
	// set once in New before any entry exists.
	changed *eventHub

	// pendings counts the entries with a pending allocation (setPending);
	// pendingDropped the outcomes not remembered because there were
	// maxPendingAllocations already.
	pendings       atomic.Int64
	pendingDropped atomic.Uint64
}

// setPending pins (p) or unpins (nil) e's pending allocation, keeping
// pendings in step. A new pin past maxPendingAllocations is not made
// (counted in pendingDropped). Lease held.
func (t *roomTable) setPending(e *roomEntry, p *pendingAlloc) {
	switch {
	case p == nil && e.pending != nil:
		t.pendings.Add(-1)
	case p != nil && e.pending == nil:
		if t.pendings.Add(1) > maxPendingAllocations {
			t.pendings.Add(-1)
			t.pendingDropped.Add(1)
			return
		}
	}
	e.pending = p
}

type roomShard struct {
	mu sync.Mutex
	m  map[string]*roomEntry // guarded by mu
}

func newRoomTable(sources *sourceRooms) *roomTable {
	t := &roomTable{seed: maphash.MakeSeed(), sources: sources}
	for i := range t.shards {
		t.shards[i].m = make(map[string]*roomEntry)
	}
	return t
}

func (t *roomTable) shard(name string) *roomShard {
	return &t.shards[maphash.String(t.seed, name)&(roomShards-1)]
}

// get returns the entry of name, or nil.
func (t *roomTable) get(name string) *roomEntry {
	sh := t.shard(name)
	sh.mu.Lock()
	e := sh.m[name]
	sh.mu.Unlock()
	return e
}

// acquire takes the lease of name's entry, creating the entry if needed.
// It gives up when ctx ends.
func (t *roomTable) acquire(ctx context.Context, name string) (*roomEntry, error) {
	for {
		sh := t.shard(name)
		sh.mu.Lock()
		e := sh.m[name]
		if e == nil {
			e = &roomEntry{name: name, lease: make(chan struct{}, 1), table: t}
			sh.m[name] = e
		}
		sh.mu.Unlock()
		// A free lease is taken without looking at ctx: a request's
		// context makes its Done channel on the first call, one
		// allocation per allocation for the common case of no wait.
		select {
		case e.lease <- struct{}{}:
		default:
			select {
			case e.lease <- struct{}{}:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if !e.dead {
			return e, nil
		}
		<-e.lease // it was dropped while we waited: look it up again
	}
}

// tryAcquire takes the lease of an existing entry without waiting.
func (t *roomTable) tryAcquire(e *roomEntry) bool {
	select {
	case e.lease <- struct{}{}:
		return t.leased(e)
	default:
		return false
	}
}

// acquireEntry takes the lease of an existing entry, waiting until ctx
// ends. It reports false when ctx ended or the entry left the table.
func (t *roomTable) acquireEntry(ctx context.Context, e *roomEntry) bool {
	select {
	case e.lease <- struct{}{}:
		return t.leased(e)
	case <-ctx.Done():
		return false
	}
}

// leased checks an entry whose lease was just taken: a dead one (dropped
// meanwhile) is given back at once.
func (t *roomTable) leased(e *roomEntry) bool {
	if e.dead {
		<-e.lease
		return false
	}
	return true
}

// release gives the lease back, dropping the entry first if it is empty.
func (t *roomTable) release(e *roomEntry) {
	if e.empty() {
		sh := t.shard(e.name)
		sh.mu.Lock()
		if sh.m[e.name] == e {
			delete(sh.m, e.name)
		}
		sh.mu.Unlock()
		e.dead = true
	}
	<-e.lease
}

// each calls fn for every entry (a snapshot of the table, shard by shard).
func (t *roomTable) each(fn func(*roomEntry)) {
	var buf []*roomEntry
	for i := range t.shards {
		sh := &t.shards[i]
		buf = buf[:0]
		sh.mu.Lock()
		for _, e := range sh.m {
			buf = append(buf, e)
		}
		sh.mu.Unlock()
		for _, e := range buf {
			fn(e)
		}
	}
}
