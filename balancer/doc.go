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
//   - Server: options, clock, logger, HTTP client, metrics, state,
//     relayClient, the limits and the admin keys are static after New;
//     mu guards the listener's life (server, listener, cancel); draining is
//     atomic.
//   - registry (registry.go): the current registration (relayEntry) of
//     every relay endpoint: boot id, immutable routing metadata, labels and
//     capacity, a balancer-owned liveness version bumped by every
//     heartbeat, the last heartbeat, draining marks, and the aggregates of
//     the routes that point at it (rooms, connections, waiting and vacant
//     rooms, kept atomic; their names in a nameIndex, relayrooms.go), all
//     written under those rooms' leases by roomEntry.setLive. Its maps (by
//     endpoint, by boot, replaced boots, admin drains, proof gates,
//     endpoints gone) are guarded by its RWMutex, held only for map and
//     field work.
//   - roomTable (rooms.go): room names to roomEntry, in 64 shards whose
//     locks are held only for map operations. An entry's live route is an
//     immutable roomRecord behind an atomic pointer (owning registration,
//     epoch, revision, connections, client credential, allocation id,
//     vacant, the source address whose allocation made it), written under
//     the entry's lease and read by anyone; its pending allocation is
//     guarded by the lease; an entry that holds neither leaves the table.
//     Beside the shards: the index of every live route by name
//     (nameindex.go), the live rooms per source address (sources.go) and
//     the count of pending allocations, kept in step by setLive and
//     setPending under the lease.
//   - tombstones (tombstones.go): released incarnations and names, one
//     table under one bound, behind its own lock.
//   - memGate (memory.go): the memory budget, static after New, and the
//     last live heap read, atomic.
//   - eventHub, statsHistory, authThrottle, the refused-SECRET log and the
//     rate limits are internally locked and safe for concurrent use; the
//     hub's log of route changes has a lock of its own, taken under room
//     leases.
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
// carries.
//
// # Tombstones
//
// Released incarnations live in one table for the balancer (tombstones.go):
// an entry is a 64-bit hash of (name, boot, epoch) under a seed drawn per
// process, with its release time (the boot is in the key because epochs are
// only new within one boot), and a second entry marks the name released (a
// DELETE of it answers 200, closed false). Nothing else of a released room
// is kept: its entry leaves the room table. Entries leave in the order they
// were written: at TombstoneRetention (a read compares the time itself, so
// an expired tombstone no longer fences before the cleanup tick drops it),
// or earlier once MaxTombstones newer ones exist. So an incarnation
// released at t is fenced until t + TombstoneRetention or until
// MaxTombstones tombstones newer than its own have been written, whichever
// comes first: with R rooms released a second (two tombstones each), for
// min(TombstoneRetention, MaxTombstones / 2R). Past that, a very late
// publication of it can be accepted if no newer route holds the name. Early
// drops are counted, and GET /v1/stats says how far back the fence holds
// now. A hash collision would fence a new incarnation whose key matched a
// held one: with n tombstones held, a chance of n/2^64 per publication.
// Pending allocations are bounded too (maxPendingAllocations): past the
// bound an indeterminate outcome is answered but not remembered.
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
// Before any of that, an allocation that may make a room (not the exact
// replay of the live route or pending allocation, not another id for a
// live room) is admitted (state_admit.go): refused 503 balancer_full while
// memory is short (Memory below), and 429 too_many_rooms when its source
// address holds MaxRoomsPerSource live rooms, those being allocated
// included (sources.go; admin and Go callers have no source).
//
// # Memory
//
// Every table but the rooms is bounded on its own (tombstones, pending
// allocations, per-source counts, event logs and queues, pages), so rooms
// are what fill the balancer's memory and a new room is what it refuses
// (memory.go). The budget is Options.MemoryBudget, else GOMEMLIMIT, else
// the cgroup's limit, else the machine's memory; an allocation that may
// make a room is refused while the heap the last collection found live is
// past 80% of a GOMEMLIMIT budget (the collector keeps the heap within
// GOMEMLIMIT), 40% of another (without it the heap may grow to twice the
// live heap). Relays' publications are never refused.
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
// (etag.go).
//
// A room list costs its page, not the fleet (state_pages.go): an
// unfiltered page seeks the room table's name index and walks it, a page
// filtered by relay merges the matching relays' indexes, its total is
// their counts, and its ETag hashes what the body says without encoding
// it (a 304 costs the walk). A route of a registration no longer current
// stays indexed until the cleanup tick and is passed over, as is a room of
// another phase; a page passes over at most pageSkipBudget of them and
// answers what it has, with next where it stopped. /list's page is a
// position in the index.
//
// GET /v1/events (events.go, eventdiff.go, events_stream.go) costs what
// it sends: while a stream is open, setLive logs every room whose route
// changed (its route before the first change and after the last), and a
// diff turns the log into room events against a view of the relays alone
// (instances, stats, the registrations current), reading a departed
// relay's unchanged rooms from its own index. The log and every stream's
// queue are bounded; past them streams are closed, and their consumers
// re-read the lists. Diffs are paced on the injected clock.
//
// # Files
//
// server.go (life cycle), conns.go, bootwatch.go, options.go, routes.go (mux and public reads),
// allocate.go, placement.go, internal.go (relay routes), internalauth.go
// (paced logs of relay calls with a wrong SECRET), state.go,
// state_relays.go, state_rooms.go, state_allocate.go, state_admit.go,
// state_views.go, state_pages.go, state_check.go, registry.go,
// relayrooms.go, rooms.go, nameindex.go, sources.go, tombstones.go,
// memory.go, bounds.go, health.go, relaycall.go, locate.go, migration.go,
// admin.go (the deploy tool's routes), adminauth.go, adminroute.go,
// adminsource.go, adminthrottle.go, admincors.go, etag.go, labels.go,
// history.go, v1_instances.go, v1_rooms.go, v1_reserve.go, v1_close.go,
// events.go, eventdiff.go, events_stream.go, metrics.go,
// metrics_bounds.go.
package balancer
