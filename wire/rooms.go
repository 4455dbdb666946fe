package wire

// PathRelayRooms is a relay's own view of the rooms it holds (GET, the
// internal secret in HeaderInternalSecret) -> RelayRooms. Operators and the
// chaos soak compare it across machines and with the balancer: a room
// name hosted on two relays at once is a split brain.
const PathRelayRooms = "/internal/v2/rooms"

// MaxRelayRoomsListed bounds the rooms one RelayRooms answer lists (the
// relay's own MAX_ROOMS default); Truncated says when more were held.
const MaxRelayRoomsListed = 10000

// RelayRooms answers PathRelayRooms.
type RelayRooms struct {
	BootID    string      `json:"bootId"`
	MachineID string      `json:"machineId,omitempty"`
	Rooms     []RelayRoom `json:"rooms"`
	Truncated bool        `json:"truncated,omitempty"`
}

// RelayRoom is one room as its relay holds it.
type RelayRoom struct {
	Name  string `json:"name"`
	Epoch string `json:"epoch"`
	// Phase is the room's life-cycle phase (hosted, vacant, migration
	// phases, moving, removed).
	Phase string `json:"phase"`
	// Hosted is true while a host's connection is attached to the room here.
	Hosted      bool `json:"hosted"`
	Connections int  `json:"connections"`
}

// PathRelayRoomClose closes a room at its relay (POST, the internal secret,
// headers name and, optionally, HeaderRoomEpoch: only that incarnation)
// -> RelayRoomClosed. Every socket of the room is closed (1000 "room
// closed") and the name released (its removal goes to the outbox as for
// any ended room). A room that is not there (or another incarnation)
// answers Closed false: the call is idempotent. The balancer's
// DELETE /v1/rooms/{name} calls it.
const PathRelayRoomClose = "/internal/v2/rooms/close"

// RelayRoomClosed answers PathRelayRoomClose.
type RelayRoomClosed struct {
	BootID      string `json:"bootId"`
	Closed      bool   `json:"closed"`
	Epoch       string `json:"epoch,omitempty"` // the incarnation closed
	Connections int    `json:"connections"`     // sockets closed
}
