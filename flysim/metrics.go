package flysim

import "github.com/prometheus/client_golang/prometheus"

// metrics are the Sim's counters, registered on Options.Registerer (a
// private registry when nil, so two Sims never collide).
type metrics struct {
	apiRequests   *prometheus.CounterVec // action, code
	proxyRequests *prometheus.CounterVec // app, outcome
	machineExits  *prometheus.CounterVec // app, requested
	udpDatagrams  *prometheus.CounterVec // app, port (internal), direction
	udpDropped    *prometheus.CounterVec // app, port, reason
	udpFlows      *prometheus.GaugeVec   // app, port
	udpFlowEnds   *prometheus.CounterVec // app, port, reason
	udpSwitches   *prometheus.CounterVec // app, port
	netFaults     *prometheus.CounterVec // kind
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
		udpDatagrams: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_flysim_udp_datagrams_total",
			Help: "UDP datagrams passed on by app, internal port and direction (to_machine, to_client); those the kernel then refused are also in purrfly_flysim_udp_dropped_total{reason=\"send_error\"}.",
		}, []string{"app", "port", "direction"}),
		udpDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_flysim_udp_dropped_total",
			Help: "UDP datagrams dropped by app, internal port and reason (no_machine, no_dedicated_ipv4, foreign_source, flow_error, send_error, read_error).",
		}, []string{"app", "port", "reason"}),
		udpFlows: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "purrfly_flysim_udp_flows",
			Help: "UDP flows (client addresses with a socket of their own) open by app and internal port.",
		}, []string{"app", "port"}),
		udpFlowEnds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_flysim_udp_flow_ends_total",
			Help: "UDP flows ended by app, internal port and reason (idle, evicted).",
		}, []string{"app", "port", "reason"}),
		udpSwitches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_flysim_udp_serving_changes_total",
			Help: "Changes of the machine serving an app's UDP service (the first pick included).",
		}, []string{"app", "port"}),
		netFaults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "purrfly_flysim_net_faults_total",
			Help: "Network faults injected by kind (dns_stale, link_delay, link_drop, link_partition, heal).",
		}, []string{"kind"}),
	}
	for _, c := range []prometheus.Collector{m.apiRequests, m.proxyRequests, m.machineExits,
		m.udpDatagrams, m.udpDropped, m.udpFlows, m.udpFlowEnds, m.udpSwitches, m.netFaults} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
