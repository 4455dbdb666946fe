package balancer

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
	"time"
)

// tombstones is the one table of released room incarnations (fences) and
// released room names (release marks), under one global bound (package
// doc: Tombstones). An entry is a 64-bit keyed hash of what it names and
// the time it was written; nothing else about a released room is kept, so
// a released name costs two entries, not a room entry.
//
// Entries leave in the order they were written: at TombstoneRetention, or
// earlier once max newer ones exist (the oldest goes first). The queue
// holds one slot per write, oldest first; an entry rewritten later has a
// newer slot, and its older slots are stale (their time is not the
// entry's) and leave without effect. Safe for concurrent use: one mutex,
// held for a map operation and a few queue steps, never across anything
// else; callers may hold room leases (the lock order is room lease, then
// this lock).
type tombstones struct {
	seed      maphash.Seed  // static: per process, so no one can aim at a collision
	max       int           // static: queue slots at most (Options.MaxTombstones)
	retention time.Duration // static: TombstoneRetention

	mu    sync.Mutex
	at    map[uint64]int64 // guarded by mu: entry key -> when written (Unix ns)
	queue tombQueue        // guarded by mu: (key, at) of every write, oldest first
	// evicted counts entries dropped before their retention because the
	// queue was full, and lastAge is the age of the last one (guarded by mu).
	evicted uint64
	lastAge time.Duration
	peak    int // guarded by mu: the most entries since the map was last rebuilt
}

func newTombstones(max int, retention time.Duration) *tombstones {
	return &tombstones{seed: maphash.MakeSeed(), max: max, retention: retention, at: make(map[uint64]int64)}
}

// Entry kinds, the first byte hashed.
const (
	tombFence   = 'f' // a released incarnation: (name, boot, epoch)
	tombRelease = 'r' // a released name
)

// key hashes kind and fields, each with its length, so that no two
// different lists of fields hash the same input.
func (t *tombstones) key(kind byte, fields ...string) uint64 {
	var h maphash.Hash
	h.SetSeed(t.seed)
	_ = h.WriteByte(kind)
	var n [4]byte
	for _, f := range fields {
		binary.LittleEndian.PutUint32(n[:], uint32(len(f)))
		_, _ = h.Write(n[:])
		_, _ = h.WriteString(f)
	}
	return h.Sum64()
}

// fence records that name's incarnation (boot, epoch) was released at now,
// and that name was.
func (t *tombstones) fence(name, boot, epoch string, now time.Time) {
	fk, rk := t.key(tombFence, name, boot, epoch), t.key(tombRelease, name)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(now)
	t.putLocked(fk, now)
	t.putLocked(rk, now)
}

// fenced reports whether name's incarnation (boot, epoch) was released
// less than the retention ago (and is still held).
func (t *tombstones) fenced(name, boot, epoch string, now time.Time) bool {
	return t.held(t.key(tombFence, name, boot, epoch), now)
}

// released reports whether name was released less than the retention ago
// (and that mark is still held).
func (t *tombstones) released(name string, now time.Time) bool {
	return t.held(t.key(tombRelease, name), now)
}

func (t *tombstones) held(k uint64, now time.Time) bool {
	t.mu.Lock()
	at, ok := t.at[k]
	t.mu.Unlock()
	return ok && now.UnixNano()-at < int64(t.retention)
}

// putLocked writes entry k at now. A rewrite that is not newer changes
// nothing (the entry already lasts as long); a full queue first lets its
// oldest slot go.
func (t *tombstones) putLocked(k uint64, now time.Time) {
	ns := now.UnixNano()
	old, ok := t.at[k]
	if ok && ns <= old {
		return
	}
	for t.queue.n >= t.max {
		t.popLocked(now, true)
	}
	t.at[k] = ns
	t.queue.push(tombSlot{key: k, at: ns})
	t.peak = max(t.peak, len(t.at))
}

// popLocked drops the oldest slot and, unless it is stale, its entry;
// early says the queue is full (an entry within its retention is counted
// as evicted).
func (t *tombstones) popLocked(now time.Time, early bool) {
	s := t.queue.front()
	t.queue.pop()
	if t.at[s.key] != s.at {
		return // stale: the entry was rewritten later (or is gone)
	}
	delete(t.at, s.key)
	if age := time.Duration(now.UnixNano() - s.at); early && age < t.retention {
		t.evicted++
		t.lastAge = age
	}
}

// expireLocked drops the slots at the front that are stale or past the
// retention.
func (t *tombstones) expireLocked(now time.Time) {
	for t.queue.n > 0 {
		s := t.queue.front()
		if at, ok := t.at[s.key]; ok && at == s.at && now.UnixNano()-s.at < int64(t.retention) {
			return
		}
		t.popLocked(now, false)
	}
}

// expire drops what is past the retention and, once the table holds a
// quarter of its peak or less, rebuilds its map (Go maps never give memory
// back). The cleanup tick calls it.
func (t *tombstones) expire(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(now)
	if t.peak >= minTombRebuild && len(t.at) <= t.peak/4 {
		m := make(map[uint64]int64, len(t.at))
		for k, v := range t.at {
			m[k] = v
		}
		t.at, t.peak = m, len(m)
	}
}

// minTombRebuild is the peak below which expire never rebuilds the map.
const minTombRebuild = 4096

// tombStats is what the table holds against its bound.
type tombStats struct {
	entries, slots, max int
	evicted             uint64
	// horizon is how far back every release is still held: the retention
	// while the queue has room, else the age of its oldest slot (which the
	// next write pushes out).
	horizon time.Duration
}

func (t *tombstones) stats(now time.Time) tombStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := tombStats{entries: len(t.at), slots: t.queue.n, max: t.max, evicted: t.evicted, horizon: t.retention}
	if t.queue.n >= t.max {
		s.horizon = min(t.retention, time.Duration(now.UnixNano()-t.queue.front().at))
	}
	return s
}

// tombSlot is one write of an entry.
type tombSlot struct {
	key uint64
	at  int64
}

// tombChunk is the slots of one queue chunk (16 KiB).
const tombChunk = 1024

// tombQueue is a FIFO of slots in chunks, so that it holds memory in
// proportion to its slots and never copies them.
type tombQueue struct {
	chunks [][]tombSlot // each of capacity tombChunk; the oldest slot is chunks[0][head]
	head   int
	n      int
}

func (q *tombQueue) push(s tombSlot) {
	if len(q.chunks) == 0 || len(q.chunks[len(q.chunks)-1]) == tombChunk {
		q.chunks = append(q.chunks, make([]tombSlot, 0, tombChunk))
	}
	last := &q.chunks[len(q.chunks)-1]
	*last = append(*last, s)
	q.n++
}

// front is the oldest slot; the queue must not be empty.
func (q *tombQueue) front() tombSlot { return q.chunks[0][q.head] }

// pop drops the oldest slot; the queue must not be empty.
func (q *tombQueue) pop() {
	q.head++
	q.n--
	if q.head < len(q.chunks[0]) {
		return
	}
	q.head = 0
	if len(q.chunks) == 1 {
		q.chunks[0] = q.chunks[0][:0] // the only chunk: refill it
		return
	}
	q.chunks[0] = nil
	q.chunks = q.chunks[1:]
}

// check verifies the table (ConsistencyCheck): at most max slots, every
// entry with exactly one slot of its time, the slots in the order written.
func (t *tombstones) check(bad func(string, ...any)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.queue.n > t.max {
		bad("the tombstone queue holds %d slots, over the bound of %d", t.queue.n, t.max)
	}
	if len(t.at) > t.queue.n {
		bad("%d tombstones but %d queue slots", len(t.at), t.queue.n)
	}
	n, current := 0, 0
	for i, c := range t.queue.chunks {
		start := 0
		if i == 0 {
			start = t.queue.head
		}
		for _, s := range c[start:] {
			n++
			if t.at[s.key] == s.at {
				current++
			}
		}
	}
	if n != t.queue.n {
		bad("the tombstone queue counts %d slots and holds %d", t.queue.n, n)
	}
	if current != len(t.at) {
		bad("%d tombstones, %d of them with their slot in the queue", len(t.at), current)
	}
}
