package balancer

import (
	"sort"
	"strings"
	"sync"
)

// nameIndex is a set of room entries ordered by name, for the room lists:
// a page is a seek and a walk of what it answers, and a position (GET
// /list's page) is found by counting chunk lengths, not rooms. It is a
// sorted list cut into chunks of at most idxChunkMax entries (a B+-tree
// of two levels): an insert or removal moves at most one chunk's entries,
// and it holds about 8 bytes an entry plus a chunk's slack.
//
// Safe for concurrent use: its lock is held for one insert, removal or
// copy of a page, never across anything else. Entries are added and
// removed under their room's lease (roomTable.setLive); the lock order is
// room lease, then this lock.
type nameIndex struct {
	mu     sync.RWMutex
	chunks [][]*roomEntry // guarded by mu: each sorted and non-empty, in order
	n      int            // guarded by mu: entries in all
}

// Chunk sizes: a full chunk splits in two; one that falls under
// idxChunkMin merges with its neighbour when both fit in half a chunk.
const (
	idxChunkMax = 512
	idxChunkMin = idxChunkMax / 8
)

// chunkOf is the index of the chunk where name is or would go: the last
// chunk whose first name is at most name (the first chunk if none is).
func (x *nameIndex) chunkOf(name string) int {
	i := sort.Search(len(x.chunks), func(i int) bool { return x.chunks[i][0].name > name })
	return max(i-1, 0)
}

// posIn is the position of name in chunk c (where it is or would go).
func posIn(c []*roomEntry, name string) int {
	return sort.Search(len(c), func(i int) bool { return c[i].name >= name })
}

// add inserts e (its name must not be in the index). A full chunk is
// first split into two fresh halves, so no chunk outgrows idxChunkMax.
func (x *nameIndex) add(e *roomEntry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.n++
	if len(x.chunks) == 0 {
		x.chunks = append(x.chunks, []*roomEntry{e})
		return
	}
	ci := x.chunkOf(e.name)
	if c := x.chunks[ci]; len(c) == idxChunkMax {
		left, right := make([]*roomEntry, idxChunkMax/2, idxChunkMax), make([]*roomEntry, idxChunkMax/2, idxChunkMax)
		copy(left, c)
		copy(right, c[idxChunkMax/2:])
		x.chunks[ci] = left
		x.chunks = append(x.chunks, nil)
		copy(x.chunks[ci+2:], x.chunks[ci+1:])
		x.chunks[ci+1] = right
		if e.name > right[0].name {
			ci++
		}
	}
	c := x.chunks[ci]
	p := posIn(c, e.name)
	c = append(c, nil)
	copy(c[p+1:], c[p:])
	c[p] = e
	x.chunks[ci] = c
}

// remove takes e out (nothing happens when it is not in).
func (x *nameIndex) remove(e *roomEntry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.chunks) == 0 {
		return
	}
	ci := x.chunkOf(e.name)
	c := x.chunks[ci]
	p := posIn(c, e.name)
	if p == len(c) || c[p] != e {
		return
	}
	x.n--
	copy(c[p:], c[p+1:])
	c[len(c)-1] = nil
	c = c[:len(c)-1]
	x.chunks[ci] = c
	switch {
	case len(c) == 0:
		x.dropChunk(ci)
	case len(c) < idxChunkMin && ci+1 < len(x.chunks) && len(c)+len(x.chunks[ci+1]) <= idxChunkMax/2:
		x.chunks[ci] = append(c, x.chunks[ci+1]...)
		x.dropChunk(ci + 1)
	case len(c) < idxChunkMin && ci > 0 && len(c)+len(x.chunks[ci-1]) <= idxChunkMax/2:
		x.chunks[ci-1] = append(x.chunks[ci-1], c...)
		x.dropChunk(ci)
	}
}

func (x *nameIndex) dropChunk(ci int) {
	copy(x.chunks[ci:], x.chunks[ci+1:])
	x.chunks[len(x.chunks)-1] = nil
	x.chunks = x.chunks[:len(x.chunks)-1]
}

// len is how many entries the index holds.
func (x *nameIndex) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.n
}

// after appends to buf the entries whose names follow after (all of them
// from the first when after is ""), at most n, in order.
func (x *nameIndex) after(after string, n int, buf []*roomEntry) []*roomEntry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if len(x.chunks) == 0 || n <= 0 {
		return buf
	}
	ci, p := 0, 0
	if after != "" {
		ci = x.chunkOf(after)
		c := x.chunks[ci]
		p = posIn(c, after)
		if p < len(c) && c[p].name == after {
			p++
		}
	}
	for ; ci < len(x.chunks) && n > 0; ci, p = ci+1, 0 {
		c := x.chunks[ci][p:]
		c = c[:min(len(c), n)]
		buf = append(buf, c...)
		n -= len(c)
	}
	return buf
}

// at appends to buf the entries from position pos (0 is the first), at
// most n, in order.
func (x *nameIndex) at(pos, n int, buf []*roomEntry) []*roomEntry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	ci := 0
	for ci < len(x.chunks) && pos >= len(x.chunks[ci]) {
		pos -= len(x.chunks[ci])
		ci++
	}
	for p := pos; ci < len(x.chunks) && n > 0; ci, p = ci+1, 0 {
		c := x.chunks[ci][p:]
		c = c[:min(len(c), n)]
		buf = append(buf, c...)
		n -= len(c)
	}
	return buf
}

// check verifies the index (ConsistencyCheck): chunks non-empty, within
// bounds, names strictly ascending across chunks, and n their sum. It
// calls each for every entry, in order.
func (x *nameIndex) check(what string, bad func(string, ...any), each func(*roomEntry)) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n, last := 0, ""
	for i, c := range x.chunks {
		if len(c) == 0 || len(c) > idxChunkMax {
			bad("%s: chunk %d holds %d entries", what, i, len(c))
		}
		for _, e := range c {
			if n > 0 && strings.Compare(e.name, last) <= 0 {
				bad("%s: %q follows %q", what, e.name, last)
			}
			last = e.name
			n++
			each(e)
		}
	}
	if n != x.n {
		bad("%s counts %d entries and holds %d", what, x.n, n)
	}
}
