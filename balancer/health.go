package balancer

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/purrfly/purrfly/internal/clock"
)

// maxParallelProbes bounds the health probes in flight at once.
const maxParallelProbes = 16

// healthLoop probes every relay each HealthInterval until ctx ends.
func (s *Server) healthLoop(ctx context.Context) {
	clock.Every(ctx, s.clock, s.opts.HealthInterval, func() { s.checkRelays(ctx) })
}

// checkRelays runs one health round. Each relay's (registration, liveness
// version) is captured before its probe. HealthFailures consecutive failed
// probes (no answer, not 200), a probe answered by another boot id, or an
// expired heartbeat (max(RelayExpiry, 3 x its reported heartbeat interval))
// remove the relay, and only if that capture is still current, so a
// heartbeat that arrived meanwhile (which bumps the liveness version and
// starts the failure count again) keeps it. A good probe starts the count
// again too. Removal invalidates the relay's
// routes at once; its next heartbeat is answered New and Republish.
func (s *Server) checkRelays(ctx context.Context) {
	var g errgroup.Group
	g.SetLimit(maxParallelProbes)
	now := s.clock.Now()
	for _, snap := range s.reg.snapshot() {
		if now.Sub(snap.lastHeartbeat) > max(s.opts.RelayExpiry, snap.expiry) {
			s.removeRelay(snap, "expired")
			continue
		}
		g.Go(func() error {
			boot, err := s.probe(ctx, snap.entry.info.Endpoint, s.opts.HealthTimeout)
			if ctx.Err() != nil {
				return nil // shutting down: a cut probe proves nothing
			}
			switch {
			case err != nil:
				if s.reg.probeFailed(snap, s.opts.HealthFailures) {
					s.relayRemoved(snap, "probe_failed")
				}
			case boot != snap.entry.info.BootID:
				s.removeRelay(snap, "boot_changed") // another process answers there: at once
			default:
				s.reg.probeOK(snap)
			}
			return nil
		})
	}
	_ = g.Wait()
}

func (s *Server) removeRelay(snap relaySnap, reason string) {
	if s.reg.removeIf(snap) {
		s.relayRemoved(snap, reason)
	}
}

// relayRemoved counts and logs a removal.
func (s *Server) relayRemoved(snap relaySnap, reason string) {
	s.metrics.relayRemovals.WithLabelValues(reason).Inc()
	s.log.Warn("relay removed", "endpoint", snap.entry.info.Endpoint, "boot", snap.entry.info.BootID, "reason", reason)
}

// cleanupLoop runs cleanup each CleanupInterval until ctx ends.
func (s *Server) cleanupLoop(ctx context.Context) {
	clock.Every(ctx, s.clock, s.opts.CleanupInterval, s.cleanup)
}

// cleanup deletes, under each room's lease, the tombstones older than
// TombstoneRetention (rechecked under the lease), routes whose registration
// was replaced or removed, and expired pending allocations; an entry left
// empty leaves the table. A room whose lease is busy waits for the next tick.
func (s *Server) cleanup() {
	s.rooms.each(func(e *roomEntry) {
		if !s.rooms.tryAcquire(e) {
			return
		}
		now := s.clock.Now()
		for k, at := range e.fences {
			if now.Sub(at) >= s.opts.TombstoneRetention {
				delete(e.fences, k)
			}
		}
		if rec := e.live.Load(); rec != nil && !s.reg.isCurrent(rec.relay) {
			e.setLive(nil)
		}
		if p := e.pending; p != nil && now.Sub(p.since) >= pendingRetention {
			e.pending = nil
		}
		s.rooms.release(e)
	})
	s.reg.prune(s.clock.Now(), s.opts.TombstoneRetention)
}
