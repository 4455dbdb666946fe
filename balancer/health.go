package balancer

import (
	"context"

	"github.com/purrfly/purrfly/internal/clock"
)

// healthLoop runs a health round (state.checkRelays) each HealthInterval
// until ctx ends.
func (s *Server) healthLoop(ctx context.Context) {
	clock.Every(ctx, s.clock, s.opts.HealthInterval, func() { s.st.checkRelays(ctx, s.relayRemoved) })
}

// relayRemoved counts and logs a removal.
func (s *Server) relayRemoved(snap relaySnap, reason string) {
	s.metrics.relayRemovals.WithLabelValues(reason).Inc()
	s.log.Warn("relay removed", "endpoint", snap.entry.info.Endpoint, "boot", snap.entry.info.BootID, "reason", reason)
}

// cleanupLoop runs state.cleanup each CleanupInterval until ctx ends.
func (s *Server) cleanupLoop(ctx context.Context) {
	clock.Every(ctx, s.clock, s.opts.CleanupInterval, s.st.cleanup)
}
