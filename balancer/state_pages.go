package balancer

import (
	"container/heap"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/purrfly/purrfly/wire"
)

// The room lists (GET /v1/rooms, /v1/instances/{id}/rooms, /list) read
// pages from the name indexes (nameIndex): the table's, of every live
// route, for an unfiltered list, and each relay's own, merged, for a list
// filtered by relay (region, instance, labels). A page walks what it
// answers and not the fleet; its total is the sum of the matching relays'
// aggregates. Routes of registrations that are no longer current stay in
// the indexes until the cleanup tick drops them and are skipped, as are
// rooms of another phase; a page gives up after pageSkipBudget such rooms
// and answers what it has, with next set where it stopped.

// pageBlock is how many entries a page takes from an index at a time.
const pageBlock = 128

// pageSkipBudget is how many rooms a page may pass over (of another
// phase, or of a relay no longer registered) for a page of limit rooms.
func pageSkipBudget(limit int) int { return max(10*limit, 10000) }

// roomPage is one page of a room list.
type roomPage struct {
	names []string
	recs  []*roomRecord
	total int64  // rooms of the list in all
	next  string // after= of the next page; "" when this one is the last
}

// roomPage reads one page of q: at most q.limit live routes of current
// registrations matching q, after q.after, in name order.
func (st *state) roomPage(q roomQuery) roomPage {
	snaps := st.reg.snapshot()
	match := make(map[*relayEntry]bool, len(snaps))
	var rels []*relayEntry
	var page roomPage
	for _, sn := range snaps {
		i := &sn.entry.info
		switch {
		case q.region != "" && !strings.EqualFold(i.Region, q.region),
			q.instance != "" && !isInstance(i, q.instance),
			q.boot != "" && i.BootID != q.boot,
			!wire.HasLabels(i.Labels, q.labels):
			continue
		}
		match[sn.entry] = true
		rels = append(rels, sn.entry)
		page.total += sn.entry.phaseRooms(q.phase)
	}
	var src roomSource = &indexSource{x: &st.rooms.index, after: q.after}
	if q.region != "" || q.instance != "" || q.boot != "" || len(q.labels) > 0 {
		src = newMergeSource(rels, q.after)
	}
	budget := pageSkipBudget(q.limit)
	last := ""
	for skipped := 0; ; {
		e := src.next()
		if e == nil {
			return page
		}
		if e.name == last {
			continue // moved between two merged relays during the walk: seen once
		}
		last = e.name
		rec := e.live.Load()
		if rec == nil || !match[rec.relay] || q.phase != "" && phaseOf(rec) != q.phase {
			if skipped++; skipped >= budget {
				page.next = e.name
				return page
			}
			continue
		}
		if len(page.names) == q.limit {
			page.next = page.names[len(page.names)-1]
			return page
		}
		page.names = append(page.names, e.name)
		page.recs = append(page.recs, rec)
	}
}

// rooms is the page in the admin API's shape.
func (p roomPage) rooms() []wire.Room {
	out := make([]wire.Room, len(p.names))
	for i, n := range p.names {
		out[i] = roomOf(n, p.recs[i])
	}
	return out
}

// etag is the page's weak ETag: a hash of what its body says (each room's
// fields, the total and next), computed without encoding the body.
func (p roomPage) etag() string {
	d := xxhash.New()
	var num []byte
	field := func(s string) {
		num = strconv.AppendInt(num[:0], int64(len(s)), 10)
		_, _ = d.Write(num)
		_, _ = d.WriteString(":")
		_, _ = d.WriteString(s)
	}
	field(strconv.FormatInt(p.total, 10))
	field(p.next)
	for i, n := range p.names {
		rm := roomOf(n, p.recs[i])
		field(rm.Name)
		field(rm.Region)
		field(rm.BootID)
		field(rm.MachineID)
		field(rm.Host)
		field(rm.Epoch)
		field(rm.Phase)
		field(strconv.Itoa(rm.Connections))
	}
	return `W/"` + strconv.FormatUint(d.Sum64(), 16) + `"`
}

// listPage is GET /list's page (counted from 0, wire.ListPageSize rooms
// each, by position in name order) and the total of live rooms. A
// position counts routes of relays removed since the last cleanup tick,
// whose rooms the page then leaves out.
func (st *state) listPage(page int) ([]wire.RoomSummary, int) {
	snaps := st.reg.snapshot()
	current := make(map[*relayEntry]bool, len(snaps))
	total := 0
	for _, sn := range snaps {
		current[sn.entry] = true
		total += int(sn.entry.rooms.Load())
	}
	out := []wire.RoomSummary{}
	if page > st.rooms.index.len()/wire.ListPageSize {
		return out, total
	}
	for _, e := range st.rooms.index.at(page*wire.ListPageSize, wire.ListPageSize, nil) {
		if rec := e.live.Load(); rec != nil && current[rec.relay] {
			out = append(out, wire.RoomSummary{Name: e.name, Region: rec.relay.info.Region, ConnectedPlayers: rec.connections})
		}
	}
	return out, total
}

// roomSource yields room entries in name order; nil when there are no
// more.
type roomSource interface{ next() *roomEntry }

// indexSource walks one index from after, a block at a time.
type indexSource struct {
	x     *nameIndex
	after string
	buf   []*roomEntry
	pos   int
	done  bool
}

func (s *indexSource) next() *roomEntry {
	if s.pos == len(s.buf) {
		if s.done {
			return nil
		}
		s.buf, s.pos = s.x.after(s.after, pageBlock, s.buf[:0]), 0
		if len(s.buf) < pageBlock {
			s.done = true
		}
		if len(s.buf) == 0 {
			return nil
		}
		s.after = s.buf[len(s.buf)-1].name
	}
	e := s.buf[s.pos]
	s.pos++
	return e
}

// mergeHead is one merged index and its next entry.
type mergeHead struct {
	src *indexSource
	e   *roomEntry
}

// newMergeSource merges the indexes of rels from after, in name order.
func newMergeSource(rels []*relayEntry, after string) *mergeHeap {
	h := &mergeHeap{}
	for _, r := range rels {
		s := &indexSource{x: &r.index, after: after}
		if e := s.next(); e != nil {
			h.items = append(h.items, mergeHead{s, e})
		}
	}
	heap.Init(h)
	return h
}

// mergeHeap is a min-heap of the sources' next entries.
type mergeHeap struct{ items []mergeHead }

func (h *mergeHeap) Len() int           { return len(h.items) }
func (h *mergeHeap) Less(i, j int) bool { return h.items[i].e.name < h.items[j].e.name }
func (h *mergeHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *mergeHeap) Push(x any)         { h.items = append(h.items, x.(mergeHead)) }
func (h *mergeHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

func (h *mergeHeap) next() *roomEntry {
	if len(h.items) == 0 {
		return nil
	}
	top := &h.items[0]
	e := top.e
	if n := top.src.next(); n != nil {
		top.e = n
		heap.Fix(h, 0)
	} else {
		heap.Pop(h)
	}
	return e
}
