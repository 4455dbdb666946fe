// Package rollout deploys one image, and each app's fly.toml, to a purrfly
// fleet on Fly.io: the relay apps one machine at a time, then the
// balancer, then it proves the result. It is the logic of `purrctl rollout
// ENV --image REF` (Run) and what CI runs on every release, and of
// `purrctl launch ENV` (Launch), which first creates what the fleet lacks. It talks to Fly only through fly-go's flaps client (the
// Machines API) and to the fleet only through its public URLs with the
// purrfly client package (/ping, the balancer's admin API, the smoke test)
// and the wire types client answers with; it never imports the relay or the
// balancer.
//
// # Phases
//
//  1. Plan: check that the balancer app has its ADMIN_KEY secret (it does
//     not start on Fly without one), list every machine of every app of the
//     environment (fly/rollout.toml) and read its live boot at /ping. Each
//     app's wanted config is built from its fly.toml (package flyconfig;
//     appconfig.go: one relay template, each app's name, region, URL-derived
//     env and own env) on the image. A machine whose config already has the
//     image and every managed field, and which is started, will be verified,
//     not redeployed; every other one replaced (relays, overlap) or updated,
//     and the changed fields are listed (never a credential's value). An
//     environment without tomls keeps each machine's config and changes
//     only the image. Relay machines that earlier runs left (metadata.go:
//     retiring ones, replacements) are sorted out (overlap.go). A balancer
//     app with more than one machine stops the plan. --dry-run stops here:
//     only reads were made.
//  2. Cleanup: what earlier runs left is put in order before anything is
//     touched: retired machines that stopped are destroyed; retiring ones
//     that run are retired again (a restarted process forgets it; their
//     latest stop is kept) or, past it, stopped; replacements whose old
//     machine retired become ordinary machines; any other replacement is
//     retired (it may hold games) or destroyed.
//  3. Relays, in the configured app order, one machine at a time; a relay
//     that does not answer at plan time goes first. For each machine:
//     acquire its lease (refreshed every third of its TTL; released on
//     success, failure and cancellation; a lease held by someone else is
//     announced and watched, and one nobody refreshes, left by a run that
//     was killed, is taken over when it expires); read its live boot ID at
//     /ping through the app's public URL with fly-force-instance-id. Then,
//     by the overlap strategy (the default; overlap.go): create a
//     replacement in the same app and region with the whole new config
//     (or adopt one an interrupted run left), prove it exactly as an
//     updated machine is proven (below), and only then retire the machine:
//     metadata first, then its relay (wire.PathRelayRetire, the exact boot,
//     through the app's URL with fly-force-instance-id and the SECRET). It
//     takes no room from then on, serves its games to their end and exits
//     by itself, retire_after at the latest. A replacement that fails its
//     proof is destroyed; the machine was never touched. A machine that
//     is down is updated in place (nothing to interrupt). By the in-place
//     strategy: refuse if another relay is down; drain it at the balancer
//     (POST /v1/instances/{boot}/drain: no new rooms) and wait until its
//     rooms are empty or the drain deadline passes, reporting the rooms and
//     connections the update interrupts; update it with its full config and
//     the new image under the lease nonce. Either way the new boot is
//     proven: wait for "started" at its version; poll /ping until a boot
//     other than the old one reports the new image; keep polling for the
//     minimum healthy time (same boot throughout, then the relay's /ready
//     answering 200, else the reason it gives, the machine's Fly checks
//     passing and the boot registered live with the balancer, which lists
//     a relay live only once players can reach it). Only then the next
//     machine.
//  4. The balancer app, in place (no drain), proven by its own /ping. Its
//     state is rebuilt from the relays, which register with a new balancer
//     boot within about a second of it answering (they long-poll its boot).
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
// no machine is duplicated and none retires forever. An app's count
// (fly/rollout.toml) is its started machines on the current image:
// retiring machines are never capacity.
//
// # Launch
//
// Launch creates, balancer first, what each app lacks: the app, its
// public addresses (a dedicated IPv4 alone for a relay app serving UDP,
// shared IPv4 and IPv6 otherwise), its secrets (SECRET; ADMIN_KEY on the
// balancer), and machines up to the app's count in its region, each from
// its toml, at the secrets version it just set. A new balancer is proven
// up before any relay is created. Creates are sent once and read back
// after a failure, so a re-run creates only what is still missing; nothing
// existing is changed or removed. Then it is Run on the same image, which
// verifies every machine, the registration and the smoke test.
//
// # Why never two relays are down at once
//
// Machines are handled strictly in sequence by one goroutine, and a step
// ends only when its new boot has been proven live and healthy for the
// minimum healthy time and registered; a machine that fails stops the whole
// rollout, so no later machine is touched while an earlier one is down.
// The overlap strategy takes no relay down at all: the old machine serves
// until its replacement is proven. In place, before taking a relay down,
// every other relay must answer /ping; a relay already down is deployed
// first, so updating it cannot add a second one.
//
// # Why the balancer goes last
//
// Relay and balancer are one protocol pair and the seed orders the deploy:
// a new relay accepts the old balancer's registration answers, while a new
// balancer asks every current relay boot to republish its rooms. Deploying
// relays first means the new balancer, when it starts, meets only new
// relays, and the exact-boot registration check afterwards proves that
// every one of them re-registered with it.
//
// # What the boot-ID proof proves
//
// "started" from the Machines API only says a process was spawned. A /ping
// answer through fly-force-instance-id that carries a boot ID other than
// the one read before the update, the machine's ID, and FLY_IMAGE_REF equal
// to the new image proves that a new process of the new image is the one
// answering on that machine, not the old process still shutting down nor a
// sibling machine behind the proxy. Seeing the same boot for the whole
// healthy time proves it did not crash and restart; the balancer listing
// exactly those boots proves the registrations the balancer routes rooms by
// belong to the new processes, not to a delayed heartbeat of an old one.
//
// # Failures
//
// A step past its deadline (Timeouts.Phase per machine, Wait for starting
// and proofs), a process that exits, a boot ID that never changes, an image
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
// Every exit path undrains, destroys a replacement it was proving, and
// releases. A relay step that fails after its drain gives the old boot back (POST /v1/instances/{boot}/undrain)
// before releasing the lease, unless the machine now answers with another
// boot or the lease was lost; what it did is an event. Cancelling the
// context (Ctrl-C, SIGTERM) stops at the next wait, the same way; its
// cause is said once. So does an output that cannot be written: a printer
// writing through StopOnWriteError cancels the run at its first failed
// write (stdout piped into a reader that went away: EPIPE), and purrctl
// notices SIGPIPE so that such a write fails instead of killing the
// process with its lease held. A panic on the rollout's goroutine, in the
// rollout or in an Observer, is caught in the step, which then undrains
// and releases as for an error, and returned as a *PanicError (with its
// stack) in the Failure; an Observer that panicked is not called again.
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
// At most one request a second per action and machine (burst 3), as Fly
// documents; 408, 429, 5xx and lost answers are retried with doubling
// backoff. An update whose answer was lost is never simply sent again: the
// machine is read back first, and a new version with the image counts as
// the answer, so a retry never deploys twice. Every request has a deadline;
// flaps' AcquireLease (which retries for up to a minute) gets LeaseWait.
//
// Run is not safe for concurrent use on one fleet; the CI workflow
// serializes rollouts with one concurrency group, and leases fence a
// second tool.
package rollout
