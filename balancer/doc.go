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
// incarnation never tombstoned, per-relay room and connection counts equal
// to their routes) and runs after every balancer test.
//
// # State and ownership
//
//   - Server: options, clock, logger, HTTP client, metrics, state,
//     relayClient, the limits and the admin keys are static after New;
//     mu guards the listener's life (server, listener, cancel); draining is
//     atomic.
//   - registry (registry.go): the current registration (relayEntry) of
//     every relay endpoint: boot id, immutable routing metadata, labels and
//     capacity, a balancer-owned liveness version bumped by every
//     heartbeat, the last heartbeat, draining marks, and the aggregates
//     (rooms, connections) of the routes that point at it, kept atomic. Its
//     maps (by endpoint, by boot, replaced boots, admin drains, proof
//     gates, endpoints gone) are guarded by its RWMutex, held only for map
//     and field work.
//   - roomTable (rooms.go): room names to roomEntry, in 64 shards whose
//     locks are held only for map operations. An entry's live route is an
//     immutable roomRecord behind an atomic pointer (owning registration,
//     epoch, revision, connections, client credential, allocation id,
//     vacant), written under the entry's lease and read by anyone; its
//     tombstones and pending allocation are guarded by the lease.
//   - eventHub, statsHistory, authThrottle, the refused-SECRET log and the
//     rate limits are internally locked and safe for concurrent use.
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
// lease or a proof gate, then the registry's lock; a shard lock is never
// held with anything else.
//
// # Registration and health
//
// A heartbeat of an endpoint's current boot is refreshed at once; a new
// endpoint or a different boot is admitted only once GET {endpoint}/ping
// reports that boot, and then replaces the registration (state.register).
// Routing metadata is immutable within a boot (metadata_changed); boots a
// registration replaced are refused as stale_boot; at most Options.MaxRelays
// endpoints are registered (too_many_relays). A health round probes every
// relay's /ping and removes one that failed HealthFailures probes in a row,
// answered with another boot, or stopped heartbeating, unless a heartbeat
// arrived meanwhile (state.checkRelays). A heartbeat saying Retiring (a
// deploy replaced the relay) marks the boot retiring for the rest of its
// registration, whatever later heartbeats omit; one saying Unreachable
// (players cannot reach it yet) lists it starting until one says
// otherwise; neither takes a room. GET wire.PathBalancerBoot
// (bootwatch.go) is the relays' long poll on this balancer's boot,
// answered at once to a caller that does not know it and when the
// balancer stops, which also closes connections that never sent a
// request (conns.go) rather than wait 5 s for them.
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
// carries. Tombstones are keyed by (boot, epoch), kept TombstoneRetention
// (at most 64 per name) and deleted by the cleanup tick.
//
// # Allocation and placement
//
// An allocation holds the room's lease across its relay call, so
// concurrent allocations of one name are decided one after the other
// (state.allocate): the same allocation id replays at the relay, another
// is room_name_taken unless the route is vacant (the relay then decides),
// and an allocation whose outcome was lost pins the name to its relay for
// a while so that the exact retry replays there. Placement (placement.go)
// picks among the relays that are registered, not draining, not retiring,
// not starting, not full and carry every label asked for: the requested region first, in the
// strategy's order, up to three relays tried. The relay's answer is
// checked (a valid capability and a publication of that name and
// allocation) and committed as the room's publication, with the relay's
// registered host in the capability; a relay must not wait for its own
// publication of the room inside this call.
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
// The four migration calls are forwarded to the relay holding the room
// (migration.go): the route snapshot in internal headers, mutating calls
// under the room's lease, current read optimistically and checked again,
// a lost answer to a change 503 migration_outcome_indeterminate, a
// malformed success a sanitized 502, the relay's own migration errors
// passed through (docs/MIGRATION.md).
//
// # Admin API (/v1)
//
// The operator's read model and controls; README.md documents every route
// and wire/fleet.go holds the shapes. Every route is guarded by v1
// (adminroute.go): CORS for the configured origins only, a body cap, the
// failed-auth throttle of the source checked before the key, then the
// admin key (or the shared SECRET on the deploy tool's three routes);
// POST and DELETE calls are audit-logged with the key's fingerprint. The
// list routes carry a weak ETag over views without heartbeat timestamps
// (etag.go). GET /v1/events streams diffs of the fleet's view (events.go,
// eventdiff.go, events_stream.go), computed only while a stream is open
// and paced on the injected clock.
//
// # Files
//
// server.go (life cycle), conns.go, bootwatch.go, options.go, routes.go (mux and public reads),
// allocate.go, placement.go, internal.go (relay routes), internalauth.go
// (paced logs of relay calls with a wrong SECRET), state.go,
// state_relays.go, state_rooms.go, state_allocate.go, state_views.go,
// state_check.go, registry.go, rooms.go, health.go, relaycall.go,
// locate.go, migration.go, admin.go (the deploy tool's routes),
// adminauth.go, adminroute.go, adminsource.go, adminthrottle.go,
// admincors.go, etag.go, labels.go, history.go, v1_instances.go,
// v1_rooms.go, v1_reserve.go, v1_close.go, events.go, eventdiff.go,
// events_stream.go, metrics.go.
package balancer
