package flysim

import "github.com/prometheus/client_golang/prometheus"

// metrics are the Sim's counters, registered on Options.Registerer (a
// private registry when nil, so two Sims never collide).
type metrics struct {
	apiRequests   *prometheus.CounterVec // action, code
	proxyRequests *prometheus.CounterVec // app, outcome
	machineExits  *prometheus.CounterVec // app, requested
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &metrics{
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_flysim_api_requests_total",
			Help: "Machines API requests by action and HTTP status code.",
		}, []string{"action", "code"}),
		proxyRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_flysim_proxy_requests_total",
			Help: "Proxy requests by app and outcome (ok, replayed, upgraded, replay_refused, no_machine, upstream_error).",
		}, []string{"app", "outcome"}),
		machineExits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_flysim_machine_exits_total",
			Help: "Machine process exits by app and whether a stop was requested.",
		}, []string{"app", "requested"}),
	}
	for _, c := range []prometheus.Collector{m.apiRequests, m.proxyRequests, m.machineExits} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
