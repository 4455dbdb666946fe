package core

import (
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/relay/internal/core/phase"
	"github.com/purrfly/purrfly/wire"
)

// room is one room incarnation. Its fields are guarded by mu except the
// static ones; no lock is held across I/O (enqueue is not I/O).
type Room struct {
	name        string // static
	incarnation string // static: opaque, new for every allocation (and reuse of the name)

	mu           lockrank.Mutex
	epoch        string                // guarded by mu; fixed for the incarnation
	revision     uint64                // guarded by mu; bumped on every count change and on removal
	hostSecret   string                // guarded by mu; the current host credential (rotated by claims)
	allocSecret  string                // static: the allocation's own host credential, what a replay answers
	clientSecret string                // guarded by mu
	allocationID string                // guarded by mu
	movedFrom    *wire.Incarnation     // static: the incarnation a handover replaced (handover.go), else nil
	core         *Core                 // static: the core that holds it (the clock; refused phase transitions)
	life         phase.Machine         // guarded by mu: the phase (package phase), changed only by the transitions of phase.go
	host         *Conn                 // guarded by mu; the host's socket: set while hosted, and a provisional host's in pending or expired
	clients      map[wire.ConnID]*Conn // guarded by mu; every connected non-host peer the host sees
	emptySince   time.Time             // guarded by mu; zero while count() > 0
	mig          migState              // guarded by mu; host migration (migration.go)
}

// countLocked is the room's connection count (host included, as PurrLay
// counts it).
func (r *Room) countLocked() int {
	n := len(r.clients) + len(r.mig.isolated)
	if r.host != nil {
		n++
	}
	return n
}

// changedLocked records a count change: a new revision, the empty-room
// clock, and a prompt publication.
func (r *Room) changedLocked(c *Core) {
	if !r.liveLocked() {
		return
	}
	r.revision++
	if r.countLocked() == 0 {
		r.emptySince = c.clock.Now()
	} else {
		r.emptySince = time.Time{}
	}
	c.notify.RoomChanged(r)
}

// publicationLocked is the room as the balancer sees it.
func (r *Room) publicationLocked() wire.Publication {
	return wire.Publication{
		Name:         r.name,
		Epoch:        r.epoch,
		Revision:     r.revision,
		Connections:  r.countLocked(),
		ClientSecret: r.clientSecret,
		AllocationID: r.allocationID,
		Vacant:       r.vacantLocked(),
		MovedFrom:    r.movedFrom,
	}
}

const numShards = 32

var shardSeed = maphash.MakeSeed()

// shardMap is a map split numShards ways by a hash of the key, each shard
// under its own lock, with a count of its entries: the relay's room table
// and its two connection tables. A compound change (an allocation that
// replaces a room) takes one shard's lock through shard and keeps n itself.
type shardMap[K comparable, V comparable] struct {
	hash   func(K) uint64 // static after init
	shards [numShards]struct {
		mu lockrank.RWMutex
		m  map[K]V // guarded by mu
	}
	n atomic.Int64 // entries in the map
}

func (t *shardMap[K, V]) init(hash func(K) uint64, class lockrank.Class) {
	t.hash = hash
	for i := range t.shards {
		t.shards[i].mu.Class = class
		t.shards[i].m = make(map[K]V)
	}
}

// shard is k's shard: its lock, and its map (read or change it only under
// that lock).
func (t *shardMap[K, V]) shard(k K) (*lockrank.RWMutex, map[K]V) {
	s := &t.shards[t.hash(k)%numShards]
	return &s.mu, s.m
}

func (t *shardMap[K, V]) get(k K) V {
	mu, m := t.shard(k)
	mu.RLock()
	v := m[k]
	mu.RUnlock()
	return v
}

// add puts v at k, which must not be in the map.
func (t *shardMap[K, V]) add(k K, v V) {
	mu, m := t.shard(k)
	mu.Lock()
	m[k] = v
	mu.Unlock()
	t.n.Add(1)
}

// remove drops k if v is still its entry, and reports whether it did.
func (t *shardMap[K, V]) remove(k K, v V) bool {
	mu, m := t.shard(k)
	mu.Lock()
	ok := m[k] == v
	if ok {
		delete(m, k)
	}
	mu.Unlock()
	if ok {
		t.n.Add(-1)
	}
	return ok
}

// all returns every entry (a snapshot).
func (t *shardMap[K, V]) all() []V {
	out := make([]V, 0, t.n.Load())
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		for _, v := range s.m {
			out = append(out, v)
		}
		s.mu.RUnlock()
	}
	return out
}

// roomTable maps names to live rooms, sharded so that allocations and
// logins of different rooms do not meet on one lock. It is not on the
// forwarding path: a connection keeps its *room.
type roomTable = shardMap[string, *Room]

func roomShard(name string) uint64 { return maphash.String(shardSeed, name) }

// connTable maps connection ids to connections, sharded by id. The core
// keeps two: every open connection (shutdown, consistency) and the pipe
// peers (pipe routing: that lookup is on the hot path).
type connTable = shardMap[wire.ConnID, *Conn]

func connShard(id wire.ConnID) uint64 { return uint64(uint32(id)) }
