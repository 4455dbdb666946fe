package rollout

import "time"

// Phase is a stage of a rollout.
type Phase string

// Phases, in order.
const (
	PhaseLaunch   Phase = "launch" // purrctl launch only: what is missing is created
	PhasePlan     Phase = "plan"
	PhaseCleanup  Phase = "cleanup" // retired machines destroyed, retirements found again (overlap.go)
	PhaseRelays   Phase = "relays"
	PhaseBalancer Phase = "balancer"
	PhaseRegister Phase = "register"
	PhaseSmoke    Phase = "smoke"
	PhaseRollback Phase = "rollback"
	PhaseRetiring Phase = "retiring" // the machines still retiring, and --wait-retired
	PhaseDone     Phase = "done"
)

// Status is where one machine (or phase) stands.
type Status string

// Statuses a machine goes through: waiting (planned), leasing, draining,
// updating, verifying, then done or failed; rolling-back and rolled-back
// only with --rollback. A relay replaced by overlap goes leasing,
// creating (its replacement), verifying (the replacement's proof),
// retiring, done; its replacement's own line verifying, done (or
// destroyed when its proof failed). A retiring machine ends retired.
const (
	StatusCreating    Status = "creating" // launch: an app, address, secret or machine
	StatusWaiting     Status = "waiting"
	StatusLeasing     Status = "leasing"
	StatusDraining    Status = "draining"
	StatusUpdating    Status = "updating"
	StatusVerifying   Status = "verifying"
	StatusDone        Status = "done"
	StatusFailed      Status = "failed"
	StatusRollingBack Status = "rolling-back"
	StatusRolledBack  Status = "rolled-back"
	StatusUndrained   Status = "undrained"
	StatusRetiring    Status = "retiring"  // no new rooms; it stops when its games have ended
	StatusRetired     Status = "retired"   // stopped by itself (and destroyed)
	StatusDestroyed   Status = "destroyed" // a failed or stray replacement, or a retired machine, destroyed
)

// What a progress event waits for (Event.Wait).
const (
	WaitLease    = "lease"    // a machine lease held by someone else
	WaitTakeover = "takeover" // a lease nobody refreshes, to expire
	WaitDrain    = "drain"    // a drained relay's rooms to empty
	WaitStarted  = "started"  // the machine to reach started at its new version
	WaitBoot     = "boot"     // a new boot of the image to answer /ping
	WaitHealthy  = "healthy"  // the new boot to stay healthy for the minimum healthy time
	WaitReady    = "ready"    // then ready, checks passing, registered
	WaitRegister = "register" // the balancer to list exactly the new relay boots
	WaitRetired  = "retired"  // --wait-retired: a retiring machine to stop (Until: its latest stop)
	// WaitMachinesAPI: a failed Machines API call to be retried (Until:
	// the retry).
	WaitMachinesAPI = "machines-api"
	WaitDNS         = "dns" // launch: a new app's public name to resolve and answer
)

// Event is one step of a rollout, for a machine or (Machine "") a phase.
// Observers get them in order, from the rollout's goroutine.
//
// An event with Wait set is a progress event: a wait under way, sent
// each time that wait polls (about every Timeouts.Poll). It keeps the
// machine's phase and status; Message says what is waited for with the
// latest detail, Until when the wait gives up (for WaitHealthy: when the
// minimum healthy time is over). Printers show it as a countdown.
type Event struct {
	Time    time.Time `json:"time"`
	Phase   Phase     `json:"phase"`
	App     string    `json:"app,omitempty"`
	Machine string    `json:"machine,omitempty"`
	Region  string    `json:"region,omitempty"`
	Status  Status    `json:"status"`
	Message string    `json:"message"`
	// Image is the machine's image after this event (the target once updated).
	Image string `json:"image,omitempty"`
	// OldBoot is the boot being replaced; Boot the live (or proven new) one.
	OldBoot string `json:"oldBoot,omitempty"`
	Boot    string `json:"boot,omitempty"`
	// Rooms and Connections are what a drained relay still held when its
	// drain ended (interrupted by the update when Connections > 0).
	Rooms       int64 `json:"rooms,omitempty"`
	Connections int64 `json:"connections,omitempty"`
	// Wait (one of the Wait constants) and Until: see above.
	Wait  string    `json:"wait,omitempty"`
	Until time.Time `json:"until,omitzero"`
	// Changes are, in a plan event, the config fields the update changes
	// (as MachineResult.Changes).
	Changes []string `json:"changes,omitempty"`
	// Replacement is, for a relay replaced by overlap, the machine that
	// replaces it; RetireBy, for a retiring machine, its latest stop.
	Replacement string    `json:"replacement,omitempty"`
	RetireBy    time.Time `json:"retireBy,omitzero"`
}

// Action says what the rollout did (or, in a plan, will do) to a machine.
type Action string

// Actions.
const (
	ActionUpdate     Action = "update"      // plan: will be updated
	ActionVerify     Action = "verify"      // plan: already on the image, will be verified
	ActionUpdated    Action = "updated"     // updated and its new boot proven
	ActionVerified   Action = "verified"    // was on the image, verified, not redeployed
	ActionUntouched  Action = "untouched"   // not reached (the rollout stopped before)
	ActionFailed     Action = "failed"      // its step failed
	ActionRolledBack Action = "rolled-back" // failed, then restored to its previous image
	ActionReplace    Action = "replace"     // plan: a new machine will replace it (overlap), then it retires
	ActionReplaced   Action = "replaced"    // its replacement proven, it retires (MachineResult.Replacement)
	ActionCreate     Action = "create"      // launch --dry-run: would be created
	ActionKeep       Action = "keep"        // launch --dry-run: exists, kept as it is (launch removes nothing)
)

// MachineResult is one machine's outcome.
type MachineResult struct {
	Role      string `json:"role"` // relay or balancer
	App       string `json:"app"`
	Machine   string `json:"machine"`
	Region    string `json:"region"`
	State     string `json:"state"`
	FromImage string `json:"fromImage"`
	Image     string `json:"image"`
	OldBoot   string `json:"oldBoot,omitempty"`
	Boot      string `json:"boot,omitempty"`
	Version   string `json:"version,omitempty"`
	Action    Action `json:"action"`
	// InterruptedRooms and InterruptedConnections: what the update cut off
	// on a relay whose drain deadline passed.
	InterruptedRooms       int64 `json:"interruptedRooms,omitempty"`
	InterruptedConnections int64 `json:"interruptedConnections,omitempty"`
	// Changes are the config fields the update changes besides the image
	// ("env.LOG_LEVEL: "info" -> "debug""), for an app whose config comes
	// from its fly.toml.
	Changes []string `json:"changes,omitempty"`
	// Replacement is the machine that replaced this one by overlap (Boot
	// is then the replacement's boot, Image its image); RetireBy is when
	// this one stops at the latest.
	Replacement string    `json:"replacement,omitempty"`
	RetireBy    time.Time `json:"retireBy,omitzero"`
}

// RetiringMachine is a relay machine still retiring when the rollout
// ended (or, with --wait-retired, how it ended): its games and its latest
// stop.
type RetiringMachine struct {
	App      string    `json:"app"`
	Machine  string    `json:"machine"`
	Region   string    `json:"region"`
	Boot     string    `json:"boot,omitempty"`
	Image    string    `json:"image,omitempty"`
	State    string    `json:"state"`
	Rooms    int64     `json:"rooms"`
	Players  int64     `json:"players"`
	RetireBy time.Time `json:"retireBy,omitzero"`
	// Retired: it stopped (and was destroyed); Closed, when its latest
	// stop passed first, what was still there then (closed with 1012).
	Retired       bool  `json:"retired,omitempty"`
	ClosedRooms   int64 `json:"closedRooms,omitempty"`
	ClosedPlayers int64 `json:"closedPlayers,omitempty"`
}

// Result is what a rollout did. On failure it is returned with the error.
type Result struct {
	Env      string          `json:"env"`
	Image    string          `json:"image"`
	DryRun   bool            `json:"dryRun,omitempty"`
	Machines []MachineResult `json:"machines"`
	// Registered are the relay boots the balancer listed at the end.
	Registered []string `json:"registered,omitempty"`
	// Created lists what launch created ("app purrfly-relay-a", "machine
	// 148e21dad76789 of purrfly-relay-a in ams"); empty when it found the
	// fleet complete.
	Created []string `json:"created,omitempty"`
	// SmokeRegions passed the smoke test.
	SmokeRegions []string `json:"smokeRegions,omitempty"`
	// Retiring are the relay machines still retiring at the end (all
	// retired, with --wait-retired), by app.
	Retiring []RetiringMachine `json:"retiring,omitempty"`
	// Destroyed lists the machines this run destroyed: retired ones, a
	// failed replacement.
	Destroyed []string `json:"destroyed,omitempty"`
}
