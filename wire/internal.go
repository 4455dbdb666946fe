package wire

import "time"

// The internal relay <-> balancer protocol (version InternalProtocolVersion).
//
// Every request carries the shared SECRET in HeaderInternalSecret and the
// sender's protocol version in HeaderInternalVersion; every answer carries the
// answerer's version. Versions only add fields: a receiver ignores fields it
// does not know and gives absent ones their zero value, so a new relay works
// with the previous balancer and the reverse (relays are deployed first).
//
// Relay -> balancer (all POST, JSON bodies, JSON answers):
//
//	PathRegister     RegisterRequest -> RegisterResponse. The heartbeat, every
//	                 30 s by default and once at start (after the relay's
//	                 listeners are up). A new boot for a known endpoint is
//	                 accepted only after the balancer's own GET {endpoint}/ping
//	                 reports that boot (proofs are serialized per endpoint);
//	                 then the old boot's rooms are dropped at once. Metadata
//	                 (host, region, endpoint, ports, ssl) is immutable within a
//	                 boot: a change is refused with metadata_changed.
//	PathPublish      PublishRequest -> PublishResponse. Room publications: the
//	                 whole authoritative snapshot after every heartbeat (and at
//	                 once when RegisterResponse.Republish says so), and single
//	                 rooms when their count changes. Each entry is applied as a
//	                 compare-and-set on the room name (see PublicationStatus).
//	PathUnregister   UnregisterRequest -> UnregisterResponse. The relay's
//	                 outbox: removed rooms keyed by (name, epoch, revision),
//	                 retried every heartbeat until the answer confirms them.
//
// Balancer -> relay:
//
//	PathRelayAllocate POST, headers name, region, allocation_id; no body ->
//	                 RelayAllocation. Creates the room (or, for the same
//	                 allocation_id, returns the same room: exact replay) and
//	                 answers the host capability plus the room's publication,
//	                 which the balancer commits as the room's registration.
//	                 A different allocation_id for a live room: ErrRoomTaken,
//	                 unless the room is vacant and empty (Publication.Vacant):
//	                 then it creates a new incarnation of the name.
//	                 The call carries HeaderTargetBoot, the boot the balancer
//	                 chose: a relay of that boot creates the room on itself
//	                 without consulting its Router (the balancer reached the
//	                 machine directly, not through Fly's proxy).
//	/ping            GET, public; proves the boot id (Ping).
//	PathRelayRoomClose POST, header name (and HeaderRoomEpoch) ->
//	                 RelayRoomClosed (rooms.go; added within version 2):
//	                 an operator closes a room (DELETE /v1/rooms/{name}).
//	PathRelayRetire  POST: a deploy retires the relay (retire.go).
//	PathRelayMigration* The four host migration calls (migration.go),
//	                 forwarded from the public routes with the caller's
//	                 headers and the route snapshot (HeaderTargetBoot,
//	                 HeaderRoomEpoch, HeaderRoomRevision), which the relay
//	                 checks before it reads or changes the room.
//
// Relay -> balancer, multi-machine relay apps (added within version 2):
//
//	PathRoomLocation GET ?name=<room>, secret -> RoomLocation, or
//	                 room_not_found. Which registered relay (boot, machine,
//	                 endpoint) holds a live room: a machine of a relay app
//	                 asks it for a room it does not hold, to hand a
//	                 connection to the holder.
//
//	PathBalancerBoot GET: the relay's watch of the balancer's boot
//	                 (retire.go), a long poll.
//
// Relay -> relay (same shared secret):
//
//	PathForward      WebSocket upgrade on a relay's HTTP port, with the
//	                 secret and HeaderForwardedBy. A machine that received a
//	                 connection for a room held by another machine opens one
//	                 of these to the holder per connection, replays the
//	                 client's authentication message on it and pipes frames
//	                 both ways. The holder serves it as an ordinary
//	                 connection but never routes or forwards it again.
//	PathHandover     POST HandoverRequest -> HandoverResponse, or
//	                 handover_refused. The room follows its host: a machine
//	                 that received the first (authentication) message for a
//	                 room held by another machine of its app asks the holder
//	                 to hand the room over. The holder agrees only when the
//	                 secret is the room's host secret and nobody is connected
//	                 to the room and its host has not arrived yet (a room
//	                 that was ever hosted, or is in a host migration, never
//	                 moves); it then ends its incarnation (unregister
//	                 outbox) and answers the room's credentials, and
//	                 answers the same asker (BootID) the same way for a
//	                 while, in case that answer was lost. The asker
//	                 creates a new incarnation with them and publishes it
//	                 with Publication.MovedFrom, which the balancer applies
//	                 over the holder's live route (a compare-and-set on that
//	                 exact incarnation). Any other answer: the asker
//	                 forwards the connection (PathForward) as before. A
//	                 relay asks only when its balancer's RegisterResponse
//	                 says Handover (an older balancer would refuse the
//	                 moved publication).
const InternalProtocolVersion = 2

// Internal paths.
const (
	PathRegister      = "/internal/v2/register"
	PathPublish       = "/internal/v2/publish"
	PathUnregister    = "/internal/v2/unregister"
	PathRelayAllocate = "/internal/v2/allocate"
	PathRoomLocation  = "/internal/v2/room"
	PathForward       = "/internal/v2/forward"
	PathHandover      = "/internal/v2/handover"
)

// Headers of the multi-machine additions.
const (
	// HeaderTargetBoot names the relay boot the balancer chose for an
	// allocation (PathRelayAllocate).
	HeaderTargetBoot = "purr-target-boot"
	// HeaderForwardedBy marks a PathForward connection and names the
	// forwarding relay's boot (for logs); a forwarded connection is never
	// forwarded again.
	HeaderForwardedBy = "purr-forwarded-by"
)

// RelayInfo is a relay's routing metadata, immutable within one boot.
type RelayInfo struct {
	BootID   string `json:"bootId"`
	Endpoint string `json:"endpoint"` // HTTP base URL the balancer reaches (apiEndpoint)
	Host     string `json:"host"`     // host clients connect to
	Region   string `json:"region"`
	// Port is the WebSocket port clients connect to (advertised; 443 behind
	// Fly's TLS). UDPPort/UDPPortV2 are advertised for PurrNet's sake.
	Port      int  `json:"port"`
	UDPPort   int  `json:"udpPort"`
	UDPPortV2 int  `json:"udpPortV2"`
	SSL       bool `json:"ssl"`
	// PublicEndpoint is the HTTP base URL clients ping (the apiEndpoint of
	// /servers) when it differs from Endpoint: every machine of a
	// multi-machine relay app registers its own Endpoint (its private
	// address, which the balancer reaches directly) and the app's shared
	// public URL here. Empty means Endpoint.
	PublicEndpoint string `json:"publicEndpoint,omitempty"`
	// Process facts (informational; not part of the immutable metadata).
	MachineID string `json:"machineId,omitempty"`
	ImageRef  string `json:"imageRef,omitempty"`
	Version   string `json:"version,omitempty"`
	// Labels and Capacity shape placement (labels.go; added within
	// version 2: an older balancer ignores them, an older relay omits them,
	// which is no label and no stated capacity). Like the routing metadata
	// they are fixed for a boot: the balancer keeps those of the heartbeat
	// that registered the boot, and a relay that must change them restarts.
	Labels   map[string]string `json:"labels,omitempty"`
	Capacity Capacity          `json:"capacity,omitzero"`
}

// SameRoute reports whether two infos carry the same immutable routing
// metadata (host, region, endpoint and public endpoint, ports, ssl).
func (a RelayInfo) SameRoute(b RelayInfo) bool {
	return a.Endpoint == b.Endpoint && a.PublicEndpoint == b.PublicEndpoint && a.Host == b.Host && a.Region == b.Region &&
		a.Port == b.Port && a.UDPPort == b.UDPPort && a.UDPPortV2 == b.UDPPortV2 && a.SSL == b.SSL
}

// RegisterRequest is the relay's heartbeat.
type RegisterRequest struct {
	Relay       RelayInfo `json:"relay"`
	Draining    bool      `json:"draining"`
	Connections int       `json:"connections"`
	Rooms       int       `json:"rooms"`
	// HeartbeatSeconds is the relay's heartbeat interval (added within
	// version 2; 0 = not said). The balancer expires a relay after
	// max(RelayExpiry, 3 x HeartbeatSeconds) without a heartbeat.
	HeartbeatSeconds int `json:"heartbeatSeconds,omitempty"`
	// Retiring and RetireBy: a deploy retired this boot (PathRelayRetire).
	// It takes no new room; the balancer places none there, and keeps it
	// so for the boot even if a later heartbeat omitted it (added within
	// version 2).
	Retiring bool      `json:"retiring,omitempty"`
	RetireBy time.Time `json:"retireBy,omitzero"`
	// Unreachable: players cannot reach this boot through its public
	// address yet (on Fly the proxy routes to a new machine only once its
	// checks pass). The balancer lists it but places no room on it (added
	// within version 2; absent means reachable).
	Unreachable bool `json:"unreachable,omitempty"`
	// UnhostedReleased counts the rooms this boot released because their
	// host never connected within its host window (HOST_CONNECT_TIMEOUT_
	// SECONDS): rooms allocated and never played (added within version 2).
	UnhostedReleased uint64 `json:"unhostedReleased,omitempty"`
	// AdminDrained repeats the last answer's AdminDrained: a balancer that
	// does not know this boot yet (it restarted, or a standby took over)
	// keeps the operator's drain from it (added within version 2).
	AdminDrained bool `json:"adminDrained,omitempty"`
}

// RegisterResponse answers a heartbeat.
type RegisterResponse struct {
	// BalancerBoot is the balancer's boot id. A relay that sees it change
	// republishes every room at once.
	BalancerBoot string `json:"balancerBoot"`
	// New is true when this heartbeat created the registration (first
	// heartbeat of a boot, a balancer restart, a boot replacement, or a
	// relay removed by a failed health check).
	New bool `json:"new"`
	// Republish asks the relay to publish its whole room snapshot now.
	Republish bool `json:"republish"`
	// LivenessVersion is the balancer-owned version this heartbeat bumped.
	LivenessVersion uint64 `json:"livenessVersion"`
	// Handover is true when the balancer applies Publication.MovedFrom
	// (added within version 2). A relay asks for no handover
	// (PathHandover) unless its balancer says so: an older balancer would
	// refuse the moved room's publication as a conflict and keep sending
	// its clients to the machine that gave it up.
	Handover bool `json:"handover,omitempty"`
	// AdminDrained: an operator drained this boot (the admin API); the
	// relay says so in its next heartbeats (RegisterRequest.AdminDrained)
	// so that the drain outlives the balancer process (added within
	// version 2).
	AdminDrained bool `json:"adminDrained,omitempty"`
}

// Publication is one room as its relay publishes it. Epoch is opaque and new
// for every room incarnation on a relay; Revision grows with every change of
// the room within the epoch.
type Publication struct {
	Name         string `json:"name"`
	Epoch        string `json:"epoch"`
	Revision     uint64 `json:"revision"`
	Connections  int    `json:"connections"`
	ClientSecret string `json:"clientSecret"`
	AllocationID string `json:"allocationId,omitempty"`
	// Vacant is true once the room's host has left (added within version 2;
	// older relays omit it). Such a room with no connection may be taken
	// over by an allocation with another allocation_id, so the balancer
	// forwards one to the relay, which decides, instead of answering
	// room_name_taken itself. Host migration will reserve a vacant room
	// while a claim is in progress.
	Vacant bool `json:"vacant,omitempty"`
	// MovedFrom names the incarnation this one replaced by a handover
	// (PathHandover; added within version 2). The balancer applies the
	// publication over a live route only when that route is exactly this
	// incarnation of a machine of the same app, and tombstones it. Sent with
	// every publication of the new incarnation: once applied it is moot.
	MovedFrom *Incarnation `json:"movedFrom,omitempty"`
}

// Incarnation names one room incarnation: the relay boot and the epoch.
type Incarnation struct {
	BootID string `json:"bootId"`
	Epoch  string `json:"epoch"`
}

// HandoverRequest asks the holder of a room to hand it over (PathHandover).
// Secret is the secret of the authentication message that reached the
// asker: the holder hands the room over only for its host secret.
type HandoverRequest struct {
	Name   string `json:"name"`
	Secret string `json:"secret"`
	BootID string `json:"bootId"` // the asker's boot (for logs)
}

// HandoverResponse carries a handed-over room's credentials and the
// incarnation that ended on the holder.
type HandoverResponse struct {
	Name         string `json:"name"`
	HostSecret   string `json:"hostSecret"`
	ClientSecret string `json:"clientSecret"`
	AllocationID string `json:"allocationId,omitempty"`
	Vacant       bool   `json:"vacant,omitempty"` // from holders before host migration; now never set
	// Incarnation is the game session's id (host migration): a moved room
	// is the same session on another machine. Empty from older holders.
	Incarnation string      `json:"incarnation,omitempty"`
	From        Incarnation `json:"from"`
}

// PublishRequest carries publications of one relay boot.
type PublishRequest struct {
	BootID   string        `json:"bootId"`
	Endpoint string        `json:"endpoint"`
	Rooms    []Publication `json:"rooms"`
	// Snapshot is true when Rooms is (a chunk of, at most 500 rooms) the
	// relay's whole room set, as opposed to rooms whose count just changed.
	// The balancer never removes a room because a snapshot omits it:
	// removals only come through PathUnregister.
	Snapshot bool `json:"snapshot"`
}

// PublicationStatus is the balancer's verdict on one publication.
type PublicationStatus string

const (
	PubApplied  PublicationStatus = "applied"  // acquired the name or updated the count
	PubCurrent  PublicationStatus = "current"  // same or newer revision already held; nothing to do
	PubConflict PublicationStatus = "conflict" // another live epoch owns the name
	PubFenced   PublicationStatus = "fenced"   // this epoch was released (tombstone); never again
	PubRejected PublicationStatus = "rejected" // not the endpoint's live boot, or not registered
)

// Label is the status as a metric label: one of the statuses above, or
// "unknown" for anything else a balancer might answer (so that a buggy
// or hostile one cannot grow a metric's series without bound).
func (s PublicationStatus) Label() string {
	switch s {
	case PubApplied, PubCurrent, PubConflict, PubFenced, PubRejected:
		return string(s)
	}
	return "unknown"
}

// PublicationResult is one entry of PublishResponse.
type PublicationResult struct {
	Name   string            `json:"name"`
	Epoch  string            `json:"epoch"`
	Status PublicationStatus `json:"status"`
}

// PublishResponse answers PublishRequest, one result per room in order.
type PublishResponse struct {
	Results []PublicationResult `json:"results"`
}

// Removal is one outbox entry: the exact room incarnation and revision that
// was removed on the relay.
type Removal struct {
	Name     string `json:"name"`
	Epoch    string `json:"epoch"`
	Revision uint64 `json:"revision"`
}

// UnregisterRequest carries outbox entries of one relay boot.
type UnregisterRequest struct {
	BootID   string    `json:"bootId"`
	Endpoint string    `json:"endpoint"`
	Rooms    []Removal `json:"rooms"`
}

// RemovalStatus is the balancer's verdict on one removal. RemApplied,
// RemAlready and RemSuperseded confirm the entry: the relay drops it from
// its outbox. Any other status (RemRetry, or one this relay does not know)
// keeps it, to be sent again on the next heartbeat.
type RemovalStatus string

const (
	RemApplied    RemovalStatus = "applied"    // the route was released (tombstoned)
	RemAlready    RemovalStatus = "already"    // that exact removal was already applied
	RemSuperseded RemovalStatus = "superseded" // a newer incarnation owns the name, or none is known
	RemRetry      RemovalStatus = "retry"      // not confirmed (e.g. older revision than held); keep it
)

// Label is the status as a metric label ("unknown" for any other).
func (s RemovalStatus) Label() string {
	switch s {
	case RemApplied, RemAlready, RemSuperseded, RemRetry:
		return string(s)
	}
	return "unknown"
}

// RemovalResult is one entry of UnregisterResponse.
type RemovalResult struct {
	Name   string        `json:"name"`
	Epoch  string        `json:"epoch"`
	Status RemovalStatus `json:"status"`
}

// UnregisterResponse answers UnregisterRequest, one result per room in order.
type UnregisterResponse struct {
	Results []RemovalResult `json:"results"`
}

// RelayAllocation is the relay's answer to PathRelayAllocate.
type RelayAllocation struct {
	Capability  Capability  `json:"capability"`
	Publication Publication `json:"publication"`
	BootID      string      `json:"bootId"`
	Replayed    bool        `json:"replayed"`
}

// RoomLocation answers PathRoomLocation: the registered relay that holds a
// live room.
type RoomLocation struct {
	Name      string `json:"name"`
	BootID    string `json:"bootId"`
	MachineID string `json:"machineId,omitempty"`
	Endpoint  string `json:"endpoint"` // the holder's own HTTP base URL (PathForward is dialled there)
	Host      string `json:"host"`     // public host and port clients use: same app when they match
	Port      int    `json:"port"`
	Region    string `json:"region"`
	// Connections is the room's count as last published (added within
	// version 2): a machine does not ask for the handover of a room that
	// is in use (the holder would decline).
	Connections int `json:"connections,omitempty"`
}
