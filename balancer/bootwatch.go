package balancer

import (
	"net/http"
	"strconv"
	"time"

	"github.com/purrfly/purrfly/wire"
)

// handleBoot is wire.PathBalancerBoot, the relays' watch of this
// balancer's boot: it answers at once when the caller does not know this
// boot (?known= differs), else holds the request until ?wait= seconds
// pass (bounded by wire.MaxBootWait and by two thirds of the write
// timeout) or the balancer stops, and answers the boot. A relay whose
// watch ends in an error or a stopping balancer polls again within a
// second, and registers with the first new boot that answers: relays are
// back within about a second of a restarted balancer answering, not at
// their next heartbeat.
func (s *Server) handleBoot(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	known := q.Get("known")
	wait := time.Duration(0)
	if v := q.Get("wait"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return wire.ErrBadRequest.WithMessage("wait must be a non-negative number of seconds")
		}
		wait = min(time.Duration(n)*time.Second, wire.MaxBootWait, s.opts.HTTP.WithDefaults().Write*2/3)
	}
	if known == s.opts.BootID && wait > 0 && !s.draining.Load() {
		t := s.clock.NewTimer(wait)
		if s.onBootWait != nil {
			s.onBootWait()
		}
		select {
		case <-t.C():
		case <-r.Context().Done():
		case <-s.stopping:
		case <-s.yieldCh:
		}
		t.Stop()
	}
	wire.WriteJSON(w, http.StatusOK, wire.BalancerBoot{BalancerBoot: s.opts.BootID, Draining: s.draining.Load()})
	return nil
}
