package relay

import (
	"errors"
	"net/http"
	"time"

	"github.com/purrfly/purrfly/internal/lockrank"
	"github.com/purrfly/purrfly/wire"
)

// Readiness (wire.PathReady, the relay's Fly machine check and what a
// rollout verifies) means registered: a boot is ready once the balancer
// accepted one of its heartbeats, and stays ready while the balancer would
// still list it at its defaults: for max(3 heartbeat intervals, 90 s)
// after the last accepted one (balancer.DefaultRelayExpiry and
// wire.RegisterRequest.HeartbeatSeconds). A balancer restarting for less
// than that leaves every relay ready; a relay with the wrong SECRET, or
// one that cannot reach its balancer, is never ready, and its 503 says
// which. /ping stays what it was: the process is up, with its boot id (the
// proxy's routing check: the balancer proves a new boot through it).

// balancerMinExpiry is the balancer's default RelayExpiry.
const balancerMinExpiry = 90 * time.Second

// readiness is what the registrar last learnt. Written by the registrar's
// goroutine, read by /ready handlers.
type readiness struct {
	life time.Duration // static: how long a registration lasts at the balancer

	mu   lockrank.Mutex
	okAt time.Time // guarded by mu: the last heartbeat the balancer accepted; zero: none yet this boot
	why  string    // guarded by mu: why the last heartbeat failed; empty after a success
}

func (r *readiness) registered(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.okAt, r.why = now, ""
}

func (r *readiness) setWhy(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.why = why
}

// failed records why a heartbeat failed, in words an operator can act on.
func (r *readiness) failed(balancer string, err error) {
	var we *wire.Error
	switch {
	case errors.As(err, &we) && errors.Is(we, wire.ErrUnauthorized):
		r.setWhy("the balancer at " + balancer + " refused this relay's credential (unauthorized): relay and balancer must share one SECRET")
	case errors.As(err, &we):
		r.setWhy("the balancer at " + balancer + " refused the registration: " + we.Error())
	default:
		r.setWhy("the balancer at " + balancer + " is unreachable: " + err.Error())
	}
}

// check reports whether the boot counts as registered at now, and why not.
func (r *readiness) check(now time.Time) (time.Time, string) {
	r.mu.Lock()
	at, why := r.okAt, r.why
	r.mu.Unlock()
	switch {
	case at.IsZero() && why == "":
		return at, "not registered with the balancer yet (first heartbeat pending)"
	case at.IsZero():
		return at, "never registered with the balancer: " + why
	case now.Sub(at) >= r.life:
		if why == "" {
			why = "no heartbeat attempted"
		}
		return time.Time{}, "no heartbeat accepted for " + now.Sub(at).Round(time.Second).String() + ", so the balancer has dropped this boot: " + why
	}
	return at, ""
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return wire.ErrMethodNotAllowed
	}
	if s.reg == nil {
		wire.WriteJSON(w, http.StatusOK, wire.Readiness{Ready: true, BootID: s.opts.BootID, Standalone: true})
		return nil
	}
	at, why := s.reg.ready.check(s.clock.Now())
	if why != "" {
		return wire.ErrNotReady.WithMessage("boot " + s.opts.BootID + " is not ready: " + why)
	}
	wire.WriteJSON(w, http.StatusOK, wire.Readiness{Ready: true, BootID: s.opts.BootID, RegisteredAt: at.UTC()})
	return nil
}
