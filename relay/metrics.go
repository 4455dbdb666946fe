package relay

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// serverMetrics holds the server's collectors (the core, the mesh and the
// UDP transport register their own), on the Options.Metrics registerer.
type serverMetrics struct {
	allocations     *prometheus.CounterVec // {result}
	migrations      *prometheus.CounterVec // {op,result}
	refusedUpgrades prometheus.Counter     // WebSocket upgrades past the bound on unauthenticated connections
	balancerReqs    *prometheus.CounterVec // {op,result}
	publications    *prometheus.CounterVec // {status}
	removals        *prometheus.CounterVec // {status}
	outbox          prometheus.Gauge
	// batches counts the writers' batches (one system call per 32 KiB).
	batches prometheus.Counter
}

func newServerMetrics(reg prometheus.Registerer) (*serverMetrics, error) {
	m := &serverMetrics{}
	m.allocations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "purrfly_relay_allocations_total",
		Help: "Room allocation requests, by result.",
	}, []string{"result"})
	m.migrations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "purrfly_relay_migration_requests_total",
		Help: "Host migration calls, by operation and result (ok, or the error code).",
	}, []string{"op", "result"})
	m.refusedUpgrades = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "purrfly_relay_refused_upgrades_total",
		Help: "WebSocket upgrades refused: too many connections waiting to authenticate (in all or from one source).",
	})
	m.balancerReqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "purrfly_relay_balancer_requests_total",
		Help: "Requests to the balancer, by operation and result.",
	}, []string{"op", "result"})
	m.publications = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "purrfly_relay_publications_total",
		Help: "Room publications answered by the balancer, by status.",
	}, []string{"status"})
	m.removals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "purrfly_relay_unregisters_total",
		Help: "Outbox removals answered by the balancer, by status.",
	}, []string{"status"})
	m.outbox = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "purrfly_relay_unregister_outbox_entries",
		Help: "Removed rooms not yet confirmed by the balancer.",
	})
	m.batches = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "purrfly_relay_write_batches_total",
		Help: "Batches of queued frames written by connection writers (WebSocket: one system call per 32 KiB).",
	})
	for _, c := range []prometheus.Collector{m.allocations, m.migrations, m.refusedUpgrades,
		m.balancerReqs, m.publications, m.removals, m.outbox, m.batches} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("failed to register relay metrics: %w", err)
		}
	}
	return m, nil
}
