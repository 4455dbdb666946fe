package udptransport

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/purrfly/purrfly/litenet"
)

// metrics are purrfly_relay_udp_* (purrfly_relay_udp1_* for the 1.x
// transport): litenet's counters read at scrape time, plus the
// transport's own.
type metrics struct {
	upgraded prometheus.Counter // reliable frames too long for their method, sent ReliableOrdered
	early    prometheus.Counter // frames that waited for a routed authentication

	registered []prometheus.Collector // static after Listen: what it registered
}

func newMetrics(reg prometheus.Registerer, v litenet.Version, stats func() litenet.Stats) (*metrics, error) {
	prefix := "purrfly_relay_udp_"
	if v == litenet.V1 {
		prefix = "purrfly_relay_udp1_"
	}
	m := &metrics{}
	stat := func(name, help string, f func(litenet.Stats) uint64) prometheus.Collector {
		name = prefix + strings.TrimPrefix(name, "purrfly_relay_udp_")
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(stats())) })
	}
	gauge := func(name, help string, f func(litenet.Stats) int) prometheus.Collector {
		name = prefix + strings.TrimPrefix(name, "purrfly_relay_udp_")
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return float64(f(stats())) })
	}
	m.upgraded = prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "upgraded_total",
		Help: "Reliable frames too long for their delivery method, sent ReliableOrdered instead."})
	m.early = prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "early_total",
		Help: "Frames a UDP peer sent while its authentication was being routed to another machine."})
	cs := []prometheus.Collector{m.upgraded, m.early,
		stat("purrfly_relay_udp_datagrams_received_total", "UDP datagrams received.", func(s litenet.Stats) uint64 { return s.Datagrams }),
		stat("purrfly_relay_udp_received_bytes_total", "UDP bytes received.", func(s litenet.Stats) uint64 { return s.Bytes }),
		stat("purrfly_relay_udp_datagrams_sent_total", "UDP datagrams sent.", func(s litenet.Stats) uint64 { return s.Sent }),
		stat("purrfly_relay_udp_send_errors_total", "UDP datagrams lost to send errors.", func(s litenet.Stats) uint64 { return s.SendErrors }),
		stat("purrfly_relay_udp_resent_total", "Reliable LiteNetLib packets sent again.", func(s litenet.Stats) uint64 { return s.Resent }),
		stat("purrfly_relay_udp_malformed_total", "Malformed UDP datagrams or packets dropped (the peer stays).", func(s litenet.Stats) uint64 { return s.Malformed }),
		stat("purrfly_relay_udp_unknown_total", "UDP datagrams from addresses with no connection.", func(s litenet.Stats) uint64 { return s.Unknown }),
		stat("purrfly_relay_udp_rate_limited_total", "Answers to unknown UDP senders not sent (rate limit).", func(s litenet.Stats) uint64 { return s.RateLimited }),
		stat("purrfly_relay_udp_refused_total", "LiteNetLib connect requests refused (bad key, full tables).", func(s litenet.Stats) uint64 { return s.Refused }),
		stat("purrfly_relay_udp_evicted_total", "Unproven pending UDP connections pushed out by newer requests.", func(s litenet.Stats) uint64 { return s.Evicted }),
		stat("purrfly_relay_udp_accepted_total", "LiteNetLib connections accepted.", func(s litenet.Stats) uint64 { return s.Accepted }),
		gauge("purrfly_relay_udp_peers", "LiteNetLib peers (pending included).", func(s litenet.Stats) int { return s.Peers }),
		gauge("purrfly_relay_udp_pending", "LiteNetLib peers not authenticated yet.", func(s litenet.Stats) int { return s.Pending }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			m.unregister(reg)
			return nil, fmt.Errorf("failed to register relay UDP metrics: %w", err)
		}
		m.registered = append(m.registered, c)
	}
	return m, nil
}

// unregister takes the collectors out again (the socket could not be
// bound: a later Start registers them anew).
func (m *metrics) unregister(reg prometheus.Registerer) {
	for _, c := range m.registered {
		reg.Unregister(c)
	}
	m.registered = nil
}
