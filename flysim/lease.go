package flysim

import (
	"net/http"
	"strconv"
	"time"

	fly "github.com/superfly/fly-go"
)

// Lease limits.
const (
	DefaultLeaseTTL = 30 * time.Second
	MaxLeaseTTL     = time.Hour
	leaseOwner      = "flysim@localhost"
	nonceHeader     = "fly-machine-lease-nonce"
)

// lease is a machine lease (guarded by Sim.mu through its machine).
type lease struct {
	nonce   string
	owner   string
	version string
	expires time.Time
}

// heldLocked returns m's lease if one is held and unexpired.
func (s *Sim) heldLocked(m *machine) *lease {
	if m.lease != nil && s.clk.Now().Before(m.lease.expires) {
		return m.lease
	}
	m.lease = nil
	return nil
}

// checkNonceLocked refuses a change while a lease is held and the request
// does not carry its nonce in fly-machine-lease-nonce.
func (s *Sim) checkNonceLocked(m *machine, r *http.Request) error {
	l := s.heldLocked(m)
	if l == nil {
		return nil
	}
	if r.Header.Get(nonceHeader) != l.nonce {
		return errf(http.StatusConflict, "machine %s: lease currently held by %s, expires at %s; send its nonce in %s",
			m.id, l.owner, l.expires.UTC().Format(time.RFC3339), nonceHeader)
	}
	return nil
}

func leaseJSON(l *lease) *fly.MachineLease {
	return &fly.MachineLease{Status: "success", Data: &fly.MachineLeaseData{
		Nonce: l.nonce, ExpiresAt: l.expires.Unix(), Owner: l.owner, Version: l.version,
	}}
}

func (a *apiServer) findLease(w http.ResponseWriter, r *http.Request) error {
	m, err := a.machineOf(r)
	if err != nil {
		return err
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	l := a.s.heldLocked(m)
	if l == nil {
		return errf(http.StatusNotFound, "lease not found")
	}
	writeJSON(w, http.StatusOK, leaseJSON(l))
	return nil
}

// acquireLease takes the lease for ?ttl= seconds (default 30). With the
// current nonce in fly-machine-lease-nonce it refreshes the lease instead
// (that is how flaps' RefreshLease calls it); while someone else holds it,
// 409.
func (a *apiServer) acquireLease(w http.ResponseWriter, r *http.Request) error {
	m, err := a.machineOf(r)
	if err != nil {
		return err
	}
	ttl := DefaultLeaseTTL
	if v := r.URL.Query().Get("ttl"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return errf(http.StatusBadRequest, "invalid ttl %q", v)
		}
		// Capped before the multiplication: n*time.Second past the
		// Duration's range wrapped around, and ttl=9223372037 granted a
		// lease that had expired in 1734 (FuzzLeaseTTL).
		ttl = time.Duration(min(n, int(MaxLeaseTTL/time.Second))) * time.Second
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	if m.state == StateDestroyed {
		return errf(http.StatusNotFound, "machine not found")
	}
	now := a.s.clk.Now()
	l := a.s.heldLocked(m)
	switch {
	case l == nil:
		l = &lease{nonce: newNonce(), owner: leaseOwner, version: newULID(now)}
		m.lease = l
	case r.Header.Get(nonceHeader) == l.nonce:
		l.version = newULID(now)
	default:
		return errf(http.StatusConflict, "machine %s: lease currently held by %s, expires at %s",
			m.id, l.owner, l.expires.UTC().Format(time.RFC3339))
	}
	l.expires = now.Add(ttl)
	writeJSON(w, http.StatusOK, leaseJSON(l))
	return nil
}

// releaseLease drops the lease when the request carries its nonce.
func (a *apiServer) releaseLease(w http.ResponseWriter, r *http.Request) error {
	m, err := a.machineOf(r)
	if err != nil {
		return err
	}
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	if err := a.s.checkNonceLocked(m, r); err != nil {
		return err
	}
	m.lease = nil
	writeJSON(w, http.StatusOK, map[string]string{"status": "success"})
	return nil
}
