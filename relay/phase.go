package relay

// phase is where a room incarnation is in its life. It is the one answer
// to "who hosts this room and what may happen to it next": every check
// and every change of it goes through the names below, each with the
// phases it starts from, so that a new phase (host migration's) is added
// in one place.
//
//	           host connects              host leaves (clients stay)
//	awaiting ───────────────▶ hosted ──────────────────────────▶ vacant
//	   │                        ▲                                   │
//	   │                        └──── host connects again ──────────┤
//	   │                                                            │
//	   └──────── removed: empty-room timeout, handed over, ◀────────┘
//	             taken over, the last one leaves, shutdown
//
// removed is terminal: the incarnation is out of the table and its
// removal is in the unregister outbox. A handed-over room starts here as
// a new incarnation in awaiting (or vacant) phase, moved from the old one
// (room.movedFrom), and stays "moving" until the balancer confirms it
// (room.confirmed): that is about its route, not its host, so it is not a
// phase.
type phase uint8

const (
	// phaseAwaiting: allocated (or adopted) and its host has not
	// connected yet: reserved for its allocation.
	phaseAwaiting phase = iota
	// phaseHosted: its host is connected (room.host is set).
	phaseHosted
	// phaseVacant: its host left; nobody hosts it. With nobody connected
	// a new allocation may take the name over.
	phaseVacant
	// phaseRemoved: the incarnation ended and left the table.
	phaseRemoved
)

var phaseNames = [...]string{"awaiting", "hosted", "vacant", "removed"}

func (p phase) String() string { return phaseNames[p] }

// liveLocked reports whether the incarnation has not ended.
func (r *room) liveLocked() bool { return r.phase != phaseRemoved }

// vacantLocked reports whether the room's host has left and no new host is
// connected. Such a room with no connection at all may be taken over by a
// new allocation (core.allocate).
func (r *room) vacantLocked() bool { return r.phase == phaseVacant }

// hostArrivedLocked is awaiting or vacant -> hosted.
func (r *room) hostArrivedLocked(h *conn) {
	r.host = h
	r.phase = phaseHosted
}

// hostGoneLocked is hosted -> vacant: the host left and clients were
// there. (With nobody there the room is removed instead.)
func (r *room) hostGoneLocked() {
	r.host = nil
	r.phase = phaseVacant
}
