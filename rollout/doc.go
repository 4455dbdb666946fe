// Package rollout deploys one image, and each app's fly.toml, to a purrfly
// fleet on Fly.io: the relay apps one machine at a time, then the
// balancer, then it proves the result. It is `purrctl rollout ENV` (Run)
// and `purrctl launch ENV` (Launch, which first creates what the fleet
// lacks). It talks to Fly only through fly-go's flaps client and to the
// fleet only through its public URLs (package client); it never imports
// the relay or the balancer.
//
// # Phases
//
//  1. Plan: check that the balancer app has its ADMIN_KEY secret, list
//     every machine of the environment's apps (fly/rollout.toml) and read
//     its live boot at /ping. Each app's wanted config is built from its
//     fly.toml (package flyconfig; appconfig.go) on the image. A started
//     machine whose config already has the image and every managed field
//     is verified, not redeployed; every other is replaced (relays,
//     overlap) or updated, and the changed fields are listed (never a
//     credential's value). A balancer app of more than one machine stops the
//     plan. --dry-run stops here: only reads were made.
//  2. Cleanup (overlap.go): what earlier runs left is put in order first:
//     stopped retired machines destroyed, running retiring ones retired
//     again or stopped, replacements adopted, retired or destroyed.
//  3. Relays, in the configured app order, one machine at a time (one
//     that does not answer goes first), each under its lease (lease.go).
//     By the overlap strategy (the default; overlap.go): create a
//     replacement with the whole new config (or adopt one an interrupted
//     run left), prove it (below), and only then retire the machine:
//     metadata first, then its relay (wire.PathRelayRetire, the exact
//     boot). It takes no room from then on, serves its games to their end
//     and exits by itself, retire_after at the latest. A replacement that
//     fails its proof is destroyed; the machine was never touched. A
//     machine that is down is updated in place. By the in-place strategy:
//     refuse if another relay is down, drain it at the balancer, wait for
//     its rooms to empty or the drain deadline, and update it. Either way
//     the new boot is proven: "started" at its version; a /ping boot other
//     than the old one, with the new image; the same boot for the minimum
//     healthy time, its /ready answering 200, its Fly checks passing, and
//     the balancer listing it live. Only then the next machine.
//  4. The balancer app, in place (no drain), proven by its own /ping; the
//     relays long-poll its boot and register with a new one at once.
//  5. Registration: wait until GET /v1/instances lists exactly the proven
//     relay boots, all live: no old boot left, none missing (retiring ones
//     may still be listed, marked so).
//  6. Smoke: client.Smoke (the code of `purrctl smoke`) through the
//     balancer's public URL once per relay region, pinned to the region.
//  7. Retiring (retiring.go): the relay machines still retiring, per app,
//     with their rooms and players and their latest stop, as events and
//     Result.Retiring; stopped ones are destroyed. With WaitRetired
//     (--wait-retired) it waits until each has stopped (a countdown per
//     machine), destroys it and reports what its latest stop closed.
//
// # Metadata (metadata.go)
//
// Machines carry Fly metadata saying which rollout created or retired them
// (purrfly_rollout), what they are (purrfly_role: replacement until its old
// machine retires, or retiring), which they replace or are replaced by,
// and a retiring machine's latest stop. So a run killed at any point is
// completed by a plain re-run: a half-proven replacement on the wanted
// image and config is adopted (proven, then its old machine retired),
// another is retired or destroyed, a retiring machine is found again;
// no machine is duplicated and none retires forever (Fly's lagging list
// included: the plan also reads the machines the listed ones' metadata
// names). An app's count (fly/rollout.toml) is its started machines on the
// current image: retiring machines are never capacity.
//
// # Launch
//
// Launch first reads every app of the environment: a name another
// organisation holds, or a token that cannot reach the organisation (an
// app-scoped deploy token), stops it before anything is made. Then it
// creates, balancer first, what each app lacks: the app, its public
// addresses (a dedicated IPv4 for a relay app serving UDP, shared IPv4 and
// IPv6 otherwise), its secrets, and machines up to the app's count, each
// from its toml; it waits with a countdown for a new app's name to resolve,
// and proves a new balancer up before any relay is created. Nothing
// existing is changed. Then it is Run on the same image.
//
// # Fly's eventual consistency and limits (machines.go, orgapi.go)
//
// Every create carries a key chosen before it is sent (purrfly_create), so
// a lost answer is looked up, never sent twice; a 404 for a machine just
// made is retried; a 429 waits its Retry-After; a machine's version is its
// instance_id.
//
// # Why never two relays are down at once
//
// One goroutine handles machines in sequence; a step ends only when its
// new boot is proven and registered, and a failure stops the rollout. The
// overlap strategy takes no relay down at all; in place, every other relay
// must answer /ping first, and a relay already down is deployed first.
//
// # Why the balancer goes last
//
// A new relay accepts the old balancer's registration answers, and a new
// balancer asks every current relay boot to republish its rooms. Relays
// first means the new balancer meets only new relays, and the exact-boot
// registration check proves that every one of them registered with it.
//
// # What the boot-ID proof proves
//
// "started" only says a process was spawned. A /ping answer through
// fly-force-instance-id with a new boot ID, the machine's ID and the new
// FLY_IMAGE_REF proves a new process of the new image answers on that
// machine; the same boot for the healthy time proves it did not restart;
// the balancer listing exactly those boots proves its routes belong to the
// new processes, not to a delayed heartbeat of an old one.
//
// # Failures
//
// A step past its deadline (Timeouts.Phase per machine, Wait for starting
// and proofs), a process that exits (a new boot whose process crashed is
// failed even when its restart policy, on-failure by Fly's default,
// started it again), a boot ID that never changes, an image
// that does not show up at /ping, a lease held by someone else
// (LeaseHeldError, after LeaseWait), a balancer that never lists a relay:
// the rollout stops at once and returns a *Failure with the phase, the
// machine, a one-line reason, what to do next and the fleet as it now is
// (machine, state, image, boot). Machines not reached were not touched
// (their leases were never taken). With Options.Rollback the failed
// machine gets its previous config back under the same lease and is
// verified the same way (new boot, previous image, healthy); by overlap
// the machine was never touched, its failed replacement destroyed, which
// is that rollback. Re-running converges: machines already on the image
// are verified, not redeployed.
//
// Every exit path undrains what it drained (unless the machine answers
// with another boot or the lease was lost), destroys a replacement it was
// proving, and releases its lease: on an error, on cancellation (Ctrl-C,
// SIGTERM: stopped at the next wait), on an output that cannot be written
// (StopOnWriteError; purrctl notices SIGPIPE) and on a panic in the
// rollout or an Observer, returned as a *PanicError in the Failure.
//
// # Output
//
// Events go to Options.Observer in order. Every wait emits a progress
// event (Event.Wait, Event.Until) each time it polls. LivePrinter (a
// terminal) rewrites each machine's line with a countdown; PlainPrinter
// (CI, a pipe) and JSONPrinter (--json, one event per line) write every
// state change and, of a wait, a line every ProgressEvery, never a line
// repeated. The printers read the events' times, not a clock.
//
// # Machines API manners
//
// Fly's documented rate per action and machine, backoff on 408, 429, 5xx
// and lost answers; a lost update is read back before it is sent again, so
// a retry never deploys twice. Every request has a deadline.
//
// Run is not safe for concurrent use on one fleet; the CI workflow
// serializes rollouts with one concurrency group, and leases fence a
// second tool.
package rollout
