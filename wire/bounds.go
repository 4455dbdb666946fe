package wire

import "net/http"

// Refusals of the balancer's bounds.
var (
	// ErrTooManyRooms: the caller's address holds as many live rooms as
	// one address may (the balancer's BALANCER_MAX_ROOMS_PER_SOURCE).
	ErrTooManyRooms = newErr(http.StatusTooManyRequests, "too_many_rooms", true,
		"this address holds as many live rooms as one address may; retry once one has closed")
	// ErrBalancerFull: the balancer holds as many rooms as its memory
	// budget allows; it takes new ones again once rooms have closed.
	ErrBalancerFull = newErr(http.StatusServiceUnavailable, "balancer_full", true,
		"the balancer holds as many rooms as its memory allows; retry later")
)

// Bounds is what the balancer holds against its bounds (GET /v1/stats,
// "bounds"): its memory, the tombstones of released rooms, allocations in
// doubt and the rooms per source address, each with what it refused or
// let go early since the balancer started.
type Bounds struct {
	Memory     MemoryBounds    `json:"memory"`
	Tombstones TombstoneBounds `json:"tombstones"`
	Pending    PendingBounds   `json:"pendingAllocations"`
	Sources    SourceBounds    `json:"roomsPerSource"`
	// Unhosted sums, over the relays registered now, the rooms each has
	// released since its start because their host never connected
	// (squatted or abandoned allocations).
	Unhosted uint64 `json:"roomsReleasedUnhosted"`
}

// MemoryBounds: the memory budget and the heap measured against it.
type MemoryBounds struct {
	// Budget is the memory the balancer may use, in bytes (0: unknown, and
	// no room is refused for memory); BudgetFrom says where it comes from:
	// "GOMEMLIMIT", "cgroup", "meminfo" (the VM's memory) or "option".
	Budget     int64  `json:"budget"`
	BudgetFrom string `json:"budgetFrom,omitempty"`
	// RefuseAt is the live heap at which new rooms are refused.
	RefuseAt int64 `json:"refuseAt"`
	// Heap is the live heap after the last garbage collection.
	Heap     int64 `json:"heap"`
	Refusing bool  `json:"refusing"`
	// Refused counts the allocations refused for memory (balancer_full).
	Refused uint64 `json:"refused"`
}

// TombstoneBounds: released incarnations' fences and released names'
// marks, two per released room.
type TombstoneBounds struct {
	Held             int     `json:"held"`
	Max              int     `json:"max"`
	RetentionSeconds float64 `json:"retentionSeconds"`
	// HorizonSeconds is how far back every release is still fenced: the
	// retention, or less while the table is full (its oldest goes next).
	HorizonSeconds float64 `json:"horizonSeconds"`
	// Evicted counts tombstones dropped before their retention.
	Evicted uint64 `json:"evicted"`
}

// PendingBounds: allocations whose outcome a relay did not tell, each
// pinning its name to that relay for five minutes.
type PendingBounds struct {
	Held int64 `json:"held"`
	Max  int   `json:"max"`
	// Dropped counts outcomes not remembered because Max were held.
	Dropped uint64 `json:"dropped"`
}

// SourceBounds: live rooms per source address of /allocate_ws.
type SourceBounds struct {
	Max     int    `json:"max"`     // 0: no cap
	Sources int64  `json:"sources"` // addresses holding a room
	AtMax   int64  `json:"atMax"`   // addresses holding Max rooms
	Refused uint64 `json:"refused"` // allocations refused (too_many_rooms)
}
