package balancer

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/purrfly/purrfly/internal/clock"
	"github.com/purrfly/purrfly/wire"
)

// The fleet's recent past, for the dashboard's chart: one sample of the
// totals a minute, the last hour kept (a fixed ring: bounded memory).
const (
	historyEvery = time.Minute
	historyLen   = 60
)

// statsHistory is the ring of samples. Safe for concurrent use.
type statsHistory struct {
	mu   sync.Mutex
	ring [historyLen]wire.StatsSample // guarded by mu
	n    int                          // guarded by mu: samples recorded, ever
}

func (h *statsHistory) record(at time.Time, st wire.Stats) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring[h.n%historyLen] = wire.StatsSample{At: at.UTC().Format(time.RFC3339), Relays: st.Relays, Rooms: st.Rooms, Players: st.Players}
	h.n++
}

// samples are the kept samples, oldest first.
func (h *statsHistory) samples() []wire.StatsSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := min(h.n, historyLen)
	out := make([]wire.StatsSample, 0, k)
	for i := h.n - k; i < h.n; i++ {
		out = append(out, h.ring[i%historyLen])
	}
	return out
}

// historyLoop samples the fleet at once and then every historyEvery
// until ctx ends.
func (s *Server) historyLoop(ctx context.Context) {
	sample := func() { s.history.record(s.clock.Now(), s.st.stats()) }
	sample()
	clock.Every(ctx, s.clock, historyEvery, sample)
}

func (s *Server) handleStatsHistory(w http.ResponseWriter, r *http.Request) error {
	h := wire.StatsHistory{IntervalSeconds: int(historyEvery / time.Second), Samples: s.history.samples()}
	return writeTagged(w, r, h, h)
}
