package wire

import (
	"net/http"
	"time"
)

// Retiring (added within version 2). A deploy replaces a relay machine by
// overlap: a new machine is proven first, then the old one is retired. A
// retiring relay takes no new room (an allocation is ErrRetiring), serves
// its games, their reconnects and host migrations until they end, then
// stops by itself; at RetireBy it closes what is left with 1012, as a
// drain does at its deadline. It reports Retiring in every heartbeat.
//
//	PathRelayRetire  POST RetireRequest -> RetireStatus, with the shared
//	                 secret (HeaderInternalSecret, as every internal call).
//	                 The deploy tool reaches the exact machine through the
//	                 app's public URL with fly-force-instance-id. BootID must
//	                 be the relay's own boot (else ErrStaleBoot: another
//	                 process answers there). Idempotent: a second call
//	                 keeps the earlier RetireBy when it is sooner. GET
//	                 answers the RetireStatus without changing anything.
//
// Balancer boot watch (added within version 2): a relay learns that its
// balancer restarted within about a second instead of at its next
// heartbeat.
//
//	PathBalancerBoot GET ?known=<boot>&wait=<seconds>, secret ->
//	                 BalancerBoot. Answers at once when the balancer's
//	                 boot is not known, else holds the request for up to
//	                 wait seconds (at most MaxBootWait) or until the
//	                 balancer stops, then answers its boot.
const (
	PathRelayRetire  = "/internal/v2/retire"
	PathBalancerBoot = "/internal/v2/boot"
)

// MaxBootWait bounds one PathBalancerBoot long poll.
const MaxBootWait = 30 * time.Second

// MaxRetireAfter bounds how far in the future a RetireBy may be.
const MaxRetireAfter = 48 * time.Hour

// RetireRequest asks a relay to retire (PathRelayRetire).
type RetireRequest struct {
	BootID   string    `json:"bootId"`
	RetireBy time.Time `json:"retireBy"`
}

// RetireStatus is a relay's answer on PathRelayRetire: where its
// retirement stands.
type RetireStatus struct {
	BootID      string    `json:"bootId"`
	Retiring    bool      `json:"retiring"`
	RetireBy    time.Time `json:"retireBy,omitzero"`
	Rooms       int       `json:"rooms"`
	Connections int       `json:"connections"`
}

// BalancerBoot answers PathBalancerBoot.
type BalancerBoot struct {
	BalancerBoot string `json:"balancerBoot"`
	// Draining is true when the balancer is stopping: its successor
	// (another boot) is coming.
	Draining bool `json:"draining,omitempty"`
}

// ErrRetiring: the relay retires (a deploy replaced it) and takes no new
// room; the balancer places the room on another relay.
var ErrRetiring = newErr(http.StatusServiceUnavailable, "relay_retiring", true, "this relay is retiring: it takes no new room")
