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
