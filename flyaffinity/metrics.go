package flyaffinity

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Route decisions, the values of the decision label.
const (
	decisionOwner    = "owner"    // this machine owns the session
	decisionHandoff  = "handoff"  // handed to the owner with Fly-Replay
	decisionOffFly   = "off_fly"  // Self is empty
	decisionNoHint   = "no_hint"  // the request carries no session
	decisionSingle   = "single"   // the set has at most one machine
	decisionNoSet    = "no_set"   // no machine set known in time
	decisionReplayed = "replayed" // already replayed once (Fly-Replay-Src): served here
)

// metrics are the Resolver's Prometheus collectors, with the Route decision
// counters resolved once so Route only increments.
type metrics struct {
	lookupsOK     prometheus.Counter
	lookupsFailed prometheus.Counter
	lookupSeconds prometheus.Histogram
	skipped       prometheus.Counter
	changes       prometheus.Counter
	machines      prometheus.Gauge

	owner, handoff, offFly, noHint, single, noSet, replayed prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	lookups := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "purrfly_flyaffinity_lookups_total",
		Help: "DNS lookups of the machine set by result (ok, error); on error the last good set is kept.",
	}, []string{"result"}))
	routes := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "purrfly_flyaffinity_route_decisions_total",
		Help: "Route decisions by kind: owner, handoff, off_fly, no_hint, single, no_set, replayed.",
	}, []string{"decision"}))
	m := &metrics{
		lookupsOK:     lookups.WithLabelValues("ok"),
		lookupsFailed: lookups.WithLabelValues("error"),
		lookupSeconds: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "purrfly_flyaffinity_lookup_duration_seconds",
			Help:    "Duration of DNS lookups of the machine set.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		})),
		skipped: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "purrfly_flyaffinity_skipped_entries_total",
			Help: "Malformed machine entries skipped in DNS answers.",
		})),
		changes: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "purrfly_flyaffinity_set_changes_total",
			Help: "Times the machine set changed.",
		})),
		machines: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "purrfly_flyaffinity_machines",
			Help: "Machines in the set ownership is computed over (this machine included).",
		})),
		owner:    routes.WithLabelValues(decisionOwner),
		handoff:  routes.WithLabelValues(decisionHandoff),
		offFly:   routes.WithLabelValues(decisionOffFly),
		noHint:   routes.WithLabelValues(decisionNoHint),
		single:   routes.WithLabelValues(decisionSingle),
		noSet:    routes.WithLabelValues(decisionNoSet),
		replayed: routes.WithLabelValues(decisionReplayed),
	}
	return m
}

// register registers c on reg, or returns the collector already registered
// under the same description, so several Resolvers may share one registry.
// Any other registration error is a programming error and panics.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("flyaffinity: failed to register metrics: %v", err))
	}
	return c
}
