package wire

import "net/http"

// A balancer app may have a standby machine (Fly's MachineConfig.Standbys):
// a stopped copy Fly starts when the primary's host fails. Both run the
// same binary; exactly one serves.
//
//	PathBalancerYield POST, secret -> BalancerYield. Asks a standby to stop
//	                  serving: it answers once it no longer takes any
//	                  request (and then exits, its machine stopped again).
//	                  A primary answers Yielded false: it never yields.
const PathBalancerYield = "/internal/v2/yield"

// EnvBalancerStandbyFor names, in a standby balancer machine's env, the
// machine id of the primary it stands in for.
const EnvBalancerStandbyFor = "BALANCER_STANDBY_FOR"

// BalancerYield answers PathBalancerYield.
type BalancerYield struct {
	BalancerBoot string `json:"balancerBoot"`
	Yielded      bool   `json:"yielded"`
}

var (
	// ErrBalancerStandby: this balancer machine is a standby that does
	// not serve now (its primary does, or is taking over); retry.
	ErrBalancerStandby = newErr(http.StatusServiceUnavailable, "balancer_standby", true, "this balancer machine does not serve now; retry")
	// ErrBalancerSettling: the balancer started serving a moment ago and
	// its relays are still republishing their rooms; retry in a second.
	ErrBalancerSettling = newErr(http.StatusServiceUnavailable, "balancer_settling", true, "the balancer started a moment ago and is learning its relays' rooms; retry in a second")
)
