package balancer

import (
	"strconv"

	"github.com/purrfly/purrfly/wire"
)

// admit decides whether an allocation of e may go on, before anything is
// asked of a relay. The exact replay of e's live route or of its pending
// allocation makes no new room, nor does one that will be room_name_taken
// (another id for a live room that is not vacant): those are always
// admitted. Anything else may make one, and is refused while the live heap is past the memory
// budget's share (balancer_full) or when source holds MaxRoomsPerSource
// rooms (too_many_rooms). An admitted allocation may hold a reservation of
// source's count: done gives it back, once the allocation has ended (a
// committed room counts on its own by then). The caller holds e's lease.
func (st *state) admit(e *roomEntry, allocationID, source string) (done func(), err error) {
	cur := e.live.Load()
	if cur != nil && st.reg.isCurrent(cur.relay) && (cur.allocationID == allocationID || !cur.vacant) ||
		e.pending != nil && e.pending.allocationID == allocationID {
		return func() {}, nil // a replay, or room_name_taken: no new room either way
	}
	if st.mem.full() {
		st.mem.refused.Add(1)
		return nil, wire.ErrBalancerFull
	}
	srcs := st.rooms.sources
	if srcs.max <= 0 || source == "" {
		return func() {}, nil
	}
	if !srcs.reserve(source) {
		return nil, wire.ErrTooManyRooms.WithMessage("this address holds " + strconv.Itoa(srcs.max) +
			" live rooms, the most one address may; retry once one has closed")
	}
	return func() { srcs.add(source, -1) }, nil
}
