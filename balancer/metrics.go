package balancer

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the purrfly_balancer_* series. Static after New.
type metrics struct {
	allocations   *prometheus.CounterVec   // by result (wire error code or "ok")
	migrations    *prometheus.CounterVec   // by op and result
	registrations *prometheus.CounterVec   // by result
	publications  *prometheus.CounterVec   // by status
	removals      *prometheus.CounterVec   // by status
	relayRemovals *prometheus.CounterVec   // by reason
	relayCall     *prometheus.HistogramVec // by op

	// Children of the per-allocation series, resolved once (a label lookup
	// hashes the values on every call).
	allocationsOK prometheus.Counter
	relayAllocate prometheus.Observer
	relayPing     prometheus.Observer

	// The /v1 admin API.
	adminAuthFailures prometheus.Counter // failed authentications (throttled ones not counted)
	// adminRequests counts authenticated /v1 requests by credential
	// ("admin#<fingerprint>" of each configured key, "secret"): one child
	// per credential, made here so each shows from 0 and a request is a
	// map read. The map is static after newMetrics.
	adminRequests map[credential]prometheus.Counter
	// Calls refused for a wrong SECRET (internal routes, public /metrics).
	internalAuthFailures prometheus.Counter
	eventDrops           prometheus.Counter // event streams closed for falling behind
}

func newMetrics(reg prometheus.Registerer, s *Server) (*metrics, error) {
	m := &metrics{
		allocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_balancer_allocations_total",
			Help: "Room allocations answered, by result.",
		}, []string{"result"}),
		migrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_balancer_migration_requests_total",
			Help: "Host migration calls answered, by operation and result (ok, or the error code).",
		}, []string{"op", "result"}),
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_balancer_registrations_total",
			Help: "Relay heartbeats answered, by result.",
		}, []string{"result"}),
		publications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_balancer_publications_total",
			Help: "Room publications judged, by status.",
		}, []string{"status"}),
		removals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_balancer_removals_total",
			Help: "Room removals (unregister outbox entries) judged, by status.",
		}, []string{"status"}),
		relayRemovals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_balancer_relay_removals_total",
			Help: "Relays removed, by reason.",
		}, []string{"reason"}),
		relayCall: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "purrfly_balancer_relay_call_duration_seconds",
			Help:    "Duration of calls to relays, by operation.",
			Buckets: prometheus.DefBuckets,
		}, []string{"op"}),
	}
	m.adminAuthFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "purrfly_balancer_admin_auth_failures_total",
		Help: "Failed authentications on the /v1 admin API.",
	})
	// Label values are the credentials the logs name (never key material),
	// one per configured key plus the shared SECRET: bounded by the
	// configuration, not by what callers send.
	adminRequests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "purrfly_balancer_admin_requests_total",
		Help: "Authenticated /v1 admin API requests, by credential: admin#<fingerprint> of the ADMIN_KEY used (the first 8 hex digits of its SHA-256, as the logs name it), or secret (the shared SECRET on the deploy tool's routes).",
	}, []string{"key"})
	m.adminRequests = make(map[credential]prometheus.Counter, len(s.adminKeys.fps)+1)
	for _, c := range append(s.adminKeys.credentials(), credSecret) {
		m.adminRequests[c] = adminRequests.WithLabelValues(string(c))
	}
	m.internalAuthFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "purrfly_balancer_internal_auth_failures_total",
		Help: "Calls refused for a wrong SECRET: relays' (registration, publication, migration) and /metrics from the internet.",
	})
	m.eventDrops = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "purrfly_balancer_event_streams_dropped_total",
		Help: "GET /v1/events streams closed because they fell behind.",
	})
	streams := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "purrfly_balancer_event_streams",
		Help: "GET /v1/events streams open.",
	}, func() float64 { return float64(s.events.streams()) })
	diffs := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "purrfly_balancer_event_diffs_total",
		Help: "Diffs of the whole fleet for GET /v1/events streams (pokes are paced: at most ten a second, and at most a tenth of a core).",
	}, func() float64 { return s.events.diffCount() })
	m.allocationsOK = m.allocations.WithLabelValues("ok")
	m.relayAllocate = m.relayCall.WithLabelValues("allocate")
	m.relayPing = m.relayCall.WithLabelValues("ping")
	relays := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "purrfly_balancer_relays",
		Help: "Relays currently registered.",
	}, func() float64 { n, _, _ := s.st.totals(); return float64(n) })
	rooms := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "purrfly_balancer_rooms",
		Help: "Live room routes on registered relays.",
	}, func() float64 {
		_, n, _ := s.st.totals()
		return float64(n)
	})
	for _, c := range []prometheus.Collector{m.allocations, m.migrations, m.registrations, m.publications, m.removals, m.relayRemovals, m.relayCall, relays, rooms,
		m.adminAuthFailures, adminRequests, m.internalAuthFailures, m.eventDrops, streams, diffs} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("failed to register the balancer metrics: %w", err)
		}
	}
	if err := registerBoundsMetrics(reg, s); err != nil {
		return nil, err
	}
	return m, nil
}
