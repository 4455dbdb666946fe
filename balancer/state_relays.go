package balancer

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/purrfly/purrfly/wire"
)

// The rules of relay registrations: heartbeats and boot proofs, health
// rounds, admin drain marks, and the cleanup tick (package doc:
// Registration and health; Publications, removals and tombstones).

// registered is what one heartbeat did: outcome is "heartbeat" (the
// current boot, refreshed), "new" or "replaced" (a proven boot installed);
// replaced is the boot it replaced.
type registered struct {
	liveness uint64
	outcome  string
	replaced string
}

// register applies a heartbeat. The current boot is refreshed at once. A new
// endpoint or a different boot is accepted only after the endpoint's own
// /ping reports that boot; proofs of one endpoint are serialized by its gate
// and the state is re-read once the gate is held. Accepting a different
// boot replaces the registration, which invalidates every route of the old
// boot in one step.
func (st *state) register(ctx context.Context, req wire.RegisterRequest) (registered, error) {
	endpoint, boot := req.Relay.Endpoint, req.Relay.BootID
	v, out, err := st.reg.refresh(req, st.clock.Now())
	if err != nil {
		return registered{}, err
	}
	if out == hbRefreshed {
		return registered{liveness: v, outcome: "heartbeat"}, nil
	}
	release, err := st.reg.acquireGate(ctx, endpoint)
	if err != nil {
		return registered{}, wire.ErrBootNotProven
	}
	defer release()
	if v, out, err = st.reg.refresh(req, st.clock.Now()); err != nil {
		return registered{}, err
	} else if out == hbRefreshed { // proven by a concurrent heartbeat
		return registered{liveness: v, outcome: "heartbeat"}, nil
	}
	live, err := st.relays.probe(ctx, endpoint, st.opts.RelayTimeout)
	if err != nil {
		st.log.Info("relay boot not proven", "endpoint", endpoint, "boot", boot, "err", err)
		return registered{}, wire.ErrBootNotProven
	}
	if live != boot {
		if cur := st.reg.current(endpoint); (cur != nil && cur.info.BootID == live) || st.reg.isRetired(endpoint, boot) {
			return registered{}, wire.ErrStaleBoot
		}
		return registered{}, wire.ErrBootNotProven
	}
	v, replaced, err := st.reg.install(req, st.clock.Now())
	if err != nil {
		return registered{}, err
	}
	if replaced != "" {
		st.log.Info("relay boot replaced", "endpoint", endpoint, "boot", boot, "old_boot", replaced)
		return registered{liveness: v, outcome: "replaced", replaced: replaced}, nil
	}
	st.log.Info("relay registered", "endpoint", endpoint, "boot", boot, "region", req.Relay.Region,
		"admin_drained", st.reg.isDrained(endpoint, boot))
	return registered{liveness: v, outcome: "new"}, nil
}

// maxParallelProbes bounds the health probes in flight at once.
const maxParallelProbes = 16

// checkRelays runs one health round. Each relay's (registration, liveness
// version) is captured before its probe. HealthFailures consecutive failed
// probes (no answer, not 200), a probe answered by another boot id, or an
// expired heartbeat (max(RelayExpiry, 3 x its reported heartbeat interval))
// remove the relay, and only if that capture is still current, so a
// heartbeat that arrived meanwhile (which bumps the liveness version and
// starts the failure count again) keeps it. A good probe starts the count
// again too. Removal invalidates the relay's routes at once; its next
// heartbeat is answered New and Republish. removed is told of each
// removal and why (expired, probe_failed, boot_changed).
func (st *state) checkRelays(ctx context.Context, removed func(relaySnap, string)) {
	var g errgroup.Group
	g.SetLimit(maxParallelProbes)
	now := st.clock.Now()
	remove := func(snap relaySnap, reason string) {
		if st.reg.removeIf(snap) {
			removed(snap, reason)
		}
	}
	for _, snap := range st.reg.snapshot() {
		if now.Sub(snap.lastHeartbeat) > max(st.opts.RelayExpiry, snap.expiry) {
			remove(snap, "expired")
			continue
		}
		g.Go(func() error {
			boot, err := st.relays.probe(ctx, snap.entry.info.Endpoint, st.opts.HealthTimeout)
			if ctx.Err() != nil {
				return nil // shutting down: a cut probe proves nothing
			}
			switch {
			case err != nil:
				if st.reg.probeFailed(snap, st.opts.HealthFailures) {
					removed(snap, "probe_failed")
				}
			case boot != snap.entry.info.BootID:
				remove(snap, "boot_changed") // another process answers there: at once
			default:
				st.reg.probeOK(snap)
			}
			return nil
		})
	}
	_ = g.Wait()
}

// setDrain sets (on) or ends the admin drain of the relay whose boot id or
// machine id is id: instance_not_found when none is registered. The mark
// survives the relay's removal and return within the same boot, and ends
// with the boot.
func (st *state) setDrain(id string, on bool) (relaySnap, error) {
	sn, ok := st.reg.setAdminDrain(id, on)
	if !ok {
		return relaySnap{}, wire.ErrInstanceNotFound
	}
	what := "relay drained by admin"
	if !on {
		what = "relay undrained by admin"
	}
	st.log.Info(what, "endpoint", sn.entry.info.Endpoint, "boot", sn.entry.info.BootID)
	return sn, nil
}

// findInstance is the registered relay whose boot id or machine id is id.
func (st *state) findInstance(id string) (relaySnap, error) {
	if id == "" || len(id) > maxIDLen {
		return relaySnap{}, wire.ErrBadRequest.WithMessage("instance id is missing or too long")
	}
	snaps := st.reg.snapshot()
	for _, sn := range snaps {
		if sn.entry.info.BootID == id {
			return sn, nil
		}
	}
	for _, sn := range snaps {
		if m := sn.entry.info.MachineID; m != "" && m == id {
			return sn, nil
		}
	}
	return relaySnap{}, wire.ErrInstanceNotFound
}

// cleanup deletes the tombstones older than TombstoneRetention (under the
// tombstones' lock, which is what orders their writes and reads), then,
// under each room's lease, routes whose registration was replaced or
// removed and expired pending allocations; an entry left empty leaves the
// table. A room whose lease is busy waits for the next tick. Then the
// registry forgets endpoints gone for TombstoneRetention.
func (st *state) cleanup() {
	st.tombs.expire(st.clock.Now())
	st.rooms.each(func(e *roomEntry) {
		if !st.rooms.tryAcquire(e) {
			return
		}
		now := st.clock.Now()
		if rec := e.live.Load(); rec != nil && !st.reg.isCurrent(rec.relay) {
			e.setLive(nil)
		}
		if p := e.pending; p != nil && now.Sub(p.since) >= pendingRetention {
			st.rooms.setPending(e, nil)
		}
		st.rooms.release(e)
	})
	st.reg.prune(st.clock.Now(), st.opts.TombstoneRetention)
}
