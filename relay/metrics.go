package relay

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// serverMetrics holds the server's collectors (the core, the transports
// and the mesh register their own), on the Options.Metrics registerer.
type serverMetrics struct {
	allocations  *prometheus.CounterVec // {result}
	migrations   *prometheus.CounterVec // {op,result}
	balancerReqs *prometheus.CounterVec // {op,result}
	publications *prometheus.CounterVec // {status}
	removals     *prometheus.CounterVec // {status}
	outbox       prometheus.Gauge
	authFailures prometheus.Counter // calls refused for a wrong SECRET
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
	m.authFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "purrfly_relay_internal_auth_failures_total",
		Help: "Calls refused for a wrong SECRET: the balancer's and the app's other machines' (allocation, migration, forwarding) and /metrics from the internet.",
	})
	for _, c := range []prometheus.Collector{m.allocations, m.migrations,
		m.balancerReqs, m.publications, m.removals, m.outbox, m.authFailures} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("failed to register relay metrics: %w", err)
		}
	}
	return m, nil
}
