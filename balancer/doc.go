// Package balancer is purrfly's PurrBalancer: relays register with it, it
// places new rooms on them, answers joins and lists rooms. It speaks the
// public API of docs/PROTOCOL.md section 3 to PurrNet clients and the
// internal protocol of wire/internal.go to relays; it never imports the
// relay.
//
// # Shape
//
//	HTTP handlers (routes.go, allocate.go, internal.go, migration.go, v1_*.go)
//	    decode with wire -> one method of state -> encode with wire
//	state (state*.go): the registry and the room table, and every rule
//	    that keeps them consistent; its only way out is relayClient
//	relayClient (relaycall.go): every call to a relay (boot proofs,
//	    allocations, room closes, forwarded migration calls)
//	loops (health.go): health rounds and the cleanup tick; eventHub
//	    (events.go): the /v1/events streams
//
// Everything lives in memory and is rebuilt from the relays after a
// restart: a relay that sees a new BalancerBoot in a heartbeat's answer
// republishes its rooms. state_check.go's ConsistencyCheck verifies the
// invariants the rules promise (registrations filed once, a live route's
// incarnation never tombstoned, per-relay counts and name indexes equal to
// their routes, the per-source counts equal to the routes' sources, the
// tombstone table and pending allocations within their bounds) and runs
// after every balancer test.
//
// # State and ownership
//
// Each type's comment says what guards each of its fields; in short:
//
//   - Server: static after New but for the listener's life (mu) and
//     draining (atomic).
//   - registry (registry.go): the current registration of every relay
//     endpoint and the aggregates of its routes, under its RWMutex held
//     only for map and field work; the aggregates are atomic, written under
//     the rooms' leases.
//   - roomTable (rooms.go): room names to roomEntry in 64 shards locked
//     only for map operations. A live route is an immutable roomRecord
//     behind an atomic pointer, written under the entry's lease and read by
//     anyone; the name index (nameindex.go), the per-source counts
//     (sources.go) and the pending count are kept in step under the lease.
//   - tombstones, memGate, eventHub, statsHistory, the limit.AuthThrottles
//     and the rate limits are internally locked and safe for concurrent use.
//
// # Leases and gates
//
// Every change to one room happens under that room's lease, a one-slot
// channel per entry, so waiting for it honours a context. A lease is held
// across at most one relay call (an allocation, an operator's close, a
// forwarded migration change); nothing else is held across a network call.
// Readers (join, list, totals, the admin views) take no lease: they load
// the route's pointer and check that its registration is still current,
// so replacing or removing a registration hides all its routes in one
// step. Boot proofs are serialized per endpoint by a proof gate that
// exists only while someone holds or waits for it. Lock order: a room
// lease or a proof gate, then the registry's lock; under a room lease also
// the tombstones' lock, a name index's lock, a source shard's lock or the
// event hub's log lock, each alone and for one map or slice operation; the
// event hub's lock, then its log lock, the registry's lock and name
// indexes' locks (a diff). A shard lock is never held with anything else.
//
// # Registration and health
//
// A heartbeat of an endpoint's current boot is refreshed at once; a new
// endpoint or boot is admitted only once GET {endpoint}/ping reports that
// boot (state.register). A boot's routing metadata is immutable, across a
// removal too (kept with the endpoint's gone mark); replaced boots are
// stale_boot; at most Options.MaxRelays endpoints are registered. A health
// round removes a relay that failed HealthFailures probes in a row,
// answered with another boot, or stopped heartbeating (state.checkRelays).
// A relay that says Retiring (a deploy replaced it) stays retiring for the
// rest of its registration; one that says Unreachable is listed starting;
// neither takes a room. An operator's drain, told to the relay in each
// answer and repeated by it, is taken over by a balancer new to the boot.
// Relays long-poll wire.PathBalancerBoot to learn of a new balancer at once.
//
// # Publications, removals and tombstones
//
// A publication is a compare-and-set on the room name (applyPublication):
// rejected from a boot that is not the endpoint's current one, fenced for
// a tombstoned incarnation, applied or current for the live incarnation by
// revision, a conflict for another live incarnation unless it names that
// one as the one it moved from (a handover between machines of one app),
// and applied when the name has no live route. A snapshot never removes a
// room it omits: removals come only from the relay's outbox
// (applyRemoval), which tombstones the incarnation whatever revision it
// carries.
//
// # Tombstones
//
// Released incarnations live in one table for the balancer (tombstones.go):
// a 64-bit keyed hash of (name, boot, epoch) and its release time, plus a
// mark that the name was released (a DELETE of it answers 200, closed
// false); the room's entry leaves the room table. An incarnation is fenced
// until TombstoneRetention has passed or MaxTombstones newer tombstones
// have been written, whichever comes first; GET /v1/stats says how far
// back the fence holds now. Pending allocations are bounded too
// (maxPendingAllocations): past the bound an indeterminate outcome is
// answered but not remembered.
//
// # Allocation and placement
//
// An allocation holds the room's lease across its relay call, so
// concurrent allocations of one name are decided one after the other
// (state.allocate): the same allocation id replays at the relay, another
// is room_name_taken unless the route is vacant (the relay then decides),
// and an allocation whose outcome was lost pins the name to its relay for
// a while so that the exact retry replays there. Placement (placement.go)
// picks among the relays that are registered, not draining, retiring,
// starting or full, and carry every label asked for: the requested region
// first, in the strategy's order, up to three relays tried. The answer is
// checked (a valid capability and a publication of that name and
// allocation) and committed as the room's publication, with the relay's
// registered host in the capability; a relay must not wait for its own
// publication of the room inside this call.
//
// Before any of that, an allocation that may make a room is admitted
// (state_admit.go): 503 balancer_full while the live heap is past its share
// of the memory budget (memory.go; every other table is bounded on its own,
// so a new room is what memory refuses, never a relay's publication), 429
// too_many_rooms when its source holds MaxRoomsPerSource live rooms.
//
// # Multi-machine relay apps
//
// Each machine of a relay app registers on its own (its boot, machine id
// and private Endpoint, which the balancer calls directly) with the app's
// public host, port and PublicEndpoint; placement treats the machines as
// separate relays, and /servers lists the app once per region. Machines
// ask wire.PathRoomLocation (locate.go) where a room they do not hold
// lives.
//
// # Host migration
//
// The four migration calls go to the relay holding the room (migration.go),
// changes under the room's lease; a lost answer is 503 (docs/MIGRATION.md).
//
// # Admin API (/v1)
//
// The operator's read model and controls; README.md documents every route
// and wire/fleet.go holds the shapes. Every route is guarded by v1
// (adminroute.go): CORS for the configured origins, a body cap, the source's
// failed-auth throttle before the key, then the admin key (or the SECRET
// on the deploy tool's routes); calls are counted, changes and streams
// logged, by the key's fingerprint. Lists carry a weak ETag (etag.go).
//
// A room list costs its page, not the fleet (state_pages.go), and GET
// /v1/events costs what it sends (events.go): route changes are logged
// only while a stream is open, diffs are paced on the injected clock, and
// a stream that falls past its bounded queue is closed for its consumer to
// re-read the lists.
package balancer
