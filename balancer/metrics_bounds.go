package balancer

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// registerBoundsMetrics registers the series of the balancer's bounds
// (what GET /v1/stats says under "bounds"); their refusals of allocations
// are purrfly_balancer_allocations_total's balancer_full and
// too_many_rooms results.
func registerBoundsMetrics(reg prometheus.Registerer, s *Server) error {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	for _, c := range []prometheus.Collector{
		gauge("purrfly_balancer_memory_budget_bytes", "The memory the balancer may use (GOMEMLIMIT, the cgroup's limit or the machine's memory; 0: unknown).",
			func() float64 { return float64(s.st.mem.budget) }),
		gauge("purrfly_balancer_memory_refuse_at_bytes", "The live heap past which new rooms are refused (503 balancer_full).",
			func() float64 { return float64(s.st.mem.refuseAt) }),
		gauge("purrfly_balancer_heap_live_bytes", "The heap the last garbage collection found live.",
			func() float64 { return float64(s.st.mem.readHeap()) }),
		gauge("purrfly_balancer_memory_refusing", "1 while new rooms are refused for memory.",
			func() float64 {
				if s.st.mem.full() {
					return 1
				}
				return 0
			}),
		gauge("purrfly_balancer_tombstones", "Tombstones held (two per released room: its incarnation's fence and its name's mark).",
			func() float64 { return float64(s.st.tombs.stats(s.clock.Now()).entries) }),
		gauge("purrfly_balancer_tombstones_max", "Tombstones held at most (BALANCER_MAX_TOMBSTONES).",
			func() float64 { return float64(s.st.tombs.max) }),
		gauge("purrfly_balancer_tombstone_horizon_seconds", "How far back every release is still fenced: the retention, or less while the table is full.",
			func() float64 { return s.st.tombs.stats(s.clock.Now()).horizon.Seconds() }),
		counter("purrfly_balancer_tombstones_evicted_total", "Tombstones dropped before their retention because the table was full.",
			func() float64 { return float64(s.st.tombs.stats(s.clock.Now()).evicted) }),
		gauge("purrfly_balancer_pending_allocations", "Allocations whose outcome a relay did not tell, pinning their names.",
			func() float64 { return float64(s.st.rooms.pendings.Load()) }),
		counter("purrfly_balancer_pending_allocations_dropped_total", "Indeterminate allocations not remembered because as many as the bound were.",
			func() float64 { return float64(s.st.rooms.pendingDropped.Load()) }),
		gauge("purrfly_balancer_room_sources", "Source addresses holding live rooms of their allocations (while the per-source cap is on).",
			func() float64 { return float64(s.st.rooms.sources.sources.Load()) }),
		gauge("purrfly_balancer_room_sources_at_max", "Source addresses holding BALANCER_MAX_ROOMS_PER_SOURCE live rooms.",
			func() float64 { return float64(s.st.rooms.sources.atCap.Load()) }),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("failed to register the balancer metrics: %w", err)
		}
	}
	return nil
}
