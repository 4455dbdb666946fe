package balancer

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// sourceRooms counts, per source address, the live rooms its allocations
// made (and those being made), for Options.MaxRoomsPerSource. An address
// is in the table only while it holds a room, so the table is never
// larger than the room table. Sharded; a shard's lock is held for one map
// operation.
//
// A room counts for the address whose allocation committed it, for as
// long as that incarnation is its live route (roomRecord.source, kept
// in step by roomTable.setLive); a route published by a relay without an
// allocation here (a republication after a restart) and a reservation of
// the admin API or a Go caller have no source and are not counted.
type sourceRooms struct {
	max  int          // static: rooms an address may hold; 0 = no cap
	seed maphash.Seed // static

	shards [sourceShards]sourceShard
	// sources counts the addresses in the table, atCap those holding max
	// rooms or more, refused the allocations refused for the cap.
	sources, atCap atomic.Int64
	refused        atomic.Uint64
}

const sourceShards = 16

type sourceShard struct {
	mu sync.Mutex
	m  map[string]int32 // guarded by mu: address -> rooms held and being made
}

func newSourceRooms(max int) *sourceRooms {
	s := &sourceRooms{max: max, seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = make(map[string]int32)
	}
	return s
}

func (s *sourceRooms) shard(src string) *sourceShard {
	return &s.shards[maphash.String(s.seed, src)&(sourceShards-1)]
}

// add counts d rooms more (or fewer) for src; "" is not counted.
func (s *sourceRooms) add(src string, d int32) {
	if src == "" || d == 0 {
		return
	}
	sh := s.shard(src)
	sh.mu.Lock()
	before := sh.m[src]
	after := before + d
	if after <= 0 {
		delete(sh.m, src)
	} else {
		sh.m[src] = after
	}
	sh.mu.Unlock()
	s.moved(before, after)
}

// reserve counts one room being made for src unless it holds max already
// (then false, counted in refused). With no cap or no source it always
// succeeds and counts nothing. The caller gives it back with add(src, -1)
// once the allocation ends (a committed room counts on its own by then).
func (s *sourceRooms) reserve(src string) bool {
	if s.max <= 0 || src == "" {
		return true
	}
	sh := s.shard(src)
	sh.mu.Lock()
	before := sh.m[src]
	if int(before) >= s.max {
		sh.mu.Unlock()
		s.refused.Add(1)
		return false
	}
	sh.m[src] = before + 1
	sh.mu.Unlock()
	s.moved(before, before+1)
	return true
}

// moved keeps sources and atCap in step with one address's count.
func (s *sourceRooms) moved(before, after int32) {
	switch {
	case before <= 0 && after > 0:
		s.sources.Add(1)
	case before > 0 && after <= 0:
		s.sources.Add(-1)
	}
	if s.max > 0 {
		was, is := int(before) >= s.max, int(after) >= s.max
		switch {
		case !was && is:
			s.atCap.Add(1)
		case was && !is:
			s.atCap.Add(-1)
		}
	}
}

// counts copies the table (ConsistencyCheck).
func (s *sourceRooms) counts() map[string]int32 {
	out := make(map[string]int32)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, v := range sh.m {
			out[k] = v
		}
		sh.mu.Unlock()
	}
	return out
}
