package wire

// Admin API of the balancer used by the deploy tool (purrctl rollout):
// guarded by an admin key (fleet.go) or, for these three routes only, the
// shared SECRET ("Authorization: Bearer <SECRET>" or HeaderInternalSecret),
// which is the deploy tool's credential.
const (
	PathInstances  = "/v1/instances"            // GET -> InstancesResponse
	PathDrainFmt   = "/v1/instances/%s/drain"   // POST, id = bootId or machineId -> Instance
	PathUndrainFmt = "/v1/instances/%s/undrain" // POST: ends an admin drain -> Instance
)

// Instance statuses.
const (
	InstanceLive     = "live"
	InstanceDraining = "draining"
	// InstanceRetiring: replaced by a deploy, the relay takes no new room,
	// serves its games until they end and then stops (RetireBy at the
	// latest). It is the relay's own state, reported in every heartbeat.
	InstanceRetiring = "retiring"
	// InstanceStarting: registered, but players cannot reach it yet (Fly's
	// proxy routes to a new machine only once its checks pass): it takes no
	// new room until they can.
	InstanceStarting = "starting"
)

// Instance is one relay registration as the admin API shows it.
type Instance struct {
	BootID    string `json:"bootId"`
	MachineID string `json:"machineId"`
	Region    string `json:"region"`
	Endpoint  string `json:"endpoint"`
	Host      string `json:"host"`
	Status    string `json:"status"` // InstanceLive, InstanceDraining, InstanceRetiring or InstanceStarting
	// Stale is true while the relay has missed two heartbeats but is not
	// removed yet (added with the /v1 admin API).
	Stale         bool   `json:"stale,omitempty"`
	Rooms         int64  `json:"rooms"`
	Connections   int64  `json:"connections"`
	LastHeartbeat string `json:"lastHeartbeat"` // RFC 3339, UTC
	// Image, Labels and Capacity are what the relay reported at
	// registration (its FLY_IMAGE_REF, RELAY_LABELS, RELAY_MAX_*).
	Image    string            `json:"image,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Capacity Capacity          `json:"capacity,omitzero"`
	// RetireBy is, for a retiring relay, when it stops at the latest (RFC
	// 3339, UTC): what is still connected then is closed with 1012.
	RetireBy string `json:"retireBy,omitempty"`
}

// InstancesResponse is the body of GET /v1/instances.
type InstancesResponse struct {
	Instances []Instance `json:"instances"`
}
