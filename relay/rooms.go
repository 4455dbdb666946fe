package relay

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// room is one room incarnation. Its fields are guarded by mu except the
// static ones; no lock is held across I/O (enqueue is not I/O).
type room struct {
	name        string // static
	incarnation string // static: opaque, new for every allocation (and reuse of the name)

	mu           sync.Mutex
	epoch        string                // guarded by mu; fixed for the incarnation
	revision     uint64                // guarded by mu; bumped on every count change and on removal
	hostSecret   string                // guarded by mu; the current host credential (rotated by claims)
	allocSecret  string                // static: the allocation's own host credential, what a replay answers
	clientSecret string                // guarded by mu
	allocationID string                // guarded by mu
	movedFrom    *wire.Incarnation     // static: the incarnation a handover replaced (handover.go), else nil
	phase        phase                 // guarded by mu; changed only by the transitions of phase.go
	host         *conn                 // guarded by mu; the host's socket: set while hosted, and a provisional host's in pending or expired
	clients      map[wire.ConnID]*conn // guarded by mu; every connected non-host peer the host sees
	emptySince   time.Time             // guarded by mu; zero while count() > 0
	mig          migState              // guarded by mu; host migration (migration.go)
}

// countLocked is the room's connection count (host included, as PurrLay
// counts it).
func (r *room) countLocked() int {
	n := len(r.clients) + len(r.mig.isolated)
	if r.host != nil {
		n++
	}
	return n
}

// changedLocked records a count change: a new revision, the empty-room
// clock, and a prompt publication.
func (r *room) changedLocked(c *core) {
	if !r.liveLocked() {
		return
	}
	r.revision++
	if r.countLocked() == 0 {
		r.emptySince = c.clock.Now()
	} else {
		r.emptySince = time.Time{}
	}
	c.notify.roomChanged(r)
}

// removeLocked ends the incarnation and returns its outbox entry. The
// caller then drops it from the table (core.dropRoom) after unlocking.
func (r *room) removeLocked() wire.Removal {
	r.phase = phaseRemoved
	r.revision++
	return wire.Removal{Name: r.name, Epoch: r.epoch, Revision: r.revision}
}

// publicationLocked is the room as the balancer sees it.
func (r *room) publicationLocked() wire.Publication {
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

// roomTable maps names to live rooms, sharded so that allocations and
// logins of different rooms do not meet on one lock. It is not on the
// forwarding path: a connection keeps its *room.
type roomTable struct {
	shards [numShards]struct {
		mu sync.Mutex
		m  map[string]*room // guarded by mu
	}
	n atomic.Int64 // rooms in the table
}

func (t *roomTable) shard(name string) (*sync.Mutex, map[string]*room) {
	s := &t.shards[maphash.String(shardSeed, name)%numShards]
	return &s.mu, s.m
}

func (t *roomTable) init() {
	for i := range t.shards {
		t.shards[i].m = make(map[string]*room)
	}
}

func (t *roomTable) get(name string) *room {
	mu, m := t.shard(name)
	mu.Lock()
	defer mu.Unlock()
	return m[name]
}

// delete drops r from the table if it is still the entry for its name.
func (t *roomTable) delete(r *room) {
	mu, m := t.shard(r.name)
	mu.Lock()
	if m[r.name] == r {
		delete(m, r.name)
		t.n.Add(-1)
	}
	mu.Unlock()
}

// all returns every room in the table (a snapshot).
func (t *roomTable) all() []*room {
	out := make([]*room, 0, t.n.Load())
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for _, r := range s.m {
			out = append(out, r)
		}
		s.mu.Unlock()
	}
	return out
}

// connTable maps connection ids to connections, sharded by id. The core
// keeps two: every open connection (shutdown, consistency) and the pipe
// peers (pipe routing: that lookup is on the hot path).
type connTable struct {
	shards [numShards]struct {
		mu sync.RWMutex
		m  map[wire.ConnID]*conn // guarded by mu
	}
	n atomic.Int64
}

func (t *connTable) init() {
	for i := range t.shards {
		t.shards[i].m = make(map[wire.ConnID]*conn)
	}
}

func (t *connTable) add(c *conn) {
	s := &t.shards[uint32(c.id)%numShards]
	s.mu.Lock()
	s.m[c.id] = c
	s.mu.Unlock()
	t.n.Add(1)
}

func (t *connTable) remove(c *conn) bool {
	s := &t.shards[uint32(c.id)%numShards]
	s.mu.Lock()
	ok := s.m[c.id] == c
	if ok {
		delete(s.m, c.id)
	}
	s.mu.Unlock()
	if ok {
		t.n.Add(-1)
	}
	return ok
}

func (t *connTable) get(id wire.ConnID) *conn {
	s := &t.shards[uint32(id)%numShards]
	s.mu.RLock()
	c := s.m[id]
	s.mu.RUnlock()
	return c
}

func (t *connTable) all() []*conn {
	out := make([]*conn, 0, t.n.Load())
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		for _, c := range s.m {
			out = append(out, c)
		}
		s.mu.RUnlock()
	}
	return out
}
