// Package flyaffinity routes relay connections so that all of a session's
// connections reach one Fly machine: the sessions are split among the
// machines, and each machine's relay keeps its own sessions in memory as
// the only copy, so a relay app can run several machines with no shared
// storage.
//
//	aff := flyaffinity.New(os.Getenv("FLY_APP_NAME"), os.Getenv("FLY_MACHINE_ID"), 5*time.Second)
//	defer aff.Close()
//	opts.Router = aff.Route // opts is the relay.Options
//
// # Ownership: rendezvous (HRW) hashing
//
// The owner of a session is the machine with the highest weight
// mix(xxhash(session) XOR xxhash(machine id)), where mix is the splitmix64
// finalizer (Thaler and Ravishankar's highest-random-weight hashing, in its
// fast form). The hash is xxhash64 with no seed, so every machine computes the
// same owner from the same machine set without talking to the others. A
// machine id's hash is computed once, when the set changes; a lookup hashes
// the key once and then costs one xor, two multiplies and a compare per
// machine. Equal weights (practically never) go to the smaller machine id.
// When a machine joins or leaves a set of N, only the sessions it wins or
// held move, about 1/N of them, where modulo hashing would move nearly all.
//
// # Discovery and caching
//
// The machine set is the TXT record vms.<app>.internal on Fly's internal DNS
// resolver ([fdaa::3]:53 by default), whose value lists the started machines
// as "<id> <region>" pairs separated by commas. A long value may arrive split
// into several strings; they are joined before parsing. Entries that are not
// exactly an id and a region made of letters, digits and '-' are skipped (and
// logged). The query goes out over UDP with EDNS0 (4096 bytes) and is retried
// over TCP when the answer is truncated.
//
// The parsed set is an immutable value behind an atomic pointer and is cached
// for Config.TTL. Readers never lock: Route loads the pointer, checks the
// entry's "due" flag and hashes. The flag is flipped by the clock's AfterFunc
// (a runtime timer on the wall clock, Advance on a clock.Fake) when the TTL
// passes, because reading the clock on every call would cost more than the
// hashing itself on virtual machines without a fast TSC (about 30 ns on the
// benchmark machine). When the set is due, the first caller starts one
// lookup that every concurrent caller shares (singleflight); the lookup is
// bounded by Config.LookupTimeout and is cancelled by Close.
//
// # Failure behaviour
//
//   - A failed lookup (timeout, refused, SERVFAIL, NXDOMAIN, no usable entry)
//     keeps the last good set, logs a warning saying so (retries that fail
//     again log at debug level) and counts
//     purrfly_flyaffinity_lookups_total{result="error"}. The kept set is used
//     for another retry interval (the smaller of TTL and one second) before
//     the next lookup is tried, so an outage never makes callers wait on
//     every request.
//   - Route never waits on DNS longer than Config.RouteWait (250 ms by
//     default). When the set has expired it waits at most that long for the
//     fresh one and otherwise routes with the stale set; when no set was ever
//     obtained it serves the request here. The lookup keeps running in the
//     background (bounded by LookupTimeout) and its answer serves the next
//     call.
//   - Owner and Peers wait for a due lookup as long as their context allows;
//     when it fails they answer from the last good set, and return an error
//     (ErrNoMachines) only when no set was ever obtained.
//
// # Route decisions
//
// Route serves the request on this machine when: this machine is off Fly
// (Self empty); the request carries no session hint; the set has at most one
// machine; no set could be obtained in time; this machine owns the session;
// or the request was already replayed once (it carries Fly-Replay-Src), so a
// request replayed while two machines briefly disagree about the set is
// served where it landed instead of bouncing (one hop only, never a loop).
// Otherwise it returns the owner's machine id, and the relay answers
// "Fly-Replay: instance=<id>" without upgrading.
//
// # A machine that just booted
//
// A machine can start serving before Fly's DNS lists it. Its set is then the
// DNS set plus itself: it computes owners over the set it is about to be part
// of, serves the sessions it will own once DNS catches up and hands every
// other session to its owner. Machines that already appear in DNS do not yet
// know the newcomer, so for up to one TTL they still send the newcomer's
// future sessions to their previous owners; those owners serve them (they own
// them in their view), and a request they replay to the newcomer is served
// there because of the one-hop rule. No request loops and no request is
// refused; a session's connections can be split across two machines for at
// most one TTL while the fleet changes, which is inherent to any
// coordination-free scheme.
//
// # Metrics
//
// Registered on Config.Metrics: purrfly_flyaffinity_lookups_total{result},
// purrfly_flyaffinity_lookup_duration_seconds,
// purrfly_flyaffinity_skipped_entries_total,
// purrfly_flyaffinity_set_changes_total, purrfly_flyaffinity_machines and
// purrfly_flyaffinity_route_decisions_total{decision} (owner, handoff,
// off_fly, no_hint, single, no_set, replayed). Several Resolvers may share a
// registry; they then share the collectors.
//
// # Goroutines and concurrency
//
// All methods may be called concurrently. The Resolver runs no background
// loop: a lookup runs only when a caller needs the set (in a goroutine
// started by singleflight, so a caller may stop waiting while the lookup
// finishes for the next one), and the expiry timer only sets a flag. Close
// cancels a lookup in flight, waits for it and stops the timer; after Close,
// Route keeps answering from the last set and no new lookup starts. A
// Resolver that is dropped without Close leaves nothing running once its
// last lookup ends (at most LookupTimeout) and its timer fires (at most TTL).
package flyaffinity
