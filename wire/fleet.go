package wire

// The operator's admin API of the balancer (/v1), guarded by an admin key
// (ADMIN_KEY, "Authorization: Bearer <key>"). GET /v1/instances and
// POST /v1/instances/{id}/drain|undrain (admin.go) also take the shared
// SECRET: that is the deploy tool's (purrctl rollout) credential; ADMIN_KEY
// is the operator's. Errors are the usual Error shape; successes are the
// types below. README.md's HTTP API section documents every route.
const (
	PathStats            = "/v1/stats"              // GET -> Stats (ETag)
	PathStatsHistory     = "/v1/stats/history"      // GET -> StatsHistory (ETag): the last hour, a sample a minute
	PathInstanceFmt      = "/v1/instances/%s"       // GET, id = bootId or machineId -> Instance
	PathInstanceRoomsFmt = "/v1/instances/%s/rooms" // GET -> RoomsResponse (ETag)
	PathRooms            = "/v1/rooms"              // GET ?region=&instance=&label=k:v&phase= -> RoomsResponse (ETag); POST ReserveRequest -> Reservation
	PathRoomFmt          = "/v1/rooms/%s"           // GET -> Room; DELETE -> RoomClosed
	PathEvents           = "/v1/events"             // GET: text/event-stream of Event
	PathHealthz          = "/healthz"               // GET, no auth: the process serves HTTP
	PathReadyz           = "/readyz"                // GET, no auth: started and not shutting down
)

// Room phases as the balancer sees them (from the relay's publications).
const (
	RoomWaiting = "waiting" // allocated, nobody connected yet (the host is on its way)
	RoomActive  = "active"  // someone is connected
	RoomVacant  = "vacant"  // the host left (wire.Publication.Vacant)
)

// Room is one live room route as the admin API shows it.
type Room struct {
	Name        string `json:"name"`
	Region      string `json:"region"`
	BootID      string `json:"bootId"`    // the relay boot holding it
	MachineID   string `json:"machineId"` // that relay's machine ("" off Fly)
	Host        string `json:"host"`
	Epoch       string `json:"epoch"`
	Phase       string `json:"phase"` // RoomWaiting, RoomActive or RoomVacant
	Connections int    `json:"connections"`
}

// RoomsResponse is the body of GET /v1/rooms and /v1/instances/{id}/rooms:
// at most limit rooms (default 1000, at most 10000) ordered by name after
// the after= name; Total counts every match and Next, when set, is the
// after= of the next page.
type RoomsResponse struct {
	Rooms []Room `json:"rooms"`
	Total int    `json:"total"`
	Next  string `json:"next,omitempty"`
}

// RegionStats is one region's share of Stats.
type RegionStats struct {
	Region   string `json:"region"`
	Relays   int    `json:"relays"`
	Draining int    `json:"draining"`
	Retiring int    `json:"retiring"`
	Rooms    int64  `json:"rooms"`
	Players  int64  `json:"players"`
}

// Stats is the body of GET /v1/stats (and the data of a "stats" event).
// Players counts connections (hosts included), as /getTotalConnections.
type Stats struct {
	Relays   int           `json:"relays"`
	Draining int           `json:"draining"`
	Retiring int           `json:"retiring"`
	Rooms    int64         `json:"rooms"`
	Players  int64         `json:"players"`
	Regions  []RegionStats `json:"regions"` // ordered by region
	// Bounds is the balancer's own state against its bounds (GET /v1/stats
	// only; the ETag and the event stream's stats leave it out).
	Bounds *Bounds `json:"bounds,omitempty"`
}

// StatsSample is the fleet's totals at one moment.
type StatsSample struct {
	At      string `json:"at"` // RFC 3339, UTC
	Relays  int    `json:"relays"`
	Rooms   int64  `json:"rooms"`
	Players int64  `json:"players"`
}

// StatsHistory is the body of GET /v1/stats/history: up to an hour of
// samples, oldest first, one every IntervalSeconds (the balancer's memory
// only: a restart starts it again).
type StatsHistory struct {
	IntervalSeconds int           `json:"intervalSeconds"`
	Samples         []StatsSample `json:"samples"`
}

// ReserveRequest is the body of POST /v1/rooms: a matchmaker reserves a
// named room. Name and AllocationID are required; the same pair again
// replays (the same answer), another AllocationID for a live name is
// room_name_taken (409). Region is a placement preference, as on
// /allocate_ws.
type ReserveRequest struct {
	Name         string `json:"name"`
	Region       string `json:"region,omitempty"`
	AllocationID string `json:"allocationId"`
	// Labels the relay must carry (all of them) and the strategy among
	// those that fit ("least", "most", "random"; "" = the balancer's):
	// see README's Placement. Nothing fits: 409 no_candidate, saying why.
	Labels   map[string]string `json:"labels,omitempty"`
	Strategy string            `json:"strategy,omitempty"`
	// Instance pins the room to one relay (boot id or machine id): 409
	// instance_draining when it drains, 404 not_found when it is gone.
	Instance string `json:"instance,omitempty"`
	// Force, with Instance, places the room on that relay even while an
	// operator has drained it (not while it shuts down, retires, starts
	// or is stale).
	Force bool `json:"force,omitempty"`
}

// Reservation answers POST /v1/rooms: the host's capability (what
// /allocate_ws answers) and the clients' (what /join answers).
type Reservation struct {
	Room         Room       `json:"room"`
	AllocationID string     `json:"allocationId"`
	Host         Capability `json:"host"`
	Client       Capability `json:"client"`
}

// RoomClosed answers DELETE /v1/rooms/{name}. Closed is false when the
// name was already released (a retry): the delete is idempotent.
type RoomClosed struct {
	Name        string `json:"name"`
	Closed      bool   `json:"closed"`
	Connections int    `json:"connections"` // sockets the relay closed
}

// Event types of GET /v1/events (the SSE "event:" field; the data is an
// Event).
const (
	EventInstanceJoin    = "instance.join"    // a relay registered
	EventInstanceLeave   = "instance.leave"   // a relay was removed or replaced
	EventInstanceStale   = "instance.stale"   // a relay missed two heartbeats (not yet removed)
	EventInstanceDrain   = "instance.drain"   // a relay drains (admin or itself)
	EventInstanceUndrain = "instance.undrain" // a relay takes rooms again
	EventInstanceRetire  = "instance.retire"  // a relay retires (replaced by a deploy; it stops when its games end)
	EventInstanceUpdate  = "instance.update"  // no longer stale
	EventRoomCreate      = "room.create"
	EventRoomUpdate      = "room.update" // connections, phase or incarnation changed
	EventRoomClose       = "room.close"
	EventStats           = "stats" // sent first on every stream, then whenever Stats change
)

// Event is the data of one server-sent event: Type and Seq always, then
// the one field of its kind (Room for a room.close holds its last view).
type Event struct {
	Type     string    `json:"type"`
	Seq      uint64    `json:"seq"`
	At       string    `json:"at"` // RFC 3339, UTC
	Instance *Instance `json:"instance,omitempty"`
	Room     *Room     `json:"room,omitempty"`
	Stats    *Stats    `json:"stats,omitempty"`
}
