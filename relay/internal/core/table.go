package core

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/wire"
)

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
