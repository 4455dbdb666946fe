// Package balancer is purrfly's PurrBalancer: relays register with it, it
// places new rooms on them, answers joins and lists rooms. It speaks the
// public API of PROTOCOL.md section 3 to PurrNet clients and the internal
// protocol of wire/internal.go to relays; it never imports the relay.
//
// # State
//
// Everything lives in memory and is rebuilt from the relays after a restart
// (a relay that sees a new BalancerBoot republishes its rooms):
//
//   - registry: the current registration (relayEntry) of every relay
//     endpoint: its boot id, immutable routing metadata, a balancer-owned
//     liveness version bumped by every heartbeat, the last heartbeat, the
//     draining marks, and the aggregates (rooms, connections) of the routes
//     that point at it. Its RWMutex is held only for map and field work.
//   - roomTable: a sharded map of room names to roomEntry. An entry holds
//     the live route (an immutable roomRecord behind an atomic pointer:
//     owning registration, epoch, revision, connections, client credential,
//     allocation id), the tombstones of released incarnations with their
//     release time, and a pending allocation whose outcome is unknown.
//
// # Leases and gates
//
// Every change to one room happens under that room's lease (a one-slot
// channel per entry, so waiting honours a context). An allocation holds the
// lease across its call to the relay; nothing else is held across a network
// call. Readers (join, list, totals) never take a lease: they load the
// route's pointer and check that its registration is still current.
// Proofs of a relay's boot are serialized by a per-endpoint gate (one ping
// at a time per endpoint, none across endpoints), which exists only while
// a proof holds or awaits it. The order is always room lease, then the
// registry's short lock. What the registry remembers of an endpoint after
// its registration is gone (replaced boots, an admin drain mark) is
// forgotten once its last heartbeat is TombstoneRetention old, so machines
// that come and go (6PN addresses of a scaled app) leave nothing behind.
//
// # Registration (PathRegister)
//
//   - The endpoint's current boot: refreshed at once (liveness version
//     bumped, last heartbeat, self-reported draining). Changed host, region,
//     endpoint, ports or ssl: metadata_changed (also when the boot is
//     already registered at another endpoint).
//   - A new endpoint or a different boot: under the endpoint's gate, the
//     state is re-read, then GET {endpoint}/ping must report the incoming
//     boot. If so the registration is replaced and the answer is New and
//     Republish. If the ping reports the current boot, the incoming one is a
//     delayed heartbeat of a prior process: stale_boot; otherwise
//     boot_not_proven (retryable). Replaced boots are remembered per
//     endpoint, so their later heartbeats are stale_boot without a ping.
//   - Replacing a registration swaps one pointer: every route of the old
//     boot points at the old entry, so all of them vanish from join, list
//     and totals at that instant, and the old boot's delayed publications
//     are rejected. Orphaned routes are dropped on the cleanup tick.
//   - The registry holds at most Options.MaxRelays endpoints: a new one
//     past it is too_many_relays (a retryable 503) before its proof, and
//     again at install if others registered during the proof; registered
//     endpoints heartbeat and replace boots as ever.
//
// # Health
//
// Every HealthInterval each relay's (registration, liveness version) is
// captured, then its /ping is probed (HealthTimeout, at most 16 at once).
// HealthFailures (default 3) consecutive failed probes (no answer, not
// 200), one probe answered by another boot id, or a heartbeat older than
// max(RelayExpiry, 3 x the relay's reported HeartbeatSeconds) remove the
// relay, and only if the capture is still current: a heartbeat that
// arrived during the probe keeps it and, like a good probe, starts the
// failure count again (one lost probe must not make every room of a relay
// unjoinable until its next heartbeat). A removed relay's next
// heartbeat is New and Republish (after a fresh ping proof); its routes are
// invisible meanwhile and adopted again by its republication.
//
// # Publications (PathPublish): a compare-and-set on the room name
//
//   - not the endpoint's live boot (or not registered): rejected;
//   - that exact incarnation (boot, epoch) is tombstoned: fenced;
//   - a live route of the same boot and epoch: a newer revision updates the
//     count (applied), the same or an older one is current;
//   - a live route of another epoch or boot: conflict, unless the
//     publication's MovedFrom names exactly that incarnation and both
//     relays are machines of one app (same public host and port): a room
//     handed over to the machine its host reached (wire.PathHandover). The
//     old incarnation is tombstoned and the new one applied; the old
//     holder's removal, arriving before or after, changes nothing more;
//   - no live route (unknown, released, tombstone expired or another
//     epoch's tombstone, or a route of a replaced or removed registration):
//     the name is acquired (applied).
//
// A snapshot publication adds nothing else: rooms missing from it are not
// removed (a snapshot taken before an allocation committed would otherwise
// erase it); removals come only through the outbox.
//
// # Removals (PathUnregister): the relay's outbox
//
//   - the incarnation is already tombstoned: already;
//   - the live route is that boot's epoch: tombstoned, applied;
//   - another incarnation owns the name, or none is known: superseded (a
//     tombstone is still written, so a delayed publication stays fenced);
//   - the room's lease stayed busy for twice RelayTimeout: retry.
//
// Decision where the seed is silent: a removal carrying an older revision
// than the one held is applied, not retried. A removal is the relay's last
// word on one incarnation (boots and epochs are never reused), so no retry
// could ever carry a newer revision, and refusing it would leave a ghost
// route and an outbox entry that is never confirmed.
//
// Tombstones are keyed by (boot, epoch), since epochs are only promised to
// be new within one boot. They are kept for TombstoneRetention (at most 64
// per name, oldest first out) and deleted on the CleanupInterval tick after
// expiry is checked again under the room's lease. An expired tombstone no
// longer fences, and after its deletion a very late publication of that
// incarnation can be accepted if no newer route holds the name.
//
// # Allocation (POST /allocate_ws, legacy GET)
//
// Under the room's lease:
//
//   - a live route with the same allocation id: the relay is asked again
//     and replays; the same capability is answered;
//   - a live route with another allocation id: room_name_taken (409); so of
//     many concurrent allocations of one name exactly one wins. Except a
//     vacant route (its relay published Vacant: the host left): PurrNet
//     reuses one room name per scene with a fresh allocation_id on every
//     Play, so the allocation goes to that relay, which decides: with
//     nobody connected it takes the name over for a new incarnation (the
//     old one is tombstoned here as the relay is authoritative), else it
//     answers room_name_taken. A freshly allocated room whose host has not
//     connected is not vacant and stays reserved, and so does a room in a
//     host migration (the relay publishes Vacant only at generation 0);
//   - a pending allocation (see below): the same relay is asked, whatever
//     the allocation id: it replays, refuses another id, or creates the room;
//   - otherwise placement (see Placement below); up to three relays are
//     tried while a relay cannot be reached (the request was certainly not
//     written) or says it is draining or full. A legacy GET is placed only
//     on relays of the requested region when it has any that take rooms
//     (older PurrTransport versions connect the host to the relay they
//     pinged, ignoring the answer's host); other regions only when it has
//     none.
//
// The relay's answer must carry a valid capability (wire.Capability.Validate)
// and a publication of that name and allocation; anything less is a
// sanitized relay_bad_answer (502) that names nothing of the relay. A
// request written but not answered (timeout, connection lost), an answer
// from a boot other than the registered one, or a registration replaced
// during the call is allocation_outcome_indeterminate (503, retryable) and
// leaves a pending (allocation id, endpoint) on the name for five minutes,
// so the exact retry reaches the relay that may hold the room and replays.
// The publication is committed with the same compare-and-set as above, the
// relay's registered host is injected into the capability, and it is
// answered. If the relay answers an exact replay with a new epoch, the relay
// is authoritative: the old incarnation is tombstoned and the new one taken.
//
// The relay call carries name, region, allocation_id, the secret, the
// protocol version, ?s=<session hint>, wire.HeaderTargetBoot (the chosen
// boot: a relay of that boot creates the room on itself without asking its
// Router, since the balancer called its own endpoint directly), plus
// Idempotency-Key = allocation_id: the relay replays by it, so Go's
// transport may resend it on a fresh connection when a reused one turns
// out closed. A relay must not wait for its own
// publication of the room inside this call (the room's lease is held
// meanwhile); the balancer commits the publication from the answer.
// Every allocation in flight holds one keep-alive connection to its relay;
// the default client keeps up to 256 of them idle per relay afterwards, so
// a burst of allocations does not end in a new TCP connection per call.
//
// Legacy GET /allocate_ws gets a fresh allocation id per request.
//
// # Placement (placement.go)
//
// A new room goes to a relay that is registered, not draining, not full
// and carries every label the allocation requires. A relay reports its
// labels (RELAY_LABELS) and capacity (wire.Capacity: RELAY_MAX_ROOMS,
// RELAY_MAX_CONNECTIONS) in wire.RelayInfo; both are fixed for a boot and
// read from the registration without a lock. Full means at its maxRooms
// live routes or maxConnections published connections (the entry's
// aggregates); the relay enforces the same bounds and answers relay_full,
// which passes to the next candidate, since our counts lag its own by a
// publication. Among the relays that fit, the requested region's come
// first (case-insensitive; the others take the room when it has none),
// each group ordered by the strategy: least loaded (connections, then
// rooms; the default), most loaded, or random (Options.Rand), ties by
// endpoint. The strategy is Options.Placement (BALANCER_PLACEMENT) unless
// the allocation names one.
//
// An allocation asks for a placement with Placement (Region, Labels,
// Strategy) through Server.Allocate, the Go entry a matchmaker route
// calls, or with ?labels=k:v,k2:v2 and ?strategy= on /allocate_ws, which
// PurrNet's client never sends. When nothing fits, the answer counts the
// registered relays left out by their first reason (without the labels,
// draining, full with one relay's numbers): 409 no_candidate for an
// explicit placement, e.g. "3 relays: 1 without the labels, 1 draining,
// 1 full (rooms 50/50); labels asked: tier:pro", and PurrNet's 503
// no_relays with the same message otherwise ("no relay is registered",
// "every relay is draining"). Every relay tried refusing as full or
// draining is the same error ("the 2 relays tried refused the room: 2
// full"), not relay_unavailable. The reasons are counters filled under
// the registry's read lock, formatted only on failure: a placement
// allocates only its candidate slice, and takes no lock but that read
// lock.
//
// # Multi-machine relay apps
//
// Each machine of a relay app registers on its own: its own boot, machine
// id, region and Endpoint (its private address, which this balancer probes
// and calls directly), with the app's shared public host, port and
// wire.RelayInfo.PublicEndpoint. Placement treats the machines as separate
// relays (region, then the strategy), so a machine that joins takes new
// rooms at once, and the room's route records the machine (boot) that
// holds it. /servers lists such an app once per region, with the public
// endpoint as apiEndpoint, so clients ping the app. The machines ask
// wire.PathRoomLocation (GET ?name=, internal secret) where a room they do
// not hold lives: the route's boot, machine id, endpoint, public host and
// port, or room_not_found when no current registration holds it. A
// stopped machine unregisters its rooms; a failed one is removed by the
// health check with every route it held; either way /join, /list and the
// location route stop showing its rooms at once.
//
// # Other routes
//
// /join answers the room's client credential with its relay's host, port,
// udpPortV2 and ssl (room_not_found otherwise). /list pages count from 0,
// 50 rooms a page ordered by name, with the total; /getTotalConnections sums
// the live rooms' connections, as the original does. /servers lists the
// registered relays, one entry per public endpoint and region, but leaves
// a draining one out while a non-draining one serves its region (PurrTransport
// connects the host to the relay it pinged); a region whose relays all
// drain still lists them (they still serve their rooms).
//
// # Host migration
//
// /migration/current, /authorize, /claim and /activate are forwarded to
// the relay holding the room (migration.go has the design): the route
// snapshot in internal headers, mutating calls under the room's lease
// only, current optimistic and checked again, a lost answer to a change
// 503 migration_outcome_indeterminate, a malformed success a sanitized
// 502, the relay's own migration errors passed through.
// Every answer goes through wire.Common (no-store, CORS, preflight, body
// cap) and every error through wire.WriteError. /healthz and /readyz need
// no credential.
//
// # Admin API (/v1)
//
// The operator's read model and controls (README.md documents every route
// and shape; wire/fleet.go holds them). Every route is guarded by v1
// (adminroute.go): CORS only for Options.AdminCORSOrigins (admincors.go,
// which also answers /v1 preflights itself), a 64 KiB body cap, the
// failed-auth throttle of the source (adminsource.go: Fly-Client-IP, else
// X-Forwarded-For's first hop with TrustProxy, else the peer;
// adminthrottle.go: a token bucket per source in an LRU table of
// AuthThrottleSources, checked before the key so a throttled guess is never
// compared), then the admin key (adminauth.go: SHA-256 of the presented
// token compared in constant time with every configured key; ?key= only on
// the event stream with SSEQueryKey). GET /v1/instances and
// POST .../drain|undrain also take the shared SECRET: they are the deploy
// tool's. Keys appear in logs only as Fingerprint; POST and DELETE calls are
// audit-logged with the route, target, key fingerprint, source and outcome.
//
// Reads take no lease: the state's views (state_views.go) are built from
// registry.snapshot and the room table's live pointers (routes of current
// registrations only), and the list routes carry a weak ETag over those
// views without heartbeat timestamps (etag.go). POST /v1/rooms
// (v1_reserve.go) is state.allocate, the /allocate_ws path unchanged.
// DELETE /v1/rooms/{name} (state.closeRoom) holds the room's lease across one
// call to the relay (wire.PathRelayRoomClose, the route's epoch), and only
// once the relay answers tombstones the incarnation and drops the route,
// so the name is free here and there at once; the relay's own removal
// later finds the tombstone.
//
// GET /v1/events (events.go, eventdiff.go, events_stream.go): while a
// stream is open, the hub diffs a fleetView (instances, rooms, stats,
// without timestamps) on every change of a room's live route
// (roomEntry.setLive pokes it, without blocking, and only while a stream
// is open: no allocation wakes the hub for nothing) and every second (for
// heartbeats, removals and staleness), and fans the events out to bounded
// per-stream queues; a stream that falls behind is closed, Shutdown closes
// them all first. A diff views the whole fleet, so pokes are paced
// (eventMinInterval, eventMaxShare): while allocations keep coming they
// are diffed together at most every 100 ms, and the diffs take at most a
// tenth of a core. Pings and the pacing use the injected clock.
//
// # Code map: handlers, state, calls
//
// The HTTP Server decodes a request, calls one method of its state and
// encodes the answer (counting metrics by the outcome). The state type
// (state.go) owns the registry and the room table and every rule above:
// registration and health (state_relays.go), publications, removals and
// closes (state_rooms.go), allocation (state_allocate.go) and the views
// the API reads (state_views.go). It takes the leases, gates and locks
// itself and reaches relays only through relayClient (relaycall.go), the
// one place the balancer's internal calls are made. state_check.go's
// ConsistencyCheck verifies the invariants (registrations filed once, a
// live route's incarnation never tombstoned, per-relay room and
// connection counts equal to their routes) and runs after every balancer
// test.
//
// # Files
//
// server.go (life cycle), options.go, routes.go (mux and public reads),
// allocate.go, placement.go (Placement, strategies, why nothing fits),
// internal.go (relay routes), state*.go (the data's rules),
// registry.go (relays), rooms.go (room table and leases), health.go (health
// and cleanup loops), relaycall.go (calls to relays), locate.go (room
// location for multi-machine apps), migration.go (host migration),
// admin.go (the deploy tool's routes), adminauth.go, adminroute.go,
// adminsource.go, adminthrottle.go, admincors.go, etag.go, labels.go,
// v1_instances.go, v1_rooms.go, v1_reserve.go, v1_close.go, events.go,
// eventdiff.go, events_stream.go (the admin API), metrics.go.
package balancer
